package reports

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/infermatrix/infermatrix/internal/numfmt"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/verdict"
)

// rampIntro says, once, what a step's figures are made of: the attribution
// a reader needs before comparing two steps.
const rampIntro = "A ramp raises its row's load step by step without draining between steps. Each step's figures are those of the requests sent during it, wherever they ended; its throughputs are over the step's own duration; in flight counts every request the server held during the step, from whichever step. Each step is judged like a sweep point: its own validity, the row's rules on its own figures."

// rampHead is the per-step table's header, in decision.md and report.html.
var rampHead = []string{"Step", "Load", "Starts at s", "OK / sent", "TTFT p50 / p95 / p99 ms", "TPOT p50 / p95 / p99 ms", "ITL p50 / p95 / p99 ms", "E2E p50 / p95 / p99 ms", "req/s", "out tok/s", "In flight", "Goodput", "Errors", "Verdict"}

// rampRow is one ramped row's steps as the renderers show them.
type rampRow struct {
	ID string
	// Sentence says what the ramp found (verdict.RampVerdict.Describe);
	// empty for a row without rules.
	Sentence string
	Segs     []seg // Sentence, for report.html
	Rows     [][]string
}

// rampRowsOf lists the ramped rows of a run, each with a line per step.
func rampRowsOf(sum *metrics.Summary, d *verdict.Decision) []rampRow {
	var out []rampRow
	for i := range sum.Rows {
		rs := &sum.Rows[i]
		if len(rs.Steps) == 0 {
			continue
		}
		r := rampRow{ID: rs.ID}
		var rv *verdict.RowVerdict
		if d != nil {
			rv = d.Row(rs.ID)
		}
		if rv != nil && rv.Ramp != nil && len(rv.Rules) > 0 {
			r.Sentence = rv.Ramp.Describe()
			r.Segs = mdSegs(r.Sentence)
		}
		for j := range rs.Steps {
			st := &rs.Steps[j]
			v := "—"
			if rv != nil && rv.Ramp != nil && j < len(rv.Ramp.Steps) {
				sv := rv.Ramp.Steps[j]
				v = sv.Verdict
				if !sv.Validity.Valid {
					v += " (" + strings.TrimPrefix(sv.Validity.Summary(), "invalid: ") + ")"
				}
			}
			r.Rows = append(r.Rows, rampCells(st, sum.SLO.IsZero(), v))
		}
		out = append(out, r)
	}
	return out
}

// rampCells are one step's line.
func rampCells(st *metrics.StepSummary, noSLO bool, verdictText string) []string {
	status := fmt.Sprintf("%d / %d", st.Requests.Completed, st.Requests.Sent)
	load := strconv.Itoa(st.Concurrency) + " users"
	if st.Concurrency == 0 {
		load = numfmt.Num(st.Rate) + " req/s"
	}
	goodput := "—"
	if !noSLO {
		goodput = fmt.Sprintf("%.1f%% (%s req/s)", 100*st.Goodput.Ratio, numfmt.Num(st.Goodput.RequestsPerS))
	}
	return []string{st.Label, load, numfmt.Num(st.StartS), status,
		triple(st.Metrics.TTFT), triple(st.Metrics.TPOT), triple(st.Metrics.ITL), triple(st.Metrics.E2E),
		numfmt.Num(st.Throughput.RequestsPerS), numfmt.Num(st.Throughput.OutputTokensPerS),
		fmt.Sprintf("%s (max %d)", numfmt.Num(st.InFlight.Mean), st.InFlight.Max), goodput, errorsCell(&st.RowSummary), verdictText}
}

// ramps writes decision.md's section on ramped rows: what the rules found
// along each ramp, and a line per step. A run without ramps has no such
// section.
func (m *mdWriter) ramps(sum *metrics.Summary, d *verdict.Decision) {
	rows := rampRowsOf(sum, d)
	if len(rows) == 0 {
		return
	}
	m.printf("## Ramps\n\n%s\n\n", rampIntro)
	for _, r := range rows {
		m.printf("### %s\n\n", codeSpan(r.ID))
		if r.Sentence != "" {
			m.printf("%s.\n\n", mdSegsText(mdSegs(r.Sentence)))
		}
		m.printf("| %s |\n|%s\n", strings.Join(rampHead, " | "), strings.Repeat("---|", len(rampHead)))
		for _, c := range r.Rows {
			cs := make([]string, len(c))
			for j := range c {
				cs[j] = cell(c[j])
			}
			m.printf("| %s |\n", strings.Join(cs, " | "))
		}
		m.printf("\n")
	}
}
