package record

import (
	"fmt"
	"math"
	"strings"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/diagnosis"
	"github.com/infermatrix/infermatrix/internal/numfmt"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

// The parts of the record that read telemetry: the Server and GPU table
// and the Diagnosis. They are computed here once, as text with `code`
// spans, so that decision.md, report.html and results.xlsx say the same.

// Diagnosis is the record's diagnosis: the analysis', or, for a record
// rendered without one (an is nil or holds none), computed from the same
// plan, summary and decision.
func Diagnosis(p *schema.Plan, sum *metrics.Summary, an *analysis.Analysis, d *verdict.Decision) *diagnosis.Diagnosis {
	if an != nil && an.Diagnosis != nil {
		return an.Diagnosis
	}
	var preds []analysis.RowPrediction
	if an != nil {
		preds = an.Predictions
	}
	return analysis.Diagnose(p, sum, d, preds)
}

// diagnosisIntro says what the section is, and diagnosisScope what it
// examined and with which telemetry, as sentences with code spans.
const DiagnosisIntro = "What each row's figures say about where its time goes: the symptom, the likely regime, the evidence, and the next measurement or first response (docs/diagnosis.md). A cause the figures at hand cannot support is not stated."

func DiagnosisScope(dg *diagnosis.Diagnosis) []string {
	if len(dg.Examined) == 0 {
		return []string{"No row completed a request without failing, so there was nothing to examine: a row that failed is not diagnosed."}
	}
	var out []string
	switch {
	case len(dg.Telemetry) == 0:
		out = append(out, "No row has server or GPU telemetry: the findings rest on the client's figures and the prediction alone.")
	case len(dg.NoTelemetry) > 0:
		out = append(out, fmt.Sprintf("Without telemetry, so read from the client's figures and the prediction alone: %s.", CodeList(dg.NoTelemetry)))
	}
	noted := map[string]bool{}
	for _, f := range dg.Findings {
		noted[f.Row] = true
	}
	var quiet []string
	for _, id := range dg.Examined {
		if !noted[id] {
			quiet = append(quiet, id)
		}
	}
	switch {
	case len(dg.Findings) == 0:
		out = append(out, fmt.Sprintf("Examined %s: nothing notable found.", CodeList(dg.Examined)))
	case len(quiet) > 0:
		out = append(out, fmt.Sprintf("Nothing notable in %s.", CodeList(quiet)))
	}
	if len(dg.Unexplained) > 0 {
		out = append(out, fmt.Sprintf("Failed their rules with no cause the figures support: %s.", CodeList(dg.Unexplained)))
	}
	return out
}

// telemetryLine is one row of the Server and GPU table, as text.
type TelemetryLine struct {
	Row                                 string
	None                                bool // the row has no telemetry
	Scrapes, KV, Running, Waiting       string
	PrefixHits, Preemptions             string
	ServerTTFT, TTFTGap                 string
	ServerTPOT, TPOTGap                 string
	GPUUtil, Power, Memory, Tokens      string
	TokensBad, PreemptedBad, WaitingBad bool
}

// telemetryLines is the Server and GPU table: one line per row that ran,
// or nil when no row has telemetry.
func TelemetryLines(sum *metrics.Summary) []TelemetryLine {
	if sum == nil {
		return nil
	}
	var out []TelemetryLine
	any := false
	for i := range sum.Rows {
		rs := &sum.Rows[i]
		if rs.Status == metrics.RowNotRun {
			continue
		}
		l := TelemetryLineOf(rs)
		any = any || !l.None
		out = append(out, l)
	}
	if !any {
		return nil
	}
	return out
}

func TelemetryLineOf(rs *metrics.RowSummary) TelemetryLine {
	const none = "—"
	l := TelemetryLine{Row: rs.ID, Scrapes: none, KV: none, Running: none, Waiting: none, PrefixHits: none, Preemptions: none,
		ServerTTFT: none, TTFTGap: none, ServerTPOT: none, TPOTGap: none, GPUUtil: none, Power: none, Memory: none, Tokens: none}
	s, g := rs.Server, rs.GPU
	if s == nil && g == nil {
		l.None = true
		l.Scrapes = "no telemetry"
		return l
	}
	var scrapes []string
	if s != nil {
		scrapes = append(scrapes, "server "+scrapeCount(s.Scrapes, s.Failed))
		l.KV = gaugeText(s.KVCacheUsage, pctText)
		l.Running = gaugeText(s.NumRequestsRunning, requestLevel)
		l.Waiting = gaugeText(s.NumRequestsWaiting, requestLevel)
		l.WaitingBad = s.NumRequestsWaiting != nil && s.NumRequestsWaiting.Max > 0
		if s.PrefixCacheHitRate != nil {
			l.PrefixHits = pctText(*s.PrefixCacheHitRate)
		}
		if s.Preemptions != nil {
			l.Preemptions = numfmt.Num(*s.Preemptions)
			l.PreemptedBad = *s.Preemptions > 0
		}
		l.ServerTTFT, l.ServerTPOT = ServerDistText(s.TTFT), ServerDistText(s.TPOT)
		l.TTFTGap, l.TPOTGap = gapText(s.TTFTGap), gapText(s.TPOTGap)
		if t := s.Tokens; t != nil && (t.Prompt.Compared || t.Generation.Compared) {
			l.Tokens, l.TokensBad = "ok", t.Mismatch
			if t.Mismatch {
				var parts []string
				for _, c := range []struct {
					name string
					d    metrics.CounterDiff
				}{{"prompt", t.Prompt}, {"generation", t.Generation}} {
					if c.d.Compared {
						parts = append(parts, fmt.Sprintf("%s %+.1f%%", c.name, 100*c.d.Diff))
					}
				}
				l.Tokens = "mismatch: " + strings.Join(parts, ", ")
			}
		}
	}
	if g != nil {
		scrapes = append(scrapes, "GPU "+scrapeCount(g.Scrapes, g.Failed))
		l.GPUUtil = gaugeText(g.Utilization, pctText)
		l.Power = gaugeText(g.PowerW, numfmt.Num)
		l.Memory = gaugeText(g.MemoryUsedGB, numfmt.Num)
		if g.GPUs > 1 {
			l.GPUUtil += fmt.Sprintf(" (%d GPUs)", g.GPUs)
		}
	}
	l.Scrapes = strings.Join(scrapes, ", ")
	return l
}

func scrapeCount(ok, failed int) string {
	if failed > 0 {
		return fmt.Sprintf("%d (%d failed)", ok, failed)
	}
	return fmt.Sprint(ok)
}

// gaugeText is a gauge's mean / max.
func gaugeText(g *metrics.Gauge, f func(float64) string) string {
	if g == nil {
		return "—"
	}
	return f(g.Mean) + " / " + f(g.Max)
}

func pctText(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }

// requestLevel is a count of requests: whole as it is, a mean to one decimal.
func requestLevel(v float64) string {
	if v == math.Trunc(v) {
		return numfmt.Num(v)
	}
	return fmt.Sprintf("%.1f", v)
}

// serverDistText is a server histogram's mean / p95, in ms. The mean is
// exact (the histogram's sum over its count); a quantile is interpolated
// within the bucket holding it, and an engine's buckets are coarse (vLLM's
// inter-token buckets jump from 10 to 25 ms), so the median of a 7 ms TPOT
// reads 5 ms. The table leads with the figure that is true.
func ServerDistText(d *metrics.ServerDist) string {
	if d == nil || d.Count == 0 {
		return "—"
	}
	dec := numfmt.Decimals(max(d.Mean, d.P95))
	return fmt.Sprintf("%.*f / %.*f", dec, d.Mean, dec, d.P95)
}

// gapText is the gap of the means in ms, signed: the client's mean minus
// the server's exact one, not a difference of bucket-interpolated medians.
func gapText(g *metrics.Gap) string {
	if g == nil {
		return "—"
	}
	return fmt.Sprintf("%+.*f", numfmt.Decimals(g.Mean), g.Mean)
}

// telemetryNote is what could not be read for a row.
type TelemetryNote struct{ Row, Text string }

// telemetryNotes lists, per row, the notes of its server and GPU telemetry
// and of the token-counter check: a failed endpoint, a metric not
// published, a counter that reset.
func TelemetryNotes(sum *metrics.Summary) []TelemetryNote {
	if sum == nil {
		return nil
	}
	var out []TelemetryNote
	for i := range sum.Rows {
		rs := &sum.Rows[i]
		var parts []string
		if s := rs.Server; s != nil {
			for _, n := range s.Notes {
				parts = append(parts, "server: "+n)
			}
			if s.Tokens != nil {
				for _, n := range s.Tokens.Notes {
					parts = append(parts, "token counters: "+n)
				}
			}
		}
		if g := rs.GPU; g != nil {
			for _, n := range g.Notes {
				parts = append(parts, "GPU: "+n)
			}
		}
		if len(parts) > 0 {
			out = append(out, TelemetryNote{Row: rs.ID, Text: strings.Join(parts, "; ")})
		}
	}
	return out
}

// telemetryIntro explains the Server and GPU table's cells.
const TelemetryIntro = "What the server's metrics endpoint and the GPUs' exporters reported over each row's measured window (docs/metrics.md, Server and GPU telemetry). Gauges as mean / max over the scrapes; the server's own latencies in ms as mean / p95, the mean exact and the p95 interpolated within the engine's histogram bucket, so only as fine as its buckets; a gap is the client's mean minus the server's, in ms: the network, the HTTP stack and the client; power is all GPUs together, memory per GPU."

// upperFirst capitalises a sentence's first letter.
func UpperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
