package runner

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/tokenizer"
)

func builtinTok(t testing.TB) tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.New("builtin")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestPromptsHaveExactLengths checks the promise synthetic prompts make:
// the tokenizer counts exactly the requested number of tokens.
func TestPromptsHaveExactLengths(t *testing.T) {
	tok := builtinTok(t)
	row := &schema.PlannedRow{ID: "r", Seed: 1, Input: schema.Length{Values: []int{1, 2, 7, 64, 333, 1024, 4096}}, Output: schema.Length{Mean: 8}}
	w, err := newWorkload(row, "chat", "m", tok, 99)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for seq := int64(0); seq < 60; seq++ {
		p := w.prompt(seq)
		if got := tok.Count(p.text); got != p.requested || p.inTokens != p.requested {
			t.Errorf("seq %d: asked %d tokens, counted %d (reported %d)", seq, p.requested, got, p.inTokens)
		}
		if p.requested > 16 && seen[p.text[:40]] {
			t.Errorf("seq %d: prompt starts like an earlier one; prompts must not share a first block", seq)
		}
		seen[p.text[:min(40, len(p.text))]] = true
	}
}

// TestPromptLengthsAreReproducible checks that lengths follow the seed
// while the text changes from run to run (the nonce), so a rerun cannot
// hit a server's prefix cache.
func TestPromptLengthsAreReproducible(t *testing.T) {
	tok := builtinTok(t)
	row := &schema.PlannedRow{ID: "r", Seed: 5, Input: schema.Length{Mean: 200, Stddev: 50, Min: 1}, Output: schema.Length{Mean: 100, Stddev: 20, Min: 1}}
	a, _ := newWorkload(row, "chat", "m", tok, 1)
	b, _ := newWorkload(row, "chat", "m", tok, 2)
	for seq := int64(0); seq < 20; seq++ {
		pa, pb := a.prompt(seq), b.prompt(seq)
		if pa.requested != pb.requested || pa.maxTokens != pb.maxTokens {
			t.Errorf("seq %d: lengths %d/%d vs %d/%d; want equal across runs", seq, pa.requested, pa.maxTokens, pb.requested, pb.maxTokens)
		}
		if pa.text == pb.text {
			t.Errorf("seq %d: identical text across runs", seq)
		}
	}
}

func TestSharedPrefixes(t *testing.T) {
	tok := builtinTok(t)
	row := &schema.PlannedRow{ID: "r", Seed: 1, Input: schema.Length{Mean: 300}, Output: schema.Length{Mean: 4},
		Prefix: &schema.Prefix{Length: 128, Distinct: 2, Warm: true}}
	w, err := newWorkload(row, "chat", "m", tok, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.prefixes) != 2 {
		t.Fatalf("%d prefixes; want 2", len(w.prefixes))
	}
	used := map[int]int{}
	for seq := int64(0); seq < 40; seq++ {
		p := w.prompt(seq)
		if tok.Count(p.text) != 300 {
			t.Errorf("seq %d: %d tokens; want 300", seq, tok.Count(p.text))
		}
		k := -1
		for i, px := range w.prefixes {
			if strings.HasPrefix(p.text, px) {
				k = i
			}
		}
		if k < 0 {
			t.Fatalf("seq %d: prompt does not start with a shared prefix", seq)
		}
		used[k]++
	}
	if used[0] == 0 || used[1] == 0 {
		t.Errorf("prefix use %v; want both drawn", used)
	}
	// Warm prefixes are the same on every run; cold ones are not.
	w2, _ := newWorkload(row, "chat", "m", tok, 4)
	if w2.prefixes[0] != w.prefixes[0] {
		t.Error("warm prefixes differ between runs")
	}
	cold := *row
	cold.Prefix = &schema.Prefix{Length: 128, Distinct: 1}
	c1, _ := newWorkload(&cold, "chat", "m", tok, 3)
	c2, _ := newWorkload(&cold, "chat", "m", tok, 4)
	if c1.prefixes[0] == c2.prefixes[0] {
		t.Error("cold prefixes repeat across runs; a server cache could hold them")
	}
	bodies, _ := w.primeBodies(true)
	if len(bodies) != 2 {
		t.Errorf("%d priming requests; want one per warm prefix", len(bodies))
	}
}

func TestBodySplicesExtras(t *testing.T) {
	w := &workload{api: "chat", model: "m", extra: []byte(`"ignore_eos":true,"temperature":0`)}
	b, err := w.body(prompt{text: "hi \"there\"", maxTokens: 3}, false)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	msgs := m["messages"].([]any)
	if m["model"] != "m" || m["max_tokens"] != 3.0 || m["ignore_eos"] != true || m["temperature"] != 0.0 || m["stream"] != false ||
		msgs[0].(map[string]any)["content"] != `hi "there"` || m["stream_options"] != nil {
		t.Errorf("body = %s", b)
	}
}

func TestSampleLength(t *testing.T) {
	row := &schema.PlannedRow{ID: "r", Seed: 1, Input: schema.Length{Mean: 100, Stddev: 30, Min: 80, Max: 110}, Output: schema.Length{Mean: 1}}
	w, _ := newWorkload(row, "chat", "m", builtinTok(t), 1)
	lo, hi := 1000, 0
	for seq := int64(0); seq < 500; seq++ {
		n := sampleLength(w.rng(seq), row.Input)
		lo, hi = min(lo, n), max(hi, n)
	}
	if lo != 80 || hi != 110 {
		t.Errorf("lengths in [%d, %d]; want clipped to exactly [80, 110]", lo, hi)
	}
}
