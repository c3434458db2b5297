package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mixedText is a long text of every kind a model answers with: English
// and CJK prose, code, numbers, runs of spaces and newlines, combining
// marks (which Qwen's NFC joins), Qwen's added tokens, emoji, and bytes
// that are not UTF-8, so that the pauses of a count fall inside and
// beside every kind of pre-token.
func mixedText(t *testing.T, size int) string {
	t.Helper()
	var parts []string
	for _, name := range []string{"english.txt", "cjk.txt"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, string(data))
	}
	parts = append(parts,
		"func main() {\n\tfor i := 0; i < 10; i++ {\n\t\tfmt.Println(i*31337, \"x\")\n\t}\n}\n",
		"3.14159265358979 1,000,000 ١٢٣ 2026-11-27T22:54:32Z",
		"   \n\n\t  \r\n     word    ",
		"e\u0301te\u0301 Cafe\u0301 n\u0303 A\u030a",
		"<|im_start|>assistant\n<think>\nhm</think><|im_end|><|endoftext|>",
		"🙂👍🏽 👨‍👩‍👧 ",
		"bad \xff\xfe bytes \xc3",
		"I'm you'RE they'll WE'VE",
	)
	var sb strings.Builder
	for i := 0; sb.Len() < size; i++ {
		sb.WriteString(parts[i%len(parts)])
		p := parts[(i*7+3)%len(parts)]
		sb.WriteString(p[:i%min(40, len(p))])
	}
	return sb.String()
}

// TestCountPacedIsCount: a count taken in steps, paused between
// pre-tokens, is Count's whatever the step, on real tokenizers. The
// client counts huge outputs this way (protocol/outcount.go); its token
// figures must not change with it.
func TestCountPacedIsCount(t *testing.T) {
	text := mixedText(t, sample(128<<10)) // a fifth under -race
	gpt2, err := New(filepath.Join(sharedDir(t), "gpt2"))
	if err != nil {
		t.Fatal(err)
	}
	toks := map[string]Tokenizer{"builtin": builtinTok(t), "qwen3": loadQwen3(t), "gpt2": gpt2}
	for name, tk := range toks {
		want := tk.Count(text)
		for _, every := range []int{1, 7, 1024, 1 << 30} {
			pauses := 0
			n, complete := CountPaced(tk, text, every, func() bool { pauses++; return true })
			if n != want || !complete {
				t.Errorf("%s every %d: CountPaced = %d, %v; Count = %d", name, every, n, complete, want)
			}
			if every <= 1024 && pauses < want/(4*every) {
				// A pause comes once a step holds every ids, and a
				// pre-token can add several at once; but the count must
				// be cut into about want/every steps, not taken whole.
				t.Errorf("%s every %d: %d pauses over %d tokens", name, every, pauses, want)
			}
		}
		// Every prefix length class too: the pipeline's end is where a
		// pending pre-token is flushed.
		for _, cut := range []int{1, 17, 4095, 20001} {
			s := text[:cut]
			n, _ := CountPaced(tk, s, 2, func() bool { return true })
			if want := tk.Count(s); n != want {
				t.Errorf("%s, %d bytes: CountPaced = %d, Count = %d", name, cut, n, want)
			}
		}
	}
}

// TestCountPacedStops: a pause that says stop ends the count, reported
// incomplete, so that an interrupted run does not wait on it.
func TestCountPacedStops(t *testing.T) {
	tk := builtinTok(t)
	text := mixedText(t, 64<<10)
	pauses := 0
	n, complete := CountPaced(tk, text, 100, func() bool { pauses++; return pauses < 3 })
	if complete || n != 0 || pauses != 3 {
		t.Errorf("CountPaced = %d, %v after %d pauses; want 0, false after 3", n, complete, pauses)
	}
}

func builtinTok(t *testing.T) Tokenizer {
	t.Helper()
	tk, err := New(Builtin)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}
