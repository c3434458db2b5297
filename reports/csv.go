package reports

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"

	"github.com/infermatrix/infermatrix/internal/textsafe"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

// csvMetrics are the distributions exported, in column order, with their
// JSON names.
func csvMetrics(m *metrics.Metrics) []struct {
	name string
	d    metrics.Dist
} {
	return []struct {
		name string
		d    metrics.Dist
	}{
		{"ttft_ms", m.TTFT}, {"ttfo_ms", m.TTFO}, {"ttst_ms", m.TTST}, {"itl_ms", m.ITL},
		{"tpot_ms", m.TPOT}, {"e2e_ms", m.E2E}, {"queue_ms", m.Queue},
		{"input_tokens", m.InputTokens}, {"output_tokens", m.OutputTokens},
	}
}

// WriteCSV writes summary.csv: one line per row, one column per statistic,
// named as in summary.json with "_" joining metric and statistic
// (ttft_ms_p95), for spreadsheets and pandas. Empty cells mean no samples.
// A text cell that a spreadsheet would take for a formula (it starts with
// =, +, -, @ or a tab) is written with a leading single quote.
func WriteCSV(w io.Writer, sum *metrics.Summary, d *verdict.Decision) error {
	return writeCSV(w, sum, d, nil)
}

// writeCSV is WriteCSV with the plan, which says which rows called
// embeddings or rerank (pooledRow): without it a row is taken as pooled
// when it counted inputs, which one whose every request failed did not.
func writeCSV(w io.Writer, sum *metrics.Summary, d *verdict.Decision, plan *schema.Plan) error {
	cw := csv.NewWriter(w)
	stats := []string{"count", "mean", "std", "min", "max", "p50", "p90", "p95", "p99"}
	var extra []string
	for _, q := range sum.Percentiles {
		if k := metrics.PercentileKey(q); !contains(stats, k) {
			extra = append(extra, k)
		}
	}
	header := []string{"row", "base", "status", "verdict", "requests_sent", "requests_completed", "requests_failed", "window_s"}
	var probe metrics.Metrics
	for _, m := range csvMetrics(&probe) {
		for _, s := range append(append([]string(nil), stats...), extra...) {
			header = append(header, m.name+"_"+s)
		}
	}
	header = append(header, "requests_per_s", "output_tokens_per_s", "input_tokens_per_s", "total_tokens_per_s",
		"output_tokens_per_s_per_user", "inputs_per_s", "goodput_requests_per_s", "goodput_ratio", "errors_total", "errors_ratio",
		"semantics", "client_bound", "client_cpu", "measurement_error_ms", "input_tokens_diff", "output_tokens_diff", "tokens_mismatch")
	// A run with search rows says which rows are probes, and of which
	// search (reports/search.go); other runs keep their columns.
	probes := probeCells(d)
	if probes != nil {
		header = append(header, "probe_of", "probe")
	}
	if err := cw.Write(header); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	verdicts := map[string]string{}
	for _, rv := range d.Rows {
		verdicts[rv.ID] = rv.Verdict
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	for i := range sum.Rows {
		rs := &sum.Rows[i]
		// Text cells, which a summary.json from elsewhere can fill with
		// anything, cannot be formulas; numbers stay numbers.
		txt := textsafe.SpreadsheetCell
		rec := []string{txt(rs.ID), txt(rs.Base), txt(rs.Status), txt(verdicts[rs.ID]), strconv.Itoa(rs.Requests.Sent),
			strconv.Itoa(rs.Requests.Completed), strconv.Itoa(rs.Requests.Failed), f(rs.WindowS)}
		for _, m := range csvMetrics(&rs.Metrics) {
			d := m.d
			vals := []float64{float64(d.Count), d.Mean, d.Std, d.Min, d.Max, d.P50, d.P90, d.P95, d.P99}
			for j, v := range vals {
				if d.Count == 0 && j > 0 {
					rec = append(rec, "")
					continue
				}
				rec = append(rec, f(v))
			}
			for _, k := range extra {
				if v, ok := d.Extra[k]; ok && d.Count > 0 {
					rec = append(rec, f(v))
				} else {
					rec = append(rec, "")
				}
			}
		}
		t, g := rs.Throughput, rs.Goodput
		// An embeddings or rerank row generates nothing: its output
		// throughputs are empty, not 0, and its inputs per second stand
		// in; a generating row counts no inputs (empty).
		out, perUser, inputs := f(t.OutputTokensPerS), f(t.OutputTokensPerSU), ""
		if t.InputsPerS > 0 || pooledRow(plan, rs.ID) {
			out, perUser, inputs = "", "", f(t.InputsPerS)
		}
		rec = append(rec, f(t.RequestsPerS), out, f(t.InputTokensPerS), f(t.TotalTokensPerS),
			perUser, inputs, f(g.RequestsPerS), f(g.Ratio), strconv.Itoa(rs.Errors.Total), f(rs.Errors.Ratio))
		// Figures that were not measured are empty, as for metrics
		// without samples.
		opt := func(v float64, measured bool) string {
			if !measured {
				return ""
			}
			return f(v)
		}
		c, tk := rs.SelfCheck, rs.Tokens
		rec = append(rec, txt(rs.Semantics), strconv.FormatBool(c.ClientBound),
			opt(c.ClientCPU, c.Cores > 0), opt(c.MeasurementErrorMS, c.MeasurementErrorMS > 0),
			opt(tk.Input.Diff, tk.Input.Requests > 0), opt(tk.Output.Diff, tk.Output.Requests > 0),
			strconv.FormatBool(tk.Mismatch))
		if probes != nil {
			p := probes[rs.ID]
			rec = append(rec, txt(p[0]), p[1])
		}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
