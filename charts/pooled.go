package charts

import (
	"strings"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/metrics"
)

// pooledRow reports whether a row called an embeddings or rerank endpoint
// (metrics.IsPooling): it generates no token, so it has no TTFT, TPOT or
// output throughput, and a chart drawn on them must draw it on E2E and
// inputs per second, or leave it out and say so, never put it at 0. The
// plan says which endpoint a row called; a row the plan lacks (a search's
// probe, a summary charted without its plan) is pooled when it counted
// inputs.
func pooledRow(in *Input, rs *metrics.RowSummary) bool {
	if p := in.Plan; p != nil {
		if r := p.Row(rs.ID); r != nil {
			return metrics.IsPooling(p.RowAPI(r))
		}
	}
	return rs.Throughput.InputsPerS > 0
}

// pooledIDs are the measured rows that are pooled, in plan order.
func pooledIDs(in *Input) []string {
	var ids []string
	for _, rs := range measuredRows(in.Summary) {
		if pooledRow(in, rs) {
			ids = append(ids, rs.ID)
		}
	}
	return ids
}

// pooledNote says which embeddings and rerank rows a chart of what (TTFT,
// TPOT, output throughput) leaves out, and why; "" when none is.
func pooledNote(ids []string, what string) string {
	switch len(ids) {
	case 0:
		return ""
	case 1:
		return "Embeddings or rerank row " + ids[0] + " is not drawn: it generates no token, so has no " + what + "."
	}
	shown := ids
	more := ""
	if len(ids) > 4 {
		shown, more = ids[:4], " and "+fmtNum(float64(len(ids)-4))+" more"
	}
	return "Embeddings and rerank rows " + strings.Join(shown, ", ") + more + " are not drawn: they generate no token, so have no " + what + "."
}

// sweepPooled reports whether a sweep's measured rows are embeddings or
// rerank rows (a sweep expands one row, so they all are or none is).
func sweepPooled(in *Input, sw *analysis.SweepAnalysis) bool {
	n := 0
	for _, id := range sw.Rows {
		rs := in.Summary.Row(id)
		if rs == nil || rs.Status == metrics.RowNotRun {
			continue
		}
		if !pooledRow(in, rs) {
			return false
		}
		n++
	}
	return n > 0
}
