package reports

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/infermatrix/infermatrix/internal/numfmt"

	"github.com/infermatrix/infermatrix/metrics"
)

// trialFigures are the figures a repeated row's section shows with their
// intervals, in this order: the latency percentiles rules judge most, then
// the throughputs and goodput.
var trialFigures = []struct{ name, label, unit string }{
	{"ttft.p50", "TTFT p50", "ms"}, {"ttft.p95", "TTFT p95", "ms"}, {"ttft.p99", "TTFT p99", "ms"},
	{"tpot.p50", "TPOT p50", "ms"}, {"tpot.p95", "TPOT p95", "ms"}, {"tpot.p99", "TPOT p99", "ms"},
	{"itl.p50", "ITL p50", "ms"}, {"itl.p95", "ITL p95", "ms"}, {"itl.p99", "ITL p99", "ms"},
	{"e2e.p50", "E2E p50", "ms"}, {"e2e.p95", "E2E p95", "ms"}, {"e2e.p99", "E2E p99", "ms"},
	{"throughput.requests_per_s", "requests/s", ""},
	{"throughput.output_tokens_per_s", "output tokens/s", ""},
	{"goodput.ratio", "goodput ratio", ""},
	{"errors.ratio", "error ratio", ""},
}

// repeatedRows are the rows of a summary that ran as several trials.
func repeatedRows(sum *metrics.Summary) []*metrics.RowSummary {
	return rowsWhere(sum, func(rs *metrics.RowSummary) bool { return len(rs.Trials) > 0 })
}

// rowsWhere are the rows of a summary that keep says to, in summary order:
// the rows a section of the record is about.
func rowsWhere(sum *metrics.Summary, keep func(*metrics.RowSummary) bool) []*metrics.RowSummary {
	var out []*metrics.RowSummary
	for i := range sum.Rows {
		if keep(&sum.Rows[i]) {
			out = append(out, &sum.Rows[i])
		}
	}
	return out
}

// intervalText is a figure's mean over the trials with its interval and
// the trials behind it, "8.58 ms [8.41, 8.77] (5 trials)", and the pooled
// figure where it differs. Without an interval (one
// trial, or fewer than two that measured the figure) it says so rather
// than show a range nobody measured.
func intervalText(rs *metrics.RowSummary, fig, unit string) string {
	f, ok := metrics.FigureNamed(fig)
	if !ok {
		return ""
	}
	v := f.Get(rs)
	if f.Dist != "" && distOf(rs, f.Dist).Count == 0 {
		return "—"
	}
	u := ""
	if unit != "" {
		u = " " + unit
	}
	var b metrics.Bounds
	if rs.Intervals != nil {
		b = f.Bounds(rs.Intervals)
	}
	if !b.Known() {
		return fmt.Sprintf("%s%s (no interval: %d of %d trials measured it)", fixed(v, v), u, b.N, len(rs.Trials))
	}
	// The interval is of the trials' mean (Student's t, symmetric about
	// it); the pooled figure is over every trial's requests at once, and
	// for a tail percentile the two differ: shown beside an interval it
	// does not centre, the pooled figure would read as an estimate outside
	// its own interval. So the mean leads, and the pooled figure follows
	// where it differs.
	mean := (b.Lower + b.Upper) / 2
	text := fmt.Sprintf("%s%s [%s, %s] (%d trials)", fixed(mean, b.Upper), u, fixed(b.Lower, b.Upper), fixed(b.Upper, b.Upper), b.N)
	if fixed(mean, b.Upper) != fixed(v, b.Upper) {
		text = fmt.Sprintf("%s%s [%s, %s] (mean of %d trials; pooled %s%s)", fixed(mean, b.Upper), u, fixed(b.Lower, b.Upper), fixed(b.Upper, b.Upper), b.N, fixed(v, b.Upper), u)
	}
	return text
}

// fixed formats v with the decimals that suit scale, so a figure and its
// bounds line up.
func fixed(v, scale float64) string {
	return strconv.FormatFloat(v, 'f', numfmt.Decimals(max(math.Abs(v), math.Abs(scale))), 64)
}

func distOf(rs *metrics.RowSummary, name string) metrics.Dist {
	switch name {
	case "ttft":
		return rs.Metrics.TTFT
	case "tpot":
		return rs.Metrics.TPOT
	case "itl":
		return rs.Metrics.ITL
	case "e2e":
		return rs.Metrics.E2E
	}
	return metrics.Dist{}
}

// levelText is an interval level as a percentage: "95%".
func levelText(rs *metrics.RowSummary) string {
	lv := metrics.DefaultConfidence
	if rs.Intervals != nil && rs.Intervals.Level > 0 {
		lv = rs.Intervals.Level
	}
	return strconv.FormatFloat(100*lv, 'f', -1, 64) + "%"
}

// htmlRepeated is report.html's section on one repeated row, in the same
// words as decision.md's: the pooled figures with their intervals, and a
// line per trial. html/template escapes every cell.
type htmlRepeated struct {
	ID      string
	Trials  int
	Level   string
	Figures [][2]string
	Rows    [][]string
}

func htmlRepeatedOf(sum *metrics.Summary) []htmlRepeated {
	var out []htmlRepeated
	for _, rs := range repeatedRows(sum) {
		h := htmlRepeated{ID: rs.ID, Trials: len(rs.Trials), Level: levelText(rs)}
		for _, f := range trialFigures {
			if t := intervalText(rs, f.name, f.unit); t != "—" {
				h.Figures = append(h.Figures, [2]string{f.label, t})
			}
		}
		for i := range rs.Trials {
			h.Rows = append(h.Rows, trialCells(&rs.Trials[i]))
		}
		out = append(out, h)
	}
	return out
}

// trialCells are one trial's line in the per-trial tables.
func trialCells(t *metrics.RowSummary) []string {
	status := fmt.Sprintf("%d / %d", t.Requests.Completed, t.Requests.Sent)
	if t.Status != metrics.RowComplete {
		status += " (" + t.Status + ")"
	}
	return []string{strconv.Itoa(t.Trial), status,
		triple(t.Metrics.TTFT), triple(t.Metrics.TPOT), triple(t.Metrics.ITL), triple(t.Metrics.E2E),
		numfmt.Num(t.Throughput.RequestsPerS), numfmt.Num(t.Throughput.OutputTokensPerS), errorsCell(t)}
}

// trials writes decision.md's section on repeated rows: each one's pooled
// headline figures with their intervals, and a line per trial. A run
// without repeated rows has no such section, so its record reads as
// before.
func (m *mdWriter) trials(sum *metrics.Summary) {
	rows := repeatedRows(sum)
	if len(rows) == 0 {
		return
	}
	m.printf("## Repeated rows\n\n")
	m.printf("Each figure pools every trial's measured requests; the interval in brackets is for the figure's mean over trials (Student's t over the trials' own values), where another run of the same row would land on average, assuming the trials are independent (docs/statistics.md).\n\n")
	for _, rs := range rows {
		m.printf("### %s (%d trials, %s intervals)\n\n", codeSpan(rs.ID), len(rs.Trials), levelText(rs))
		for _, f := range trialFigures {
			if t := intervalText(rs, f.name, f.unit); t != "—" {
				m.printf("- %s %s\n", f.label, t)
			}
		}
		m.printf("\n| Trial | OK / sent | TTFT p50 / p95 / p99 ms | TPOT p50 / p95 / p99 ms | ITL p50 / p95 / p99 ms | E2E p50 / p95 / p99 ms | req/s | out tok/s | Errors |\n|---|---|---|---|---|---|---|---|---|\n")
		for i := range rs.Trials {
			c := trialCells(&rs.Trials[i])
			for j := range c {
				c[j] = cell(c[j])
			}
			m.printf("| %s |\n", strings.Join(c, " | "))
		}
		m.printf("\n")
	}
}
