package telemetry

import "github.com/infermatrix/infermatrix/metrics"

// Add counts one record into the totals the server's token counters are
// checked against: its prompt and output tokens as its usage reported them,
// warmup and priming included, as the server's counters include them. A
// request that failed without usage may or may not have been counted by the
// server, which makes the totals unknown, unless it never reached the
// engine: no connection, a redirect not followed, a 4xx refusal. The live
// run and a rebuild from the records count alike through this one method.
func (t *RecordTotals) Add(rec *metrics.Record) {
	t.Requests++
	if rec.InputTokens.Server != nil && rec.OutputTokens.Server != nil {
		t.Prompt += float64(*rec.InputTokens.Server)
		t.Generation += float64(*rec.OutputTokens.Server)
		return
	}
	if rec.Inputs > 0 && rec.InputTokens.Server != nil {
		// An embeddings or rerank request: prefill only, its usage
		// all prompt tokens, and nothing generated.
		t.Prompt += float64(*rec.InputTokens.Server)
		return
	}
	if e := rec.Error; e != nil {
		switch {
		case e.Class == metrics.ErrConnect && rec.ConnNS == 0, e.Class == metrics.ErrRedirect,
			e.Class == metrics.ErrHTTP && rec.Status >= 400 && rec.Status < 500:
			return
		}
	}
	t.Unknown++
}

// PoolRow sets a repeated row's server and GPU figures from its trials'
// (Pool), with the gaps against its pooled client figures.
func PoolRow(rs *metrics.RowSummary) {
	rs.Server, rs.GPU = Pool(rs.Trials)
	FillGaps(rs.Server, &rs.Metrics)
}
