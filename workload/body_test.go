package workload

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/infermatrix/infermatrix/schema"
)

// slowBody is Body's encoding without the template: json.Marshal of
// go-openai's request, spliced.
func slowBody(t *testing.T, w *Row, p Prompt, stream bool) []byte {
	t.Helper()
	saved := w.bodies
	w.bodies = [2]*bodyTemplate{}
	defer func() { w.bodies = saved }()
	b, err := w.Body(p, stream)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBodyTemplateIsMarshal: a body made from the row's template is, byte
// for byte, the one json.Marshal makes, for text of every awkward kind
// (HTML characters, control characters, quotes, U+2028, invalid UTF-8),
// both APIs, streamed or not, with and without the row's body fields.
func TestBodyTemplateIsMarshal(t *testing.T) {
	texts := []string{
		"plain prompt", `quotes " and \ backslash`, "<b>&amp;</b> > <", "tab\tnl\ncr\r bs\b ff\f nul\x00 \x1f \x7f",
		"line\u2028para\u2029", "bad \xff\xfe utf8 \xc3", "東京 🙂 naïve", "placeholder 1987654321 " + placeholderText,
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		b := make([]byte, r.IntN(40)+1)
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		texts = append(texts, string(b))
	}
	for _, api := range []string{"chat", "completions"} {
		for _, body := range []map[string]any{nil, {"ignore_eos": true, "temperature": 0.5, "x": "<&>"}} {
			row := &schema.PlannedRow{ID: "t", Seed: 1, Input: schema.Length{Values: []int{4}}, Output: schema.Length{Values: []int{8}}, Body: body}
			w, err := New(row, api, "org/<model>", builtinTok(t), 1)
			if err != nil {
				t.Fatal(err)
			}
			if w.bodies[0] == nil || w.bodies[1] == nil {
				t.Fatalf("%s: no body template", api)
			}
			for i, text := range texts {
				for _, stream := range []bool{false, true} {
					p := Prompt{text: text, MaxTokens: 1 + i*37}
					got, err := w.Body(p, stream)
					if err != nil {
						t.Fatal(err)
					}
					if want := slowBody(t, w, p, stream); !bytes.Equal(got, want) {
						t.Fatalf("%s stream=%v text %q:\n got %s\nwant %s", api, stream, text, got, want)
					}
					if !json.Valid(got) {
						t.Fatalf("invalid JSON %s", got)
					}
				}
			}
		}
	}
}

// TestBodyTemplateLeavesTheRest: bodies the template cannot make are
// encoded as before: dataset messages, no max_tokens, empty text.
func TestBodyTemplateLeavesTheRest(t *testing.T) {
	row := &schema.PlannedRow{ID: "t", Seed: 1, Input: schema.Length{Values: []int{4}}, Output: schema.Length{Values: []int{8}}}
	w, err := New(row, "chat", "m", builtinTok(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Prompt{
		{messages: []openai.ChatCompletionMessage{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}}, MaxTokens: 5},
		{text: "no max tokens"},
		{text: "", MaxTokens: 3},
	} {
		got, err := w.Body(p, true)
		if err != nil {
			t.Fatal(err)
		}
		if want := slowBody(t, w, p, true); !bytes.Equal(got, want) {
			t.Errorf("%+v:\n got %s\nwant %s", p, got, want)
		}
		if strings.Contains(string(got), placeholderText) {
			t.Errorf("placeholder leaked: %s", got)
		}
	}
}
