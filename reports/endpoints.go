package reports

import (
	"fmt"

	"github.com/infermatrix/infermatrix/internal/numfmt"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

// pooledRow reports whether the row called an embeddings or rerank
// endpoint, by the plan (a row the plan lacks is taken as generating).
func pooledRow(p *schema.Plan, id string) bool {
	if p == nil {
		return false
	}
	r := p.Row(id)
	return r != nil && metrics.IsPooling(p.RowAPI(r))
}

// anyPooled reports whether any row of the plan calls embeddings or
// rerank: the results table then has an inputs-per-second column.
func anyPooled(p *schema.Plan) bool {
	for i := range p.Rows {
		if metrics.IsPooling(p.RowAPI(&p.Rows[i])) {
			return true
		}
	}
	return false
}

// throughputCells are a row's output tokens per second, per user, and
// inputs per second, for the results tables: an embeddings or rerank row
// generates nothing, so its output figures are absent (—), not 0; a chat
// row counts no inputs.
func throughputCells(p *schema.Plan, rs *metrics.RowSummary) (out, perUser, inputs string) {
	if pooledRow(p, rs.ID) {
		return "—", "—", numfmt.Num(rs.Throughput.InputsPerS)
	}
	return numfmt.Num(rs.Throughput.OutputTokensPerS), numfmt.Num(rs.Throughput.OutputTokensPerSU), "—"
}

// inputText is a row's input as the matrix and the plan show it: its
// length, and for an embeddings or rerank row the inputs per request and
// the rerank query: "8 × 128", "query 16 + 10 × 96".
func inputText(p *schema.Plan, r *schema.PlannedRow) string {
	in := r.Input.String()
	if !metrics.IsPooling(p.RowAPI(r)) {
		return in
	}
	in = fmt.Sprintf("%d × %s", max(1, r.Batch), in)
	if r.Query != nil {
		in = "query " + r.Query.String() + " + " + in
	}
	return in
}

// pooledTokens is the mean tokens an embeddings or rerank request sends
// through the model: every input, each rerank document with the query.
func pooledTokens(r *schema.PlannedRow) int {
	per := max(r.Input.Mean, 1)
	if r.Query != nil {
		per += r.Query.Mean
	}
	return max(1, r.Batch) * per
}
