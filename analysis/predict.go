package analysis

import (
	"fmt"
	"math"
	"strconv"

	"github.com/infermatrix/infermatrix/internal/numfmt"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/roofline"
	"github.com/infermatrix/infermatrix/schema"
)

// The regime rules' thresholds (docs/predictions.md, "Regimes"). They are
// round numbers, not fits: a rule is there to name the obvious case, and a
// row near a threshold shows its ratios for a reader to judge.
const (
	// nearBound is how far above a decode bound a TPOT still counts as
	// bandwidth-bound: real kernels reach the bound's η_bw only on average,
	// and a step also samples, schedules and launches.
	nearBound = 1.5
	// waitFactor is how far above its floor a TTFT is waiting rather
	// than computing, when decode runs near its bound meanwhile.
	waitFactor = 5
	// prefillHeavy is the input ÷ output ratio from which a row is
	// prefill-heavy, and prefillShare the share of E2E its TTFT must take
	// for prefill to dominate.
	prefillHeavy = 4
	prefillShare = 0.5
	// belowBound is the TPOT ÷ bound under which the prediction is too
	// pessimistic to be a bound: the predict section understates the
	// deployment.
	belowBound = 0.9
)

// predictRows computes the bandwidth-math predictions of every row of a
// plan with a predict section, and compares them with the measurements.
// It returns nil when the experiment makes no prediction.
//
// Every number comes from package roofline, the formulas the simulator's
// step times are built on, so a physics_only simulated row lands on its
// prediction; docs/predictions.md writes each one out.
func predictRows(in *input) []RowPrediction {
	if in == nil || in.Plan == nil || in.Plan.Experiment == nil || in.Plan.Experiment.Predict == nil {
		return nil
	}
	d, err := in.Plan.Experiment.Predict.Deployment()
	if err != nil {
		return nil // Load refuses such a plan; one built by hand gets no prediction
	}
	out := make([]RowPrediction, 0, len(in.Plan.Rows))
	for i := range in.Plan.Rows {
		row := &in.Plan.Rows[i]
		out = append(out, predictRow(d, row, rowSummary(in.Summary, row.ID)))
	}
	return out
}

// predictRow is one row's prediction; rs is its summary, or nil.
func predictRow(d schema.Deployment, row *schema.PlannedRow, rs *metrics.RowSummary) RowPrediction {
	p := RowPrediction{Row: row.ID}
	var measured *metrics.Metrics
	if rs != nil {
		measured = &rs.Metrics
	}
	in, out := predMeanTokens(row.Input, measured, true), predMeanTokens(row.Output, measured, false)
	if in <= 0 || out <= 0 {
		p.Evidence = "no prediction: the row gives no mean input and output length, and none was measured"
		return p
	}
	m, g, prec, eff := d.Model, d.GPU, d.Precision, d.Efficiency
	p.Context = in + out/2
	p.DecodeTokensPerS = roofline.DecodeTokensPerSecond(m, g, prec, eff, p.Context)
	p.TPOTBoundMS = 1e3 * roofline.TPOTBound(m, g, prec, eff, p.Context)
	// A warm shared prefix is in the prefix cache before the row starts:
	// its whole blocks are not computed again, as vLLM hits whole blocks.
	cached := 0
	if pf := row.Prefix; pf != nil && pf.Warm && d.BlockSize > 0 {
		cached = min(pf.Length/d.BlockSize*d.BlockSize, int(math.Round(in))-1)
	}
	p.PrefillBoundMS = 1e3 * roofline.PrefillBound(m, g, prec, eff, cached, int(math.Round(in))-cached)
	perReplica := roofline.KVCapacity(m, g, prec, d.GPUMemoryUtilization, d.ReserveBytes, d.BlockSize)
	p.KVCapacityTokens = perReplica * d.Replicas
	p.MaxConcurrency = roofline.MaxConcurrency(perReplica, int(math.Ceil(in+out)), d.BlockSize) * d.Replicas

	if measured != nil && measured.TPOT.Count > 0 {
		p.MeasuredTPOTMS = measured.TPOT.P50
		p.TPOTRatio = p.MeasuredTPOTMS / p.TPOTBoundMS
	}
	if measured != nil && measured.TTFT.Count > 0 && p.PrefillBoundMS > 0 {
		p.MeasuredTTFTMS = measured.TTFT.P50
		p.TTFTRatio = p.MeasuredTTFTMS / p.PrefillBoundMS
	}

	f := predFacts{d: d, row: row, rs: rs, p: &p, in: in, out: out}
	// The first step of a request reads every weight as well as computing
	// its prompt: TTFT's floor is the larger of the two bounds.
	f.floorMS = max(p.PrefillBoundMS, 1e3*roofline.TPOTBound(m, g, prec, eff, in))
	f.prefillComputeBound = p.PrefillBoundMS >= 1e3*roofline.TPOTBound(m, g, prec, eff, in)
	f.inFlight, f.inFlightText = predInFlight(row, rs, f.floorMS+(out-1)*p.TPOTBoundMS)
	// Sequences decoding together on one replica read their KV caches in
	// the same step: the step's bound is TPOTBound at their summed context.
	f.perReplica = max(1, f.inFlight/float64(d.Replicas))
	f.batchBoundMS = 1e3 * roofline.TPOTBound(m, g, prec, eff, f.perReplica*p.Context)
	p.Regime, p.Evidence = f.regime()
	return p
}

// predMeanTokens is a length's mean: the row's mean, or the mean of its listed
// values, or, for a dataset or trace row that sets neither, the measured
// mean. A prediction rests on what the row asks for wherever it says.
func predMeanTokens(l schema.Length, measured *metrics.Metrics, input bool) float64 {
	switch {
	case l.Mean > 0:
		return float64(l.Mean)
	case len(l.Values) > 0:
		sum := 0
		for _, v := range l.Values {
			sum += v
		}
		return float64(sum) / float64(len(l.Values))
	case measured == nil:
		return 0
	case input && measured.InputTokens.Count > 0:
		return measured.InputTokens.Mean
	case !input && measured.OutputTokens.Count > 0:
		return measured.OutputTokens.Mean
	}
	return 0
}

// predInFlight estimates the requests the server holds at once: a closed loop's
// concurrency, or by Little's law an open loop's arrival rate times its mean
// E2E (measured, else predictedE2EMS: the TTFT floor plus the remaining
// tokens at the TPOT bound), or a trace's measured completion rate times its
// mean E2E; never more than the row's max_concurrency. Zero when unknown.
func predInFlight(row *schema.PlannedRow, rs *metrics.RowSummary, predictedE2EMS float64) (float64, string) {
	var n float64
	var text string
	e2e, what := predictedE2EMS, "predicted E2E"
	if rs != nil && rs.Metrics.E2E.Count > 0 {
		e2e, what = rs.Metrics.E2E.Mean, "E2E mean"
	}
	switch row.Load.Mode {
	case schema.ModeConcurrency:
		return float64(row.Load.Concurrency), fmt.Sprintf("concurrency %d", row.Load.Concurrency)
	case schema.ModeRate:
		n = row.Load.Rate * e2e / 1e3
		text = fmt.Sprintf("%s req/s × %s %s s ≈ %s in flight", predSig(row.Load.Rate), what, predSig(e2e/1e3), predSig(n))
	case schema.ModeTrace:
		if rs == nil || rs.Metrics.E2E.Count == 0 {
			return 0, ""
		}
		n = rs.Throughput.RequestsPerS * e2e / 1e3
		text = fmt.Sprintf("%s req/s × %s %s s ≈ %s in flight", predSig(rs.Throughput.RequestsPerS), what, predSig(e2e/1e3), predSig(n))
	}
	if c := float64(row.Load.MaxConcurrency); c > 0 && n > c {
		n = c
		text = fmt.Sprintf("max_concurrency %d", row.Load.MaxConcurrency)
	}
	return n, text
}

// predFacts are what the regime rules look at.
type predFacts struct {
	d       schema.Deployment
	row     *schema.PlannedRow
	rs      *metrics.RowSummary
	p       *RowPrediction
	in, out float64
	// floorMS is TTFT's roofline floor; prefillComputeBound says whether
	// the prompt's FLOPs, rather than the weight read, set it.
	floorMS             float64
	prefillComputeBound bool
	// inFlight is the requests held at once (0 when unknown), described by
	// inFlightText; perReplica the sequences decoding together on one
	// replica (at least 1), whose step bound is batchBoundMS.
	inFlight     float64
	inFlightText string
	perReplica   float64
	batchBoundMS float64
}

// regime applies the rules of docs/predictions.md in order; the first that
// holds names the row's regime.
func (f *predFacts) regime() (string, string) {
	p := f.p
	var e2e, queue metrics.Dist
	if f.rs != nil {
		e2e, queue = f.rs.Metrics.E2E, f.rs.Metrics.Queue
	}
	hasTPOT, hasTTFT := p.MeasuredTPOTMS > 0, p.MeasuredTTFTMS > 0
	measured := hasTPOT || hasTTFT || e2e.Count > 0
	pre := ""
	if !measured {
		pre = "predicted, not measured: "
	}

	// 1. More sequences than the KV cache holds.
	if f.inFlight > float64(p.MaxConcurrency) {
		return RegimeQueueing, pre + fmt.Sprintf("%s exceeds the %d sequences of %s tokens the KV cache holds (%s tokens%s): the rest wait for memory or are preempted",
			f.inFlightText, p.MaxConcurrency, predCount(f.in+f.out), predCount(float64(p.KVCapacityTokens)), f.replicasText())
	}
	// 2. Requests waited in the client behind a concurrency cap.
	if queue.Count > 0 && queue.P50 > 0 {
		behind := "the row's concurrency cap"
		if c := f.row.Load.MaxConcurrency; c > 0 {
			behind = fmt.Sprintf("max_concurrency %d", c)
		}
		return RegimeQueueing, fmt.Sprintf("queue p50 %s ms: half the requests waited at least that long in the client, behind %s, before being sent",
			predSig(queue.P50), behind)
	}
	// 3. TTFT far above its floor while decode runs near its bound.
	if hasTTFT && hasTPOT && p.MeasuredTTFTMS > waitFactor*f.floorMS && p.MeasuredTPOTMS <= nearBound*f.batchBoundMS {
		return RegimeQueueing, fmt.Sprintf("TTFT p50 %s ms is %s× its roofline floor of %s ms while TPOT p50 %s ms is within %g× its bound of %s ms: requests wait before their prefill",
			predSig(p.MeasuredTTFTMS), predRatio(p.MeasuredTTFTMS/f.floorMS), predSig(f.floorMS), predSig(p.MeasuredTPOTMS), nearBound, predSig(f.batchBoundMS))
	}
	// 4. A prefill-heavy row whose TTFT dominates its E2E.
	heavy := f.in >= prefillHeavy*f.out && f.prefillComputeBound
	if heavy && hasTTFT && e2e.Count > 0 && e2e.P50 > 0 && p.MeasuredTTFTMS >= prefillShare*e2e.P50 {
		return RegimePrefill, fmt.Sprintf("TTFT p50 %s ms is %.0f%% of E2E p50 %s ms at %s input ÷ %s output tokens; the prefill bound is %s ms (TTFT %s× it)",
			predSig(p.MeasuredTTFTMS), 100*p.MeasuredTTFTMS/e2e.P50, predSig(e2e.P50), predCount(f.in), predCount(f.out), predSig(p.PrefillBoundMS), predRatio(p.TTFTRatio))
	}
	// 5 and 6. Decode near its bound, or not.
	if hasTPOT {
		return f.decodeRegime()
	}
	// Without a measured TPOT, the regime the bounds predict.
	if measured {
		pre = "predicted, TPOT not measured: "
	}
	decodeMS := (f.out - 1) * f.batchBoundMS
	if heavy && f.floorMS >= decodeMS {
		return RegimePrefill, pre + fmt.Sprintf("the prefill bound of %s ms at %s input tokens exceeds the %s ms of decoding %s output tokens at the TPOT bound",
			predSig(p.PrefillBoundMS), predCount(f.in), predSig(decodeMS), predCount(f.out))
	}
	return RegimeBandwidth, pre + fmt.Sprintf("one stream decodes at most %s tokens/s, %s ms per token at %s tokens of context",
		predSig(p.DecodeTokensPerS), predSig(p.TPOTBoundMS), predCount(p.Context))
}

// decodeRegime is rules 5 and 6: TPOT within nearBound of the single-stream
// bound, or of the bound of the sequences decoding together, is
// bandwidth-bound decode; beyond both, overhead-bound.
func (f *predFacts) decodeRegime() (string, string) {
	p := f.p
	tpot := p.MeasuredTPOTMS
	batched := f.perReplica > 1
	switch {
	case p.TPOTRatio <= nearBound:
		return RegimeBandwidth, fmt.Sprintf("TPOT p50 %s ms is %s× the bound of %s ms at %s tokens of context%s",
			predSig(tpot), predRatio(p.TPOTRatio), predSig(p.TPOTBoundMS), predCount(p.Context), f.belowNote(p.TPOTRatio))
	case batched && tpot <= nearBound*f.batchBoundMS:
		r := tpot / f.batchBoundMS
		return RegimeBandwidth, fmt.Sprintf("TPOT p50 %s ms is %s× the bound of %s ms for %s sequences of %s tokens decoding together per replica (%s× the single-stream bound of %s ms)%s",
			predSig(tpot), predRatio(r), predSig(f.batchBoundMS), predCount(f.perReplica), predCount(p.Context), predRatio(p.TPOTRatio), predSig(p.TPOTBoundMS), f.belowNote(r))
	case batched:
		return RegimeOverhead, fmt.Sprintf("TPOT p50 %s ms is %s× the single-stream bound of %s ms and %s× the bound of %s ms for %s sequences decoding together per replica: per-step and per-sequence costs, or prefill chunks sharing decode steps, dominate",
			predSig(tpot), predRatio(p.TPOTRatio), predSig(p.TPOTBoundMS), predRatio(tpot/f.batchBoundMS), predSig(f.batchBoundMS), predCount(f.perReplica))
	}
	return RegimeOverhead, fmt.Sprintf("TPOT p50 %s ms is %s× the bound of %s ms at %s: fixed per-step costs (scheduling, kernel launches, sampling, the API server) dominate the weight read",
		predSig(tpot), predRatio(p.TPOTRatio), predSig(p.TPOTBoundMS), f.loadText())
}

// belowNote warns when a TPOT beats its bound by more than measurement
// noise: the bound was not one.
func (f *predFacts) belowNote(r float64) string {
	if r >= belowBound {
		return ""
	}
	return "; below the bound, so the predict section understates the deployment (η_bw, precision, GPU) or the server decodes several tokens per step, as speculative decoding does"
}

func (f *predFacts) replicasText() string {
	if f.d.Replicas == 1 {
		return ""
	}
	return fmt.Sprintf(" over %d replicas", f.d.Replicas)
}

func (f *predFacts) loadText() string {
	if f.inFlightText != "" {
		return f.inFlightText
	}
	return "its load"
}

// predSig formats a figure to about three significant digits, as evidence
// quotes it (numfmt.Sig).
func predSig(v float64) string { return numfmt.Sig(v) }

// predCount formats a count of tokens or sequences: whole numbers with
// thousands separators (403,888), others to one decimal (2.5).
func predCount(v float64) string {
	if s, ok := numfmt.Grouped(v); ok {
		return s
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// predRatio formats a measured ÷ bound ratio.
func predRatio(r float64) string { return strconv.FormatFloat(r, 'f', 2, 64) }
