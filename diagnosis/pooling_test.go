package diagnosis

import (
	"slices"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
)

// TestPoolingRowsAreNotAnotherClient: an engine schedules each input of
// an embeddings or rerank request as a sequence of its own, so a row of 4
// requests of 16 inputs keeps 64 sequences on the server, which is its
// own load, not another client's; 100 would still be someone else's.
func TestPoolingRowsAreNotAnotherClient(t *testing.T) {
	for _, tc := range []struct {
		running float64
		shared  bool
	}{{64, false}, {100, true}} {
		r := withServer(plainRow("emb", 4))
		r.Summary.InFlight = metrics.InFlight{Mean: 3.9, Max: 4}
		r.Summary.Throughput = metrics.Throughput{RequestsPerS: 10, InputsPerS: 160}
		r.Summary.Server.NumRequestsRunning = gauge(tc.running, tc.running)
		fs := Diagnose(Input{Rows: []Row{r}}).Findings
		got := slices.ContainsFunc(fs, func(f Finding) bool { return f.Rule == ruleShared })
		if got != tc.shared {
			t.Errorf("%v sequences running for 4 requests of 16 inputs: another client %v, want %v (%s)", tc.running, got, tc.shared, evidence(fs))
		}
	}
}
