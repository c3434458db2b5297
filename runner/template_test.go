package runner

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/sim"
)

// TestBuiltinTemplateAllowed runs chat rows on the built-in server with the
// Llama preset, which counts Llama 3.1's chat template as vLLM does: each
// record says the server counted the 35 template tokens beside the 48
// asked for, and the token check allows them, so the row is not flagged;
// a second row's prompts counted with another tokenizer than the server's
// still are. A completions row has no template (and Llama's BOS is its
// one token over).
func TestBuiltinTemplateAllowed(t *testing.T) {
	tiny, err := filepath.Abs(filepath.Join("..", "tokenizer", "testdata", "tiny", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	p := plan(t, `server: {target: builtin, sim: {preset: tiny-fast, model: meta-llama/Llama-3.1-8B-Instruct}}
defaults: {input_tokens: 48, output_tokens: 2, concurrency: 2, body: {ignore_eos: true}}
rows:
  - {id: chat, requests: 4}
  - {id: other_tokenizer, requests: 4, tokenizer: `+tiny+`, input_tokens: 400}
  - {id: completions, requests: 4, api: completions}
`)
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records(t, res.Dir, "chat") {
		if r.Error != nil || r.TemplateTokens != 35 || r.InputTokens.Server == nil || *r.InputTokens.Server != 48+35 || r.InputTokens.Client != 48 {
			t.Errorf("chat seq %d: template %d, input %+v (server %v), error %+v; want 35 template tokens beside 48", r.Seq, r.TemplateTokens, r.InputTokens, deref(r.InputTokens.Server), r.Error)
		}
	}
	if c := res.Summary.Row("chat").Tokens; c.Mismatch || c.Input.Diff != 0 || c.Input.TemplateMean != 35 {
		t.Errorf("chat: token check %+v; want the template allowed and nothing flagged", c)
	}
	if c := res.Summary.Row("other_tokenizer").Tokens; !c.Mismatch || !c.Input.Mismatch {
		t.Errorf("other_tokenizer: token check %+v; want the input flagged: the server counts with o200k, the row with a 279-token vocabulary", c)
	}
	for _, r := range records(t, res.Dir, "completions") {
		if r.TemplateTokens != 0 || r.InputTokens.Server == nil || *r.InputTokens.Server != 49 {
			t.Errorf("completions seq %d: template %d, input %+v (server %v); want no template and Llama's BOS", r.Seq, r.TemplateTokens, r.InputTokens, deref(r.InputTokens.Server))
		}
	}
}

// TestURLTemplateProbed runs a chat row against the built-in server behind
// a URL, as infermatrix sim serves it: the client asks its /tokenize what
// the Llama template adds (35 tokens) and the check allows them. Behind a
// server without /tokenize the template is unknown, and flagged as on any
// server that cannot say.
func TestURLTemplateProbed(t *testing.T) {
	inst, err := sim.Start(sim.Config{Model: "meta-llama/Llama-3.1-8B-Instruct", TTFT: time.Millisecond, ITL: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Close() })
	var tokenizes atomic.Int64
	noTokenize := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/tokenize" {
			tokenizes.Add(1)
			http.NotFound(w, r)
			return
		}
		inst.Server.ServeHTTP(w, r)
	}))
	t.Cleanup(noTokenize.Close)
	for _, c := range []struct {
		name, url string
		template  int
		mismatch  bool
	}{
		{"sim", inst.BaseURL, 35, false},
		{"no /tokenize", noTokenize.URL + "/v1", 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p := planIn(t, dir, `server: {urls: [`+c.url+`]}
defaults: {input_tokens: 48, output_tokens: 2, concurrency: 2, body: {ignore_eos: true}}
rows:
  - {id: chat, requests: 6}
`, nil)
			res, err := Run(context.Background(), p, Options{Out: filepath.Join(dir, "run")})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range records(t, res.Dir, "chat") {
				if r.Error != nil || r.TemplateTokens != c.template || *r.InputTokens.Server != 48+35 {
					t.Errorf("seq %d: template %d, input %+v (server %v), error %+v; want %d template tokens of 83", r.Seq, r.TemplateTokens, r.InputTokens, deref(r.InputTokens.Server), r.Error, c.template)
				}
			}
			if ck := res.Summary.Row("chat").Tokens; ck.Mismatch != c.mismatch {
				t.Errorf("token check %+v; want mismatch %v", ck, c.mismatch)
			}
		})
	}
	if n := tokenizes.Load(); n != 1 {
		t.Errorf("the server without /tokenize was asked %d times; want once, then no more", n)
	}
}
