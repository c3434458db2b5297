package main

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// completions runs cobra's hidden __complete command, as a shell's
// completion script does, and returns the offered words.
func completions(t *testing.T, args ...string) []string {
	t.Helper()
	r := cli(t, context.Background(), append([]string{"__complete"}, args...)...)
	if r.code != 0 {
		t.Fatalf("__complete %v: exit %d: %s", args, r.code, r.stderr)
	}
	var words []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if !strings.HasPrefix(line, ":") {
			words = append(words, line)
		}
	}
	return words
}

func TestCompletionOffersRowIDs(t *testing.T) {
	const file = "../../experiments/llama-8b-h100-matrix.yaml"
	got := completions(t, "run", file, "--rows", "sat")
	want := []string{"saturation", "saturation/c=4", "saturation/c=16", "saturation/c=48"}
	if !slices.Equal(got, want) {
		t.Errorf("--rows sat offers %q, want %q", got, want)
	}
	// A list keeps what is typed and leaves out ids already chosen.
	got = completions(t, "plan", file, "--rows", "short_chat,")
	if len(got) == 0 || slices.Contains(got, "short_chat,short_chat") || !slices.Contains(got, "short_chat,long_decode") {
		t.Errorf("--rows short_chat, offers %q", got)
	}
	if got := completions(t, "run", "does-not-exist.yaml", "--rows", ""); len(got) != 0 {
		t.Errorf("rows of a missing file: %q, want nothing", got)
	}
}

func TestCompletionOffersExperimentFiles(t *testing.T) {
	if got := completions(t, "validate", ""); !slices.Equal(got, []string{"yaml", "yml"}) {
		t.Errorf("validate offers %q, want the yaml and yml extensions", got)
	}
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		r := cli(t, context.Background(), "completion", shell)
		if r.code != 0 || !strings.Contains(r.stdout, "infermatrix") {
			t.Errorf("completion %s: exit %d, %d bytes", shell, r.code, len(r.stdout))
		}
	}
}
