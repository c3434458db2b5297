package schema

import (
	"fmt"
	"strings"

	"github.com/infermatrix/infermatrix/metrics"
)

// MaxRepeat bounds repeat: each trial is the row's whole measurement
// again, and a hundred trials already pin an interval far tighter than
// the drift of any real server between runs.
const MaxRepeat = 100

// DefaultConfidence is the level of a repeated row's intervals unless
// report.confidence says otherwise.
const DefaultConfidence = metrics.DefaultConfidence

// MaxRepeat returns the largest repeat of the plan's rows (1 without
// any): the number of rounds the run makes.
func (p *Plan) MaxRepeat() int {
	n := 1
	for _, r := range p.Rows {
		n = max(n, r.Repeat)
	}
	return n
}

// Trials is how many trials the row runs: its repeat, at least 1.
func (r *PlannedRow) Trials() int { return max(1, r.Repeat) }

// confidence resolves report.confidence.
func (r *resolver) confidence() float64 {
	if c := r.exp.Report.Confidence; c != nil {
		return *c
	}
	return DefaultConfidence
}

// checkIntervals refuses an expression that reads a repeated row's
// interval (upper.ttft.p95, lower.tpot.p95) on a row without repeat:
// one trial has no spread, so there is no interval to read, and a rule
// that can never be judged is better caught before the run. rows are the
// row ids an acceptance rule judges (nil for a hypothesis, which names
// its rows itself).
func (r *resolver) checkIntervals(path, src string, planned []PlannedRow, rows []string) {
	repeat := map[string]int{}
	for _, p := range planned {
		repeat[p.ID] = p.Trials()
	}
	var probs []metrics.ExprProblem
	for _, u := range metrics.IntervalUses(src) {
		ids := rows
		if u.Row != "" {
			ids = []string{u.Row}
		}
		var single []string
		for _, id := range ids {
			if n, ok := repeat[id]; ok && n < 2 {
				single = append(single, id)
			}
		}
		if len(single) == 0 {
			continue
		}
		probs = append(probs, metrics.ExprProblem{From: u.From, To: u.To,
			Message: fmt.Sprintf("%s needs repeat: 2 or more, and %s", u.Name, withoutRepeat(single)),
			Hint:    "an interval rests on several trials: set repeat: 5 (say) on the row or in defaults, or judge the pooled figure without upper. or lower."})
	}
	r.exprProblems(path, src, probs)
}

// withoutRepeat says which rows have no repeat, naming at most five.
func withoutRepeat(ids []string) string {
	if len(ids) == 1 {
		return fmt.Sprintf("row %s has none", ids[0])
	}
	more := ""
	if len(ids) > 5 {
		more = fmt.Sprintf(" and %d more", len(ids)-5)
		ids = ids[:5]
	}
	return fmt.Sprintf("rows %s%s have none", strings.Join(ids, ", "), more)
}
