// Package analysis derives what a judged run's record shows beyond the
// verdicts: each row's bandwidth-math prediction and regime, each sweep's
// operating point and knee, and the diagnosis that reads both (package
// diagnosis). It is computed once here so that every renderer shows the
// same numbers.
//
// It reads a run's plan, summary and decision (package verdict); it never
// imports reports or charts, which render it.
package analysis

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/infermatrix/infermatrix/internal/numfmt"

	"github.com/infermatrix/infermatrix/diagnosis"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

// Analysis is what the decision record derives from a run beyond the
// verdicts, computed once and shown by every renderer (decision.md,
// report.html, results.xlsx, the plots), so that they cannot disagree.
type Analysis struct {
	// Predictions holds one entry per row, in plan order, when the
	// experiment has a predict section; nil otherwise.
	Predictions []RowPrediction `json:"predictions,omitempty"`
	// Sweeps holds one entry per swept row (a row with a sweep), in plan
	// order.
	Sweeps []SweepAnalysis `json:"sweeps,omitempty"`
	// Searches holds one entry per search row, in plan order
	// (analysis/search.go).
	Searches []SearchAnalysis `json:"searches,omitempty"`
	// Diagnosis reads each row's client figures, telemetry and
	// prediction (package diagnosis, docs/diagnosis.md); every record
	// shows it.
	Diagnosis *diagnosis.Diagnosis `json:"diagnosis"`
}

// RowPrediction is the bandwidth math for one row, and how the
// measurement compares. Times are in ms, rates per second.
type RowPrediction struct {
	Row string `json:"row"`
	// Context is the mean tokens in the KV cache during decode, input +
	// output/2, the context the TPOT bound is computed at.
	Context float64 `json:"context_tokens"`
	// DecodeTokensPerS is one stream's bandwidth-bound decode rate,
	// η_bw × bandwidth ÷ (weight bytes + KV bytes × context).
	DecodeTokensPerS float64 `json:"decode_tokens_per_s"`
	// TPOTBoundMS is its reciprocal: the lower bound on TPOT at batch one.
	TPOTBoundMS float64 `json:"tpot_bound_ms"`
	// PrefillBoundMS is the compute-bound lower bound on prefilling the
	// row's mean input length.
	PrefillBoundMS float64 `json:"prefill_bound_ms"`
	// KVCapacityTokens is the KV cache of the deployment in tokens, and
	// MaxConcurrency the sequences of the row's lengths it holds at once.
	KVCapacityTokens int `json:"kv_capacity_tokens"`
	MaxConcurrency   int `json:"max_concurrency"`
	// Measured values (p50) and their ratios to the bounds; zero when the
	// row has no such measurement.
	MeasuredTPOTMS float64 `json:"measured_tpot_p50_ms,omitempty"`
	TPOTRatio      float64 `json:"tpot_measured_over_predicted,omitempty"`
	MeasuredTTFTMS float64 `json:"measured_ttft_p50_ms,omitempty"`
	TTFTRatio      float64 `json:"ttft_measured_over_predicted,omitempty"`
	// Regime is one of the Regime* labels, and Evidence says which
	// numbers put the row there.
	Regime   string `json:"regime"`
	Evidence string `json:"evidence"`
}

// The regime labels.
const (
	RegimeBandwidth = "bandwidth-bound decode"
	RegimeOverhead  = "overhead-bound"
	RegimePrefill   = "compute-bound prefill"
	RegimeQueueing  = "queueing"
)

// SweepAnalysis places a sweep's operating point and knee.
type SweepAnalysis struct {
	Base string `json:"base"` // the row id as written
	// Rows are the expanded rows' ids in sweep order.
	Rows []string `json:"rows"`
	// OperatingPoint is the highest-throughput valid row that passes
	// acceptance; empty when none does (or none has rules).
	OperatingPoint string `json:"operating_point,omitempty"`
	// Knee is the row after which output throughput gains flatten while
	// latency climbs; empty when the sweep shows none.
	Knee string `json:"knee,omitempty"`
	// Why explains both in a sentence, with the numbers.
	Why string `json:"why"`
}

// rowSummary finds a row's summary.
func rowSummary(s *metrics.Summary, id string) *metrics.RowSummary {
	if s == nil {
		return nil
	}
	for i := range s.Rows {
		if s.Rows[i].ID == id {
			return &s.Rows[i]
		}
	}
	return nil
}

// input is what the analysis reads of a judged run.
type input struct {
	Plan     *schema.Plan
	Summary  *metrics.Summary
	Decision *verdict.Decision
}

// Analyze derives the run's analysis from its plan, summary and decision:
// predictions, sweep operating points and the diagnosis, which reads the
// predictions.
func Analyze(plan *schema.Plan, sum *metrics.Summary, d *verdict.Decision) *Analysis {
	in := &input{Plan: plan, Summary: sum, Decision: d}
	a := &Analysis{Predictions: predictRows(in), Sweeps: analyzeSweeps(in), Searches: analyzeSearches(plan, d)}
	a.Diagnosis = Diagnose(plan, sum, d, a.Predictions)
	return a
}

// Diagnose runs the diagnosis over a judged run: each planned row with its
// summary, whether it failed its rules, and its prediction.
func Diagnose(plan *schema.Plan, sum *metrics.Summary, d *verdict.Decision, preds []RowPrediction) *diagnosis.Diagnosis {
	if plan == nil {
		return &diagnosis.Diagnosis{Examined: []string{}}
	}
	byRow := map[string]*RowPrediction{}
	for i := range preds {
		byRow[preds[i].Row] = &preds[i]
	}
	din := diagnosis.Input{}
	if sum != nil {
		din.SLO = sum.SLO
	}
	for i := range plan.Rows {
		r := &plan.Rows[i]
		row := diagnosis.Row{Plan: r, Summary: rowSummary(sum, r.ID)}
		if d != nil {
			if rv := d.Row(r.ID); rv != nil {
				row.Failed = rv.Verdict == verdict.Fail || rv.Verdict == verdict.Rejected
			}
		}
		if p := byRow[r.ID]; p != nil {
			row.Prediction = &diagnosis.Prediction{Regime: p.Regime, TPOTBoundMS: p.TPOTBoundMS, TTFTBoundMS: p.PrefillBoundMS,
				TPOTRatio: p.TPOTRatio, TTFTRatio: p.TTFTRatio, MaxConcurrency: p.MaxConcurrency}
		}
		din.Rows = append(din.Rows, row)
	}
	return diagnosis.Diagnose(din)
}

// Knee thresholds: a step up in load whose throughput gain is less than
// kneeGain of the load's own relative increase has flattened, and a latency
// rise of more than kneeLatency (TTFT p95, TPOT p95 or E2E p50, whichever
// rose most) says the extra load is queueing rather than being served.
const (
	kneeGain    = 0.5
	kneeLatency = 0.2
)

// probeLoad is the load a search's probe offers: its users or its rate.
func probeLoad(r *schema.PlannedRow) float64 {
	if r.Load.Mode == schema.ModeConcurrency {
		return float64(r.Load.Concurrency)
	}
	return r.Load.Rate
}

// analyzeSweeps places each sweep's operating point and knee. A sweep is
// the set of planned rows expanded from one written row (same Base, an id
// of its own), in plan order, which is the order of the swept values.
func analyzeSweeps(in *input) []SweepAnalysis {
	if in.Plan == nil {
		return nil
	}
	var order []string
	groups := map[string][]int{}
	for i, r := range in.Plan.Rows {
		if r.ID == r.Base {
			continue
		}
		if _, ok := groups[r.Base]; !ok {
			order = append(order, r.Base)
		}
		groups[r.Base] = append(groups[r.Base], i)
	}
	verdicts := map[string]string{}
	if in.Decision != nil {
		for _, rv := range in.Decision.Rows {
			verdicts[rv.ID] = rv.Verdict
		}
	}
	var out []SweepAnalysis
	for _, base := range order {
		idx := groups[base]
		// A search's probes ran in the order the search chose them
		// (8, 16, 32, 23, 19...); the knee, the plots' lines and the
		// tables read a sweep in the order of its load.
		if in.Plan.Rows[idx[0]].Probe != nil {
			sort.SliceStable(idx, func(a, b int) bool {
				return probeLoad(&in.Plan.Rows[idx[a]]) < probeLoad(&in.Plan.Rows[idx[b]])
			})
		}
		sa := SweepAnalysis{Base: base}
		for _, i := range idx {
			sa.Rows = append(sa.Rows, in.Plan.Rows[i].ID)
		}
		var why []string
		// The operating point: the passing row with the most output
		// tokens per second. A passing row is a valid one.
		best, bestTP := "", 0.0
		judged, ruled, invalid := false, false, false
		for _, id := range sa.Rows {
			v := verdicts[id]
			judged = judged || v == verdict.Pass || v == verdict.Fail || v == verdict.Rejected
			invalid = invalid || v == verdict.Invalid
			ruled = ruled || (v != verdict.NoRules && v != "")
			rs := rowSummary(in.Summary, id)
			if v != verdict.Pass || rs == nil {
				continue
			}
			if tp := rs.Throughput.WorkPerS(); tp > bestTP {
				best, bestTP = id, tp
			}
		}
		switch {
		case best != "":
			sa.OperatingPoint = best
			what := "output"
			if rs := rowSummary(in.Summary, best); rs != nil && rs.Throughput.InputsPerS > 0 {
				what = "input" // an embeddings or rerank sweep
			}
			why = append(why, fmt.Sprintf("operating point `%s`: the highest %s throughput (%s tok/s) of the valid rows that pass acceptance", best, what, numfmt.Num(bestTP)))
		case judged:
			why = append(why, "no operating point: no valid row of the sweep passes acceptance")
		case invalid:
			why = append(why, "no operating point: the sweep's rows with rules are invalid")
		case ruled:
			why = append(why, "no operating point: no row of the sweep was judged (not run, or failed to run)")
		default:
			why = append(why, "no operating point: the sweep's rows have no acceptance rules")
		}
		// A sweep an operating_point rule judges states the judge's
		// answer, which also says when a point above it went unjudged.
		if in.Decision != nil {
			for _, op := range in.Decision.OperatingPoints {
				if op.Base == base {
					sa.OperatingPoint = op.Row
					why[0] = op.Why
				}
			}
		}
		knee, kneeWhy := findKnee(in, idx)
		sa.Knee = knee
		why = append(why, kneeWhy)
		sa.Why = strings.Join(why, "; ") + "."
		out = append(out, sa)
	}
	return out
}

// findKnee walks a sweep in order of increasing load and returns the last
// row before throughput stopped keeping up with the load while latency
// climbed, with the numbers that decided it.
func findKnee(in *input, idx []int) (string, string) {
	load := func(r *schema.PlannedRow) float64 {
		if r.Load.Mode == schema.ModeConcurrency {
			return float64(r.Load.Concurrency)
		}
		return r.Load.Rate
	}
	rows := in.Plan.Rows
	for k := 1; k < len(idx); k++ {
		a, b := &rows[idx[k-1]], &rows[idx[k]]
		if a.Input.String() != b.Input.String() || a.Output.String() != b.Output.String() || a.Load.Mode != b.Load.Mode {
			return "", "no knee: the sweep varies more than the load"
		}
	}
	// Walk in order of load, whatever order the values were written in,
	// over the rows that ran: a row without measurements is skipped, and
	// its neighbours are compared with each other.
	measured := func(r *schema.PlannedRow) bool {
		rs := rowSummary(in.Summary, r.ID)
		if in.Decision != nil {
			if rv := in.Decision.Row(r.ID); rv != nil && !rv.Validity.Valid {
				return false // its figures cannot place a knee
			}
		}
		return rs != nil && (rs.Status == metrics.RowComplete || rs.Status == metrics.RowInterrupted) && rs.Throughput.WorkPerS() > 0
	}
	var walk []*schema.PlannedRow
	for _, i := range idx {
		if measured(&rows[i]) && load(&rows[i]) > 0 {
			walk = append(walk, &rows[i])
		}
	}
	slices.SortStableFunc(walk, func(a, b *schema.PlannedRow) int { return cmp.Compare(load(a), load(b)) })
	if len(walk) < 2 {
		return "", "no knee: fewer than two valid rows of the sweep were measured"
	}
	for k := 1; k < len(walk); k++ {
		a, b := walk[k-1], walk[k]
		sa, sb := rowSummary(in.Summary, a.ID), rowSummary(in.Summary, b.ID)
		la, lb := load(a), load(b)
		if lb <= la {
			continue
		}
		ta, tb := sa.Throughput.WorkPerS(), sb.Throughput.WorkPerS()
		if ta <= 0 {
			continue
		}
		gain := (tb - ta) / ta
		step := (lb - la) / la
		rise, what := 0.0, ""
		for _, m := range []struct {
			name string
			a, b float64
		}{
			{"TTFT p95", sa.Metrics.TTFT.P95, sb.Metrics.TTFT.P95},
			{"TPOT p95", sa.Metrics.TPOT.P95, sb.Metrics.TPOT.P95},
			{"E2E p50", sa.Metrics.E2E.P50, sb.Metrics.E2E.P50},
		} {
			if m.a > 0 && (m.b-m.a)/m.a > rise {
				rise, what = (m.b-m.a)/m.a, m.name
			}
		}
		if gain < kneeGain*step && rise > kneeLatency {
			tput := fmt.Sprintf("output throughput only %.0f%%", 100*gain)
			if math.Round(100*gain) < 0 {
				tput = fmt.Sprintf("output throughput fell %.0f%%", -100*gain)
			}
			return a.ID, fmt.Sprintf("knee at `%s`: going to `%s` raised the load %.0f%% but %s, while %s rose %.0f%%",
				a.ID, b.ID, 100*step, tput, what, 100*rise)
		}
	}
	return "", "no knee: throughput kept up with the load across the sweep"
}
