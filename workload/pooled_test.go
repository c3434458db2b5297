package workload

import (
	"encoding/json"
	"testing"
)

// TestPooledBodies checks what an embeddings and a rerank request carry:
// batch inputs of the asked length, each with its own tag, and for rerank
// one query shared by the documents.
func TestPooledBodies(t *testing.T) {
	p := plan(t, `server: {target: builtin, api: embeddings}
defaults: {requests: 1, concurrency: 1}
rows:
  - {id: emb, input_tokens: 24, batch: 4}
  - {id: rr, api: rerank, input_tokens: 20, query_tokens: 8, batch: 3}
`)
	tok := builtinTok(t)
	for i, row := range p.Rows {
		api := p.RowAPI(&p.Rows[i])
		w, err := New(&p.Rows[i], api, "m", tok, 7)
		if err != nil {
			t.Fatal(err)
		}
		pr := w.Prompt(1)
		b, err := w.Body(pr, false)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Input     []string `json:"input"`
			Query     string   `json:"query"`
			Documents []string `json:"documents"`
			Stream    *bool    `json:"stream"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		texts, per, query := got.Input, 24, 0
		if api == "rerank" {
			texts, per, query = got.Documents, 20, 8
			if n := tok.Count(got.Query); n != 8 {
				t.Errorf("query of %d tokens, want 8", n)
			}
		}
		if len(texts) != row.Batch || got.Stream != nil {
			t.Fatalf("%s: %d inputs (want %d), stream %v: %s", row.ID, len(texts), row.Batch, got.Stream, b)
		}
		seen := map[string]bool{}
		for _, x := range texts {
			if n := tok.Count(x); n != per {
				t.Errorf("%s: an input of %d tokens, want %d", row.ID, n, per)
			}
			if seen[x[:8]] {
				t.Errorf("%s: two inputs start alike: %q", row.ID, x[:8])
			}
			seen[x[:8]] = true
		}
		if want := row.Batch * (per + query); pr.Requested != want || pr.InTokens != want {
			t.Errorf("%s: requested %d, counted %d; want %d (a rerank document counts with its query)", row.ID, pr.Requested, pr.InTokens, want)
		}
	}
}
