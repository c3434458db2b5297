package metrics

import (
	"slices"
	"testing"
)

// TestWorkPerS: a sweep of embeddings or rerank rows is read on input
// tokens per second, since they generate none; a chat row on output.
func TestWorkPerS(t *testing.T) {
	chat := Throughput{OutputTokensPerS: 500, InputTokensPerS: 4000}
	emb := Throughput{InputTokensPerS: 30000, InputsPerS: 240}
	if chat.WorkPerS() != 500 || emb.WorkPerS() != 30000 {
		t.Errorf("work: chat %v, embeddings %v; want 500, 30000", chat.WorkPerS(), emb.WorkPerS())
	}
}

// TestEndpointUses: the names a pooling row lacks, and the one only it
// has, wherever an expression reads them (a rule, a hypothesis's row, a
// baseline or an interval of it); other names are not listed.
func TestEndpointUses(t *testing.T) {
	var got []string
	for _, u := range EndpointUses("ttft.p95 < 1 && e2e.p95 < 2 && baseline.itl.p50 > 0 && rows.x.throughput.inputs_per_s > rows.y.tpot.p99 && throughput.output_tokens_per_s > 0 && throughput.requests_per_s > 0") {
		got = append(got, u.Name+"@"+u.Row+map[bool]string{true: "+pool"}[u.Pooling])
	}
	want := []string{"ttft.p95@", "baseline.itl.p50@", "rows.x.throughput.inputs_per_s@x+pool", "rows.y.tpot.p99@y", "throughput.output_tokens_per_s@"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("uses %q; want %q", got, want)
	}
}
