package telemetry

import (
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
)

// TestPoolingRecordsAreCounted: an embeddings or rerank answer's usage has
// prompt tokens and nothing generated; its records are counted against the
// server's prompt counter, not left unknown (which would skip the check).
func TestPoolingRecordsAreCounted(t *testing.T) {
	n := 120
	var tot RecordTotals
	tot.Add(&metrics.Record{Inputs: 4, InputTokens: metrics.Tokens{Server: &n, Client: 118}})
	tot.Add(&metrics.Record{Inputs: 4, InputTokens: metrics.Tokens{Client: 118}, Error: &metrics.Error{Class: metrics.ErrProtocol}})
	if tot.Prompt != 120 || tot.Generation != 0 || tot.Unknown != 1 || tot.Requests != 2 {
		t.Errorf("totals %+v; want 120 prompt tokens, none generated, the failed answer without usage unknown", tot)
	}
}
