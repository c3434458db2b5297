package redact

import (
	"strings"
	"testing"
)

func TestCommandMasksCredentialFlags(t *testing.T) {
	got := strings.Join(Command([]string{"vllm", "serve", "m", "--api-key", "sk-1", "--hf-token=abc", "--port", "8000", "--tokenizer", "t"}), " ")
	want := "vllm serve m --api-key " + Mask + " --hf-token=" + Mask + " --port 8000 --tokenizer t"
	if got != want {
		t.Errorf("Command = %q; want %q", got, want)
	}
}
