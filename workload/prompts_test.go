package workload

import (
	"encoding/json"
	"path/filepath"
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
	w, err := New(row, "chat", "m", tok, 99)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for seq := int64(0); seq < 60; seq++ {
		p := w.Prompt(seq)
		if got := tok.Count(p.text); got != p.Requested || p.InTokens != p.Requested {
			t.Errorf("seq %d: asked %d tokens, counted %d (reported %d)", seq, p.Requested, got, p.InTokens)
		}
		if p.Requested > 16 && seen[p.text[:40]] {
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
	a, _ := New(row, "chat", "m", tok, 1)
	b, _ := New(row, "chat", "m", tok, 2)
	for seq := int64(0); seq < 20; seq++ {
		pa, pb := a.Prompt(seq), b.Prompt(seq)
		if pa.Requested != pb.Requested || pa.MaxTokens != pb.MaxTokens {
			t.Errorf("seq %d: lengths %d/%d vs %d/%d; want equal across runs", seq, pa.Requested, pa.MaxTokens, pb.Requested, pb.MaxTokens)
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
	w, err := New(row, "chat", "m", tok, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.prefixes) != 2 {
		t.Fatalf("%d prefixes; want 2", len(w.prefixes))
	}
	used := map[int]int{}
	for seq := int64(0); seq < 40; seq++ {
		p := w.Prompt(seq)
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
	w2, _ := New(row, "chat", "m", tok, 4)
	if w2.prefixes[0] != w.prefixes[0] {
		t.Error("warm prefixes differ between runs")
	}
	cold := *row
	cold.Prefix = &schema.Prefix{Length: 128, Distinct: 1}
	c1, _ := New(&cold, "chat", "m", tok, 3)
	c2, _ := New(&cold, "chat", "m", tok, 4)
	if c1.prefixes[0] == c2.prefixes[0] {
		t.Error("cold prefixes repeat across runs; a server cache could hold them")
	}
	bodies, _ := w.primeBodies(true)
	if len(bodies) != 2 {
		t.Errorf("%d priming requests; want one per warm prefix", len(bodies))
	}
}

func TestBodySplicesExtras(t *testing.T) {
	w := &Row{api: "chat", model: "m", extra: []byte(`"ignore_eos":true,"temperature":0`)}
	b, err := w.Body(Prompt{text: "hi \"there\"", MaxTokens: 3}, false)
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
	w, _ := New(row, "chat", "m", builtinTok(t), 1)
	lo, hi := 1000, 0
	for seq := int64(0); seq < 500; seq++ {
		n := sampleLength(w.rng(seq), row.Input)
		lo, hi = min(lo, n), max(hi, n)
	}
	if lo != 80 || hi != 110 {
		t.Errorf("lengths in [%d, %d]; want clipped to exactly [80, 110]", lo, hi)
	}
}

// TestTrialPromptsDiffer: trial k of a row sends other text than trial 1
// (so it is not served from the cache trial 1 filled) in per_run and
// per_experiment modes, the same in off, and trial 1 is the row's prompt
// as without repeat.
func TestTrialPromptsDiffer(t *testing.T) {
	tok := builtinTok(t)
	for _, mode := range []string{"per_run", "per_experiment", "off"} {
		p := plan(t, `server: {target: builtin}
rows: [{id: r, requests: 4, concurrency: 1, input_tokens: 64, output_tokens: 4, repeat: 3, unique_prompts: `+mode+`}]
`)
		row := &p.Rows[0]
		plain, err := New(row, "chat", "m", tok, 7)
		if err != nil {
			t.Fatal(err)
		}
		var text []string
		for k := 1; k <= 3; k++ {
			w, err := NewTrial(row, "chat", "m", tok, 7, k)
			if err != nil {
				t.Fatal(err)
			}
			text = append(text, w.Prompt(0).text)
		}
		if text[0] != plain.Prompt(0).text {
			t.Errorf("%s: trial 1's prompt differs from the row's without repeat", mode)
		}
		same := text[0] == text[1] || text[1] == text[2]
		if same != (mode == "off") {
			t.Errorf("%s: trials send the same prompt: %v; want %v", mode, same, mode == "off")
		}
	}
}

// plan is the plan of an experiment file's body, for tests that want rows
// as the schema resolves them.
func plan(t *testing.T, yaml string) *schema.Plan {
	t.Helper()
	p, err := schema.Parse(filepath.Join(t.TempDir(), "exp.yaml"), []byte("apiVersion: infermatrix/v1\nname: t\n"+yaml), schema.Options{})
	if err != nil {
		t.Fatalf("plan:\n%v", err)
	}
	return p
}

// TestPromptsAreTrimmed: a synthetic prompt neither starts nor ends with
// whitespace. Chat templates trim a message (Llama 3's content|trim), so
// a prompt cut at a line break would reach the model a token shorter than
// the client counted, and the row's token check would see a difference
// the template did not make. Over many runs (nonces) the corpus windows
// land on every kind of edge.
func TestPromptsAreTrimmed(t *testing.T) {
	tok := builtinTok(t)
	for _, unique := range []string{"", schema.UniqueOff} {
		row := &schema.PlannedRow{ID: "r", Seed: 3, UniquePrompts: unique, Input: schema.Length{Values: []int{1, 2, 5, 16, 48, 200}}, Output: schema.Length{Mean: 8}}
		for nonce := uint64(0); nonce < 200; nonce++ {
			w, err := New(row, "chat", "m", tok, nonce)
			if err != nil {
				t.Fatal(err)
			}
			for seq := int64(0); seq < 12; seq++ {
				p := w.Prompt(seq)
				if strings.TrimSpace(p.text) != p.text {
					t.Fatalf("unique_prompts %q, nonce %d, seq %d: prompt %q has whitespace at an edge", unique, nonce, seq, p.text)
				}
				if got := tok.Count(p.text); got != p.InTokens {
					t.Fatalf("nonce %d, seq %d: counted %d, reported %d", nonce, seq, got, p.InTokens)
				}
			}
		}
	}
}
