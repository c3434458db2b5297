package workbook

import (
	"fmt"
	"strings"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/record"
)

// The spreadsheet's Telemetry and Diagnosis sheets.
const (
	xlsxSheetTelemetry = "Telemetry"
	xlsxSheetDiagnosis = "Diagnosis"
)

// xlsxTelemetryColumns are the Telemetry sheet's columns: every figure of
// the server and GPU sections a rule can read, as numbers.
func xlsxTelemetryColumns() []xlsxColumn {
	return []xlsxColumn{
		{"Row", 28, xlsxKindText}, {"Server scrapes", 9, xlsxKindInt}, {"Server scrapes failed", 9, xlsxKindInt},
		{"KV cache use mean", 9, xlsxKindPercent}, {"KV cache use max", 9, xlsxKindPercent},
		{"Running mean", 9, xlsxKindRatio}, {"Running max", 9, xlsxKindRatio},
		{"Waiting mean", 9, xlsxKindRatio}, {"Waiting max", 9, xlsxKindRatio},
		{"Prefix-cache hit rate", 10, xlsxKindPercent}, {"Prefix-cache queries (tokens)", 12, xlsxKindInt},
		{"Preemptions", 10, xlsxKindInt}, {"Prompt tokens (server)", 12, xlsxKindInt}, {"Generation tokens (server)", 12, xlsxKindInt},
		{"Server TTFT mean (ms)", 10, xlsxKindMS}, {"Server TTFT p95 (ms)", 10, xlsxKindMS}, {"Server TTFT p99 (ms)", 10, xlsxKindMS},
		{"Server TPOT mean (ms)", 10, xlsxKindMS}, {"Server TPOT p95 (ms)", 10, xlsxKindMS}, {"Server TPOT p99 (ms)", 10, xlsxKindMS},
		{"Server queue time p95 (ms)", 10, xlsxKindMS}, {"TTFT gap, means (ms)", 10, xlsxKindMS}, {"TPOT gap, means (ms)", 10, xlsxKindMS},
		{"Token counters", 24, xlsxKindText},
		{"GPUs", 6, xlsxKindInt}, {"GPU scrapes", 9, xlsxKindInt}, {"GPU scrapes failed", 9, xlsxKindInt},
		{"GPU utilization mean", 10, xlsxKindPercent}, {"GPU utilization max", 10, xlsxKindPercent},
		{"Memory copy utilization mean", 11, xlsxKindPercent}, {"GPU power mean (W)", 10, xlsxKindRate}, {"GPU power max (W)", 10, xlsxKindRate},
		{"GPU energy (J)", 11, xlsxKindRate}, {"GPU memory mean (GB)", 10, xlsxKindMS}, {"GPU memory max (GB)", 10, xlsxKindMS},
		{"SM clock min (MHz)", 10, xlsxKindRate}, {"SM clock max (MHz)", 10, xlsxKindRate}, {"GPU temperature max (°C)", 10, xlsxKindMS},
		{"Notes", 60, xlsxKindText},
	}
}

// telemetry writes the Telemetry sheet: one line per row, blank where the
// row has no such figure.
func (x *xlsxWriter) telemetry() error {
	sum := x.in.Summary
	if record.TelemetryLines(sum) == nil {
		return x.note(xlsxSheetTelemetry, "A1", "No row has server or GPU telemetry: telemetry was switched off, or nothing answered the scrapes.")
	}
	notes := map[string]string{}
	for _, n := range record.TelemetryNotes(sum) {
		notes[n.Row] = n.Text
	}
	cols := xlsxTelemetryColumns()
	var lines [][]any
	var fills []xlsxFill
	for i := range sum.Rows {
		rs := &sum.Rows[i]
		vals := make([]any, 0, len(cols))
		vals = append(vals, rs.ID)
		s, g := rs.Server, rs.GPU
		if s == nil {
			vals = append(vals, make([]any, 23)...)
		} else {
			tokens := any(nil)
			if t := s.Tokens; t != nil && (t.Prompt.Compared || t.Generation.Compared) {
				tokens = record.TelemetryLineOf(rs).Tokens
			}
			vals = append(vals, s.Scrapes, s.Failed)
			vals = append(vals, xlsxGauge(s.KVCacheUsage)...)
			vals = append(vals, xlsxGauge(s.NumRequestsRunning)...)
			vals = append(vals, xlsxGauge(s.NumRequestsWaiting)...)
			vals = append(vals, xlsxPtr(s.PrefixCacheHitRate), xlsxPtr(s.PrefixCacheQueries), xlsxPtr(s.Preemptions),
				xlsxPtr(s.PromptTokens), xlsxPtr(s.GenerationTokens))
			vals = append(vals, xlsxServerDist(s.TTFT)...)
			vals = append(vals, xlsxServerDist(s.TPOT)...)
			var queue, ttftGap, tpotGap any
			if q := s.QueueTime; q != nil && q.Count > 0 {
				queue = xlsxNum(q.P95)
			}
			if s.TTFTGap != nil {
				ttftGap = xlsxNum(s.TTFTGap.Mean)
			}
			if s.TPOTGap != nil {
				tpotGap = xlsxNum(s.TPOTGap.Mean)
			}
			vals = append(vals, queue, ttftGap, tpotGap, tokens)
		}
		if g == nil {
			vals = append(vals, make([]any, 14)...)
		} else {
			var memCopy, clockMin, clockMax, temp any
			if m := g.MemCopyUtilization; m != nil {
				memCopy = xlsxNum(m.Mean)
			}
			if c := g.SMClockMHz; c != nil {
				clockMin, clockMax = xlsxNum(c.Min), xlsxNum(c.Max)
			}
			if t := g.TemperatureC; t != nil {
				temp = xlsxNum(t.Max)
			}
			util, power, mem := xlsxGauge(g.Utilization), xlsxGauge(g.PowerW), xlsxGauge(g.MemoryUsedGB)
			vals = append(vals, g.GPUs, g.Scrapes, g.Failed, util[0], util[1], memCopy, power[0], power[1], xlsxPtr(g.EnergyJ),
				mem[0], mem[1], clockMin, clockMax, temp)
		}
		vals = append(vals, xlsxStr(notes[rs.ID]))
		if len(vals) != len(cols) {
			return fmt.Errorf("telemetry sheet: %d values for %d columns", len(vals), len(cols))
		}
		lines = append(lines, vals)
		fill := xlsxFillNone
		if s != nil && (s.Preemptions != nil && *s.Preemptions > 0 || s.Tokens != nil && s.Tokens.Mismatch) {
			fill = xlsxFillFail
		}
		fills = append(fills, fill)
	}
	return x.table(xlsxSheetTelemetry, cols, lines, fills, true)
}

// xlsxGauge is a gauge's mean and max, blank when absent.
func xlsxGauge(g *metrics.Gauge) []any {
	if g == nil {
		return []any{nil, nil}
	}
	return []any{xlsxNum(g.Mean), xlsxNum(g.Max)}
}

// xlsxServerDist is a server histogram's p50, p95 and p99, blank when
// absent or empty.
func xlsxServerDist(d *metrics.ServerDist) []any {
	if d == nil || d.Count == 0 {
		return []any{nil, nil, nil}
	}
	// The mean first: it is exact, the quantiles only as fine as the
	// engine's buckets (serverDistText).
	return []any{xlsxNum(d.Mean), xlsxNum(d.P95), xlsxNum(d.P99)}
}

func xlsxPtr(v *float64) any {
	if v == nil {
		return nil
	}
	return xlsxNum(*v)
}

// diagnosisSheet writes the Diagnosis sheet: one line per finding, then
// what was examined.
func (x *xlsxWriter) diagnosisSheet() error {
	dg := record.Diagnosis(x.in.Plan, x.in.Summary, x.in.Analysis, x.d)
	plain := func(s string) string { return strings.ReplaceAll(s, "`", "") }
	next := 1
	if len(dg.Findings) > 0 {
		cols := []xlsxColumn{
			{"Row", 28, xlsxKindText}, {"Severity", 8, xlsxKindText}, {"Regime", 22, xlsxKindText}, {"Symptom", 50, xlsxKindText},
			{"Evidence", 80, xlsxKindText}, {"Next", 80, xlsxKindText}, {"Rule", 14, xlsxKindText},
		}
		var lines [][]any
		var fills []xlsxFill
		for _, f := range dg.Findings {
			lines = append(lines, []any{f.Row, f.Severity, f.Regime, plain(record.UpperFirst(f.Symptom)), plain(strings.Join(f.Evidence, "; ")), plain(f.Next), f.Rule})
			fill := xlsxFillNone
			if f.Severity == "fail" {
				fill = xlsxFillFail
			}
			fills = append(fills, fill)
		}
		if err := x.table(xlsxSheetDiagnosis, cols, lines, fills, true); err != nil {
			return err
		}
		next = len(lines) + 3
	}
	for _, s := range append([]string{record.DiagnosisIntro}, record.DiagnosisScope(dg)...) {
		if err := x.note(xlsxSheetDiagnosis, fmt.Sprintf("A%d", next), plain(s)); err != nil {
			return err
		}
		next++
	}
	return nil
}
