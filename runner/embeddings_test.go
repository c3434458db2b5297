package runner

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
)

// Reading an embeddings or rerank answer is tested in
// protocol/embeddings_test.go, building its request in
// workload/pooled_test.go; this runs the rows end to end.

// TestEmbeddingsAndRerankRowsRun runs an embeddings row and a rerank row
// beside a chat row against the built-in server: one server, three
// endpoints, each row summarised in its own terms.
func TestEmbeddingsAndRerankRowsRun(t *testing.T) {
	p := plan(t, `server: {target: builtin, sim: {preset: fixed, ttft: 3ms, itl: 1ms}}
defaults: {requests: 12, concurrency: 2, output_tokens: 4, body: {ignore_eos: true}}
rows:
  - {id: chat, input_tokens: 32}
  - {id: emb, api: embeddings, input_tokens: 40, batch: 5}
  - {id: rr, api: rerank, input_tokens: 30, query_tokens: 10, batch: 4}
`)
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id             string
		inputs, tokens int // per request
	}{{"emb", 5, 5 * 40}, {"rr", 4, 4 * (30 + 10)}} {
		rs := res.Summary.Row(tc.id)
		if rs == nil || rs.Requests.Completed != 12 || rs.Errors.Total != 0 {
			t.Fatalf("%s: %+v", tc.id, rs)
		}
		for _, r := range records(t, res.Dir, tc.id) {
			if r.Inputs != tc.inputs || r.Stream || r.InputTokens.Server == nil || *r.InputTokens.Server != tc.tokens {
				t.Errorf("%s: record inputs %d stream %v tokens %+v; want %d inputs of %d tokens in all, the server's count",
					tc.id, r.Inputs, r.Stream, r.InputTokens, tc.inputs, tc.tokens)
			}
		}
		m := rs.Metrics
		for name, d := range map[string]metrics.Dist{"ttft": m.TTFT, "itl": m.ITL, "tpot": m.TPOT, "output_tokens": m.OutputTokens} {
			if d.Count != 0 {
				t.Errorf("%s: %s has %d samples; a pooling row has none", tc.id, name, d.Count)
			}
		}
		if m.E2E.Count != 12 || rs.Throughput.InputsPerS <= 0 || rs.Throughput.OutputTokensPerS != 0 {
			t.Errorf("%s: e2e %d samples, %v inputs/s, %v output tok/s", tc.id, m.E2E.Count, rs.Throughput.InputsPerS, rs.Throughput.OutputTokensPerS)
		}
		if got, want := rs.Throughput.InputsPerS/rs.Throughput.RequestsPerS, float64(tc.inputs); got < want-1e-9 || got > want+1e-9 {
			t.Errorf("%s: %v inputs per request, want %v", tc.id, got, want)
		}
		if len(rs.Tokens.Notes) > 0 {
			t.Errorf("%s: token notes %q", tc.id, rs.Tokens.Notes)
		}
	}
	chat := res.Summary.Row("chat")
	if chat.Metrics.TTFT.Count != 12 || chat.Throughput.InputsPerS != 0 {
		t.Errorf("chat: %d TTFT samples, %v inputs/s", chat.Metrics.TTFT.Count, chat.Throughput.InputsPerS)
	}
}
