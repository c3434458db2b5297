package reports

import (
	"github.com/infermatrix/infermatrix/metrics"
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
	// OperatingPoint is the highest-throughput row that passes
	// acceptance; empty when none passes (or none has rules).
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

// Analyze derives the run's analysis: predictions and sweep operating
// points.
func Analyze(in *Input) *Analysis {
	return &Analysis{Predictions: predictRows(in), Sweeps: analyzeSweeps(in)}
}

// analyzeSweeps places each sweep's operating point and knee.
func analyzeSweeps(in *Input) []SweepAnalysis {
	return nil // implemented in a follow-up commit
}
