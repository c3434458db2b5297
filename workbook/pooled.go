package workbook

import "github.com/infermatrix/infermatrix/metrics"

// pooled reports whether a row called an embeddings or rerank endpoint
// (metrics.IsPooling): it generates no token, so its TTFT, TPOT and
// output rates are absent and its throughput is counted in inputs. The
// plan says which endpoint a row called; a row the plan lacks (a search's
// probe, a summary read without its plan) is pooled when it counted
// inputs.
func (x *xlsxWriter) pooled(rs *metrics.RowSummary) bool {
	if p := x.in.Plan; p != nil {
		if r := p.Row(rs.ID); r != nil {
			return metrics.IsPooling(p.RowAPI(r))
		}
	}
	return rs.Throughput.InputsPerS > 0
}

// anyPooled reports whether any row of the summary is pooled: the Summary
// sheet then has the Inputs/s and Input tok/s columns.
func (x *xlsxWriter) anyPooled() bool {
	for i := range x.in.Summary.Rows {
		if x.pooled(&x.in.Summary.Rows[i]) {
			return true
		}
	}
	return false
}
