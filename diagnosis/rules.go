package diagnosis

import (
	"fmt"
	"math"
	"strings"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

// The rules' thresholds (docs/diagnosis.md). Round numbers, not fits: a
// rule names the plain case, and its evidence quotes the figures so that a
// reader can judge a row near a threshold.
const (
	// tailRatio: a TTFT p99 this many times its p50 is a tail, not a
	// distribution's spread.
	tailRatio = 3.0
	// waitingMean: requests waiting for a batch slot on average; below
	// it the queue is noise of the scrape.
	waitingMean = 0.5
	// queueShare and queueFloorMS: a server queue-time p95 this share of
	// the client's TTFT p95, and at least this long, is a queue.
	queueShare   = 0.25
	queueFloorMS = 10.0
	// kvFull is the KV-cache use from which the cache is full: vLLM
	// preempts before it reaches 1.
	kvFull = 0.95
	// farAbove: a TPOT this many times its bandwidth bound is not
	// memory-bound.
	farAbove = 2.0
	// gpuIdle and gpuBusy are GPU utilization means below which the GPU
	// waited on the host, and above which its kernels ran nearly always;
	// memBusy and memIdle the memory-copy utilization means that say the
	// memory streamed, or did not.
	gpuIdle = 0.5
	gpuBusy = 0.8
	memBusy = 0.5
	memIdle = 0.3
	// clockDrop: an SM clock whose minimum is below this share of its
	// maximum while the GPU was busy was throttled.
	clockDrop = 0.8
	// tpotRise, flatGain: a step up in concurrency that raises TPOT p50
	// by tpotRise while output throughput grows by less than flatGain of
	// the step is the batching trade-off; batchedShare of the
	// concurrency running on the server says the requests were batched
	// rather than queued.
	tpotRise     = 0.2
	flatGain     = 0.5
	batchedShare = 0.8
	// prefillGrowth: TTFT growing by at least this share of the input's
	// growth is prefill cost.
	prefillGrowth = 0.5
	// missShare: a prefix-cache hit rate under this share of the one the
	// declared prefix gives has missed; minExpected is the least expected
	// hit rate worth checking.
	missShare   = 0.5
	minExpected = 0.1
	// contaminated: an unexpected cache-hit share (client) or a hit rate
	// (server) above these on a row meant to be cold.
	contaminatedClient = 0.1
	contaminatedServer = 0.3
	// gapShare, ttftGapFloorMS, tpotGapFloorMS: a client-minus-server gap
	// above this share of the client's p50, and above the floor, is time
	// outside the engine.
	gapShare       = 0.2
	ttftGapFloorMS = 10.0
	tpotGapFloorMS = 2.0
)

// Rule names (Finding.Rule), in the order rules run.
const (
	ruleKV            = "kv_capacity"
	ruleQueueing      = "queueing"
	rulePrefill       = "prefill"
	ruleMemoryBound   = "memory_bound"
	ruleNonMemory     = "non_memory"
	ruleClocks        = "clocks"
	ruleBatching      = "batching"
	ruleCacheMiss     = "cache_miss"
	ruleContamination = "contamination"
	ruleGap           = "outside_engine"
	ruleCounters      = "counters"
	ruleShared        = "shared_server"
)

// rules run in this order on every row; each returns a finding only when
// every figure it quotes is present.
var rules = []func(*rowFacts) (Finding, bool){
	kvCapacity, queueing, prefill, memoryBound, nonMemory, clocks, batching, cacheMiss, contamination, outsideEngine, counters, sharedServer,
}

// sharedSlack is how many requests the server may hold beyond the most
// the client had in flight before the excess is another client's: a
// request the client gave up on (a timeout, a cancellation) can outlive
// its record on the server for a moment, and a scrape is not taken at the
// client's instant.
const sharedSlack = 2

// sharedServer: the server held more requests at once than the client ever
// had in flight. The excess is someone else's load, which every figure of
// the row then includes.
func sharedServer(f *rowFacts) (Finding, bool) {
	s := f.srv
	if s == nil || s.NumRequestsRunning == nil || f.rs.InFlight.Max == 0 {
		return Finding{}, false
	}
	held := s.NumRequestsRunning.Max
	what := fmt.Sprintf("`server.num_requests_running` max %s", level(held))
	if w := s.NumRequestsWaiting; w != nil {
		// Running and waiting peak at different scrapes; their sum's
		// peak is at most the sum of the peaks, so only running alone
		// is a sure lower bound. Waiting is quoted, not added.
		what += fmt.Sprintf(" (and `server.num_requests_waiting` max %s)", level(w.Max))
	}
	// An embeddings or rerank request is one engine sequence per input
	// (vLLM schedules each input of a batch as a request of its own), so
	// the client's sequences in flight are its requests times its inputs.
	sent := f.rs.InFlight.Max
	had := fmt.Sprintf("the client had at most %d of the row's requests in flight", sent)
	if t := f.rs.Throughput; t.InputsPerS > 0 && t.RequestsPerS > 0 {
		per := int(math.Ceil(t.InputsPerS/t.RequestsPerS - 1e-9))
		sent *= per
		had += fmt.Sprintf(", %d inputs each: %d sequences", per, sent)
	}
	limit := float64(sent + max(sharedSlack, sent/10))
	if held <= limit {
		return Finding{}, false
	}
	return Finding{Rule: ruleShared, Regime: RegimeShared, Severity: SeverityWarn,
		Evidence: []string{what, had},
		Symptom:  "the server ran more requests at once than this row ever sent: another client's load shares the server, and every figure of the row includes it",
		Next:     "Measure on a server nothing else uses (another benchmark, a health checker that generates, a user); the server's token counters over the row show how much load was not the run's."}, true
}

// kvCapacity: the server preempted sequences, or its KV cache ran full.
func kvCapacity(f *rowFacts) (Finding, bool) {
	s := f.srv
	if s == nil {
		return Finding{}, false
	}
	preempted := s.Preemptions != nil && *s.Preemptions > 0
	full := s.KVCacheUsage != nil && s.KVCacheUsage.Max >= kvFull
	if !preempted && !full {
		return Finding{}, false
	}
	fd := Finding{Rule: ruleKV, Regime: RegimeKVCapacity, Severity: SeverityInfo}
	if preempted {
		fd.Severity = SeverityWarn
		fd.Symptom = fmt.Sprintf("the server preempted %s sequences: it evicted running requests to make room in the KV cache, and recomputes them", count(*s.Preemptions))
		fd.Evidence = append(fd.Evidence, fmt.Sprintf("`server.preemptions` %s over the window", count(*s.Preemptions)))
	} else {
		fd.Symptom = fmt.Sprintf("the KV cache ran full (%s at most): the server admits no more sequences until one ends", pct(s.KVCacheUsage.Max))
	}
	if g := s.KVCacheUsage; g != nil {
		fd.Evidence = append(fd.Evidence, fmt.Sprintf("`server.kv_cache_usage` mean %s, max %s", pct(g.Mean), pct(g.Max)))
	}
	if g := s.NumRequestsWaiting; g != nil && g.Max > 0 {
		fd.Evidence = append(fd.Evidence, fmt.Sprintf("`server.num_requests_waiting` mean %s, max %s", level(g.Mean), level(g.Max)))
	}
	if p := f.pred; p != nil && p.MaxConcurrency > 0 && f.rs.InFlight.Max > 0 {
		fd.Evidence = append(fd.Evidence, fmt.Sprintf("the prediction's KV cache holds %d sequences of this row's length; the client had %s in flight on average, %d at most",
			p.MaxConcurrency, level(f.rs.InFlight.Mean), f.rs.InFlight.Max))
		if f.rs.InFlight.Max < p.MaxConcurrency {
			// The server ran out with fewer sequences than the
			// prediction's cache holds: one of the two is wrong about
			// the memory, and the file can say which.
			fd.Evidence = append(fd.Evidence, fmt.Sprintf("the server ran out with at most %d in flight, fewer than the %d the prediction's cache holds: the prediction assumes more KV memory than the server has (compare predict's gpu_memory_utilization, precision and reserve with the engine's flags)",
				f.rs.InFlight.Max, p.MaxConcurrency))
		}
	}
	fd.Next = "Admit fewer sequences at once (max_num_seqs, or less concurrency), shorten the context, or give the KV cache more memory: a higher gpu_memory_utilization, an fp8 KV cache, tensor parallelism over more GPUs. The telemetry plot shows when the cache filled."
	return fd, true
}

// queueing: TTFT's tail, or an SLO it misses, while requests wait for a
// batch slot in the server or behind the client's concurrency cap.
func queueing(f *rowFacts) (Finding, bool) {
	ttft := f.rs.Metrics.TTFT
	var symptom []string
	if ttft.Count > 0 && ttft.P50 > 0 && ttft.P99 >= tailRatio*ttft.P50 {
		symptom = append(symptom, fmt.Sprintf("TTFT p99 %s is %s× its p50 of %s", ms(ttft.P99), ratio(ttft.P99/ttft.P50), ms(ttft.P50)))
	}
	if f.slo.TTFTms > 0 && ttft.Count > 0 && ttft.P95 > f.slo.TTFTms {
		symptom = append(symptom, fmt.Sprintf("TTFT p95 %s exceeds the SLO of %s", ms(ttft.P95), ms(f.slo.TTFTms)))
	}
	var ev []string
	s := f.srv
	if s != nil && s.NumRequestsWaiting != nil && s.NumRequestsWaiting.Mean >= waitingMean {
		g := s.NumRequestsWaiting
		ev = append(ev, fmt.Sprintf("`server.num_requests_waiting` mean %s, max %s", level(g.Mean), level(g.Max)))
	}
	// The p95 is interpolated within buckets; the exact mean must show a
	// queue too.
	if s != nil && s.QueueTime != nil && s.QueueTime.Count > 0 && ttft.Count > 0 &&
		s.QueueTime.P95 >= math.Max(queueFloorMS, queueShare*ttft.P95) && s.QueueTime.Mean >= queueFloorMS {
		ev = append(ev, fmt.Sprintf("`server.queue_time` p95 %s, %s of the client's TTFT p95 of %s", ms(s.QueueTime.P95), pct(s.QueueTime.P95/ttft.P95), ms(ttft.P95)))
	}
	if q := f.rs.Metrics.Queue; q.Count > 0 && q.P50 > 0 {
		behind := "the row's concurrency cap"
		if c := f.Plan.Load.MaxConcurrency; c > 0 {
			behind = fmt.Sprintf("max_concurrency %d", c)
		}
		ev = append(ev, fmt.Sprintf("`queue` p50 %s, p95 %s: requests waited in the client behind %s before being sent", ms(q.P50), ms(q.P95), behind))
	}
	if p := f.pred; p != nil && p.Regime == PredictedQueueing && p.TTFTRatio > 0 {
		ev = append(ev, fmt.Sprintf("TTFT p50 is %s× the prefill bound of %s; the prediction places the row in queueing", ratio(p.TTFTRatio), ms(p.TTFTBoundMS)))
	}
	if len(ev) == 0 {
		return Finding{}, false
	}
	if len(symptom) == 0 {
		if !f.Failed || s == nil || s.NumRequestsWaiting == nil || s.NumRequestsWaiting.Mean < 1 {
			return Finding{}, false
		}
		symptom = append(symptom, "the row failed its rules while requests queued")
	}
	fd := Finding{Rule: ruleQueueing, Regime: RegimeQueueing, Severity: SeverityWarn,
		Symptom: strings.Join(symptom, "; ") + ": requests wait for a batch slot before their prefill", Evidence: ev}
	if t := loadTrend(f); t != "" {
		fd.Evidence = append(fd.Evidence, t)
	}
	fd.Next = "Offer less load, or serve more of it: raise the engine's limit on requests run at once (vLLM --max-num-seqs, SGLang --max-running-requests, TGI --max-batch-size, llama.cpp --parallel) where the KV cache has room, or add replicas. The telemetry plot shows the queue over the row."
	if s != nil && s.KVCacheUsage != nil && s.KVCacheUsage.Max >= kvFull {
		fd.Next = "Offer less load, or add replicas or KV memory: the KV cache is full, so a larger batch limit would only preempt. The telemetry plot shows the queue over the row."
	}
	return fd, true
}

// loadTrend says how the server's queue grew across f's sweep, when f is
// the sweep's highest load and every point has the gauge.
func loadTrend(f *rowFacts) string {
	dim := "concurrency"
	if f.Plan.Load.Mode == schema.ModeRate {
		dim = "rate"
	}
	sib := f.siblings(dim)
	if len(sib) == 0 || sib[len(sib)-1].Plan.ID != f.id {
		return ""
	}
	var vals, loads []string
	for _, r := range sib {
		s := r.Summary.Server
		if s == nil || s.NumRequestsWaiting == nil {
			return ""
		}
		vals = append(vals, level(s.NumRequestsWaiting.Mean))
		loads = append(loads, count(r.Plan.SweepPoint[dim]))
	}
	first, last := sib[0].Summary.Server.NumRequestsWaiting.Mean, sib[len(sib)-1].Summary.Server.NumRequestsWaiting.Mean
	if last <= first {
		return ""
	}
	return fmt.Sprintf("across the sweep `%s`, `server.num_requests_waiting` mean went %s as %s went %s", f.Plan.Base,
		strings.Join(vals, " → "), dim, strings.Join(loads, " → "))
}

// prefill: TTFT set by the prompt's computation, not by a queue: the
// prediction says prefill dominates, or TTFT grows with the input across
// a sweep, while nothing waits.
func prefill(f *rowFacts) (Finding, bool) {
	ttft := f.rs.Metrics.TTFT
	if ttft.Count == 0 {
		return Finding{}, false
	}
	s := f.srv
	if s != nil && s.NumRequestsWaiting != nil && s.NumRequestsWaiting.Mean >= waitingMean {
		return Finding{}, false // a queue: the queueing rule speaks
	}
	var ev []string
	if t := inputTrend(f); t != "" {
		ev = append(ev, t)
	}
	overSLO := f.slo.TTFTms > 0 && ttft.P95 > f.slo.TTFTms
	if p := f.pred; p != nil && p.Regime == PredictedPrefill && p.TTFTRatio > 0 && (f.Failed || overSLO || len(ev) > 0) {
		ev = append(ev, fmt.Sprintf("TTFT p50 %s is %s× the compute-bound prefill bound of %s; the prediction places the row in prefill", ms(ttft.P50), ratio(p.TTFTRatio), ms(p.TTFTBoundMS)))
	}
	if len(ev) == 0 {
		return Finding{}, false
	}
	if s != nil && s.NumRequestsWaiting != nil {
		ev = append(ev, fmt.Sprintf("`server.num_requests_waiting` mean %s: nothing queued", level(s.NumRequestsWaiting.Mean)))
	}
	fd := Finding{Rule: rulePrefill, Regime: RegimePrefill, Severity: SeverityInfo, Evidence: ev,
		Symptom: fmt.Sprintf("TTFT (p50 %s, p95 %s) is set by prefill, the prompt's computation", ms(ttft.P50), ms(ttft.P95))}
	if overSLO {
		fd.Symptom += fmt.Sprintf(", over the SLO of %s", ms(f.slo.TTFTms))
	}
	fd.Next = "Cut or spread the prefill: a larger chunked-prefill budget (max_num_batched_tokens), shorter prompts, prefix caching of their shared part, or more compute per token (tensor parallelism)."
	return fd, true
}

// inputTrend says how TTFT grew across an input-length sweep, when f is
// its longest input, TTFT grew at least prefillGrowth of the input's
// growth, and no point queued (the server's gauge says so, or a closed
// loop of one cannot queue).
func inputTrend(f *rowFacts) string {
	sib := f.siblings("input_tokens")
	if len(sib) == 0 || sib[len(sib)-1].Plan.ID != f.id {
		return ""
	}
	a, b := sib[0], sib[len(sib)-1]
	ta, tb := a.Summary.Metrics.TTFT, b.Summary.Metrics.TTFT
	ia, ib := a.Plan.SweepPoint["input_tokens"], b.Plan.SweepPoint["input_tokens"]
	if ta.Count == 0 || tb.Count == 0 || ta.P50 <= 0 || ib <= ia {
		return ""
	}
	growth, step := tb.P50/ta.P50-1, ib/ia-1
	if growth < prefillGrowth*step {
		return ""
	}
	for _, r := range sib {
		s := r.Summary.Server
		single := r.Plan.Load.Mode == schema.ModeConcurrency && r.Plan.Load.Concurrency == 1
		if !single && (s == nil || s.NumRequestsWaiting == nil || s.NumRequestsWaiting.Mean >= waitingMean) {
			return ""
		}
	}
	return fmt.Sprintf("across the sweep `%s`, TTFT p50 went %s → %s (×%s) as input went %s → %s tokens (×%s), with no queue at any point",
		f.Plan.Base, ms(ta.P50), ms(tb.P50), ratio(tb.P50/ta.P50), count(ia), count(ib), ratio(ib/ia))
}

// memoryBound: decode at the bandwidth bound, where the server is doing
// its job and only fewer bytes or more bandwidth go faster. Stated when
// the row failed or misses its TPOT SLO, or when the GPUs' memory
// counters confirm it.
func memoryBound(f *rowFacts) (Finding, bool) {
	p := f.pred
	tpot := f.rs.Metrics.TPOT
	if p == nil || p.Regime != PredictedBandwidth || p.TPOTRatio <= 0 || tpot.Count == 0 {
		return Finding{}, false
	}
	overSLO := f.slo.TPOTms > 0 && tpot.P95 > f.slo.TPOTms
	var mem *metrics.Gauge
	if f.gpu != nil {
		mem = f.gpu.MemCopyUtilization
	}
	confirmed := mem != nil && mem.Mean >= memBusy
	if mem != nil && mem.Mean < memIdle {
		return Finding{}, false // the counters say memory idled: not this regime
	}
	if !f.Failed && !overSLO && !confirmed {
		return Finding{}, false
	}
	fd := Finding{Rule: ruleMemoryBound, Regime: RegimeMemoryBound, Severity: SeverityInfo,
		Symptom:  fmt.Sprintf("decode runs at the memory-bandwidth limit (TPOT p50 %s)", ms(tpot.P50)),
		Evidence: []string{fmt.Sprintf("TPOT p50 %s is %s× the bandwidth bound of %s", ms(tpot.P50), ratio(p.TPOTRatio), ms(p.TPOTBoundMS))}}
	if overSLO {
		fd.Symptom += fmt.Sprintf("; TPOT p95 %s misses the SLO of %s", ms(tpot.P95), ms(f.slo.TPOTms))
	}
	if mem != nil {
		fd.Evidence = append(fd.Evidence, fmt.Sprintf("`gpu.mem_copy_utilization` mean %s", pct(mem.Mean)))
	}
	fd.Next = "The server is doing its job: each step reads the weights and KV cache at the memory's speed. To go faster per user, move fewer bytes per token (quantized weights or KV cache), or spread them over more GPUs (tensor parallelism); batching more users raises throughput at little cost to each."
	if mem == nil {
		fd.Next += " Confirm with the GPUs' memory-bandwidth counters (telemetry.gpu: a DCGM exporter's DCGM_FI_DEV_MEM_COPY_UTIL)."
	}
	return fd, true
}

// nonMemory: TPOT far above its bandwidth bound, so something else sets
// the pace; the GPUs' utilization tells host overhead from compute.
func nonMemory(f *rowFacts) (Finding, bool) {
	p := f.pred
	tpot := f.rs.Metrics.TPOT
	if p == nil || p.Regime != PredictedOverhead || p.TPOTRatio < farAbove || tpot.Count == 0 {
		return Finding{}, false
	}
	overSLO := f.slo.TPOTms > 0 && tpot.P95 > f.slo.TPOTms
	var util, mem *metrics.Gauge
	if f.gpu != nil {
		util, mem = f.gpu.Utilization, f.gpu.MemCopyUtilization
	}
	if !f.Failed && !overSLO && util == nil {
		return Finding{}, false
	}
	fd := Finding{Rule: ruleNonMemory, Regime: RegimeNonMemory, Severity: SeverityInfo,
		Symptom:  fmt.Sprintf("TPOT p50 %s is %s× the bandwidth bound: memory bandwidth does not set the pace", ms(tpot.P50), ratio(p.TPOTRatio)),
		Evidence: []string{fmt.Sprintf("TPOT p50 %s is %s× the bandwidth bound of %s", ms(tpot.P50), ratio(p.TPOTRatio), ms(p.TPOTBoundMS))}}
	if overSLO {
		fd.Symptom += fmt.Sprintf("; TPOT p95 %s misses the SLO of %s", ms(tpot.P95), ms(f.slo.TPOTms))
	}
	if util != nil {
		fd.Evidence = append(fd.Evidence, fmt.Sprintf("`gpu.utilization` mean %s", pct(util.Mean)))
	}
	if mem != nil {
		fd.Evidence = append(fd.Evidence, fmt.Sprintf("`gpu.mem_copy_utilization` mean %s", pct(mem.Mean)))
	}
	switch {
	case util == nil:
		fd.Next = "Measure the GPUs next (telemetry.gpu, a DCGM exporter): utilization, memory-bandwidth counters and SM clocks tell host overhead from compute from throttling."
	case util.Mean < gpuIdle:
		fd.Regime = RegimeNonMemory + " (host or scheduling)"
		fd.Next = "The GPUs wait on the host between steps: the scheduler, sampling, the API server, or batches too small to fill a step. Profile the server's CPU, use CUDA graphs, and check the API server process."
	case util.Mean >= gpuBusy && mem != nil && mem.Mean < memIdle:
		fd.Regime = RegimeNonMemory + " (compute)"
		fd.Next = "Kernels run nearly always but do not stream memory: compute sets the pace (large batches, long-context attention) or a slow kernel does. Check the attention backend and the SM clocks; more GPUs (tensor parallelism) cut the work per GPU."
	default:
		fd.Next = "Neither the host nor memory plainly sets the pace: check the SM clocks for throttling and the batch the server ran (server.num_requests_running), and profile a step."
	}
	return fd, true
}

// clocks: the SM clock dropped while the GPUs were busy.
func clocks(f *rowFacts) (Finding, bool) {
	g := f.gpu
	if g == nil || g.SMClockMHz == nil || g.Utilization == nil || g.SMClockMHz.Max <= 0 {
		return Finding{}, false
	}
	c := g.SMClockMHz
	if g.Utilization.Mean < gpuIdle || c.Min >= clockDrop*c.Max {
		return Finding{}, false
	}
	fd := Finding{Rule: ruleClocks, Regime: RegimeNonMemory + " (clocks)", Severity: SeverityWarn,
		Symptom: fmt.Sprintf("the GPUs' SM clock fell to %s MHz from %s MHz while they were busy", count(math.Round(c.Min)), count(math.Round(c.Max))),
		Evidence: []string{fmt.Sprintf("`gpu.sm_clock_mhz` min %s, mean %s, max %s", count(math.Round(c.Min)), count(math.Round(c.Mean)), count(math.Round(c.Max))),
			fmt.Sprintf("`gpu.utilization` mean %s", pct(g.Utilization.Mean))}}
	if t := g.TemperatureC; t != nil {
		fd.Evidence = append(fd.Evidence, fmt.Sprintf("`gpu.temperature_c` max %s °C", sig(t.Max)))
	}
	if pw := g.PowerW; pw != nil {
		fd.Evidence = append(fd.Evidence, fmt.Sprintf("`gpu.power_w` mean %s W, max %s W", sig(pw.Mean), sig(pw.Max)))
	}
	fd.Next = "The GPUs throttled: check the power cap and cooling (DCGM_FI_DEV_CLOCK_THROTTLE_REASONS says which), and rerun once they hold their clocks; figures measured while throttled do not transfer."
	return fd, true
}

// batching: in a concurrency sweep, a step up that slows every user's
// decode for little throughput, while the server batched the requests
// rather than queueing them. Stated at the first such step.
func batching(f *rowFacts) (Finding, bool) {
	sib := f.siblings("concurrency")
	k := -1
	for i, r := range sib {
		if r.Plan.ID == f.id {
			k = i
		}
	}
	if k < 1 {
		return Finding{}, false
	}
	for j := 1; j < k; j++ {
		if _, ok := batchStep(sib[j-1], sib[j]); ok {
			return Finding{}, false // an earlier step is the one to name
		}
	}
	ev, ok := batchStep(sib[k-1], sib[k])
	if !ok {
		return Finding{}, false
	}
	return Finding{Rule: ruleBatching, Regime: RegimeBatching, Severity: SeverityInfo, Evidence: ev,
		Symptom: fmt.Sprintf("from `%s` on, more users buy little throughput and cost every user decode speed", sib[k-1].Plan.ID),
		Next:    "Past this point each added user slows every user's decode for little throughput: choose the operating point by the TPOT target, or add replicas for more throughput."}, true
}

// batchStep is the evidence of the batching trade-off between two points
// of a concurrency sweep, and whether it holds.
func batchStep(a, b Row) ([]string, bool) {
	sa, sb := a.Summary, b.Summary
	ca, cb := a.Plan.SweepPoint["concurrency"], b.Plan.SweepPoint["concurrency"]
	ta, tb := sa.Metrics.TPOT, sb.Metrics.TPOT
	xa, xb := sa.Throughput.OutputTokensPerS, sb.Throughput.OutputTokensPerS
	run := sb.Server
	if run == nil || run.NumRequestsRunning == nil || ta.Count == 0 || tb.Count == 0 || ta.P50 <= 0 || xa <= 0 || cb <= ca {
		return nil, false
	}
	rise, gain, step := tb.P50/ta.P50-1, xb/xa-1, cb/ca-1
	if rise < tpotRise || gain >= flatGain*step || run.NumRequestsRunning.Mean < batchedShare*cb {
		return nil, false
	}
	if w := run.NumRequestsWaiting; w != nil && w.Mean >= waitingMean {
		return nil, false // queued as well: the queueing rule speaks
	}
	return []string{
		fmt.Sprintf("from `%s` to `%s` (concurrency %s → %s): TPOT p50 %s → %s (+%s)", a.Plan.ID, b.Plan.ID, count(ca), count(cb), ms(ta.P50), ms(tb.P50), pct(rise)),
		fmt.Sprintf("output throughput %s → %s tok/s (%+.0f%% for +%s load)", sig(xa), sig(xb), 100*gain, pct(step)),
		fmt.Sprintf("`server.num_requests_running` mean %s of %s: the requests were batched, not queued", level(run.NumRequestsRunning.Mean), count(cb)),
	}, true
}

// cacheMiss: a row that declares a shared prefix found far less of it in
// the prefix cache than the prefix gives.
func cacheMiss(f *rowFacts) (Finding, bool) {
	pf := f.Plan.Prefix
	if pf == nil || pf.Length <= 0 {
		return Finding{}, false
	}
	in := float64(f.Plan.Input.Mean)
	if m := f.rs.Metrics.InputTokens; m.Count > 0 {
		in = m.Mean
	}
	if in <= 0 {
		return Finding{}, false
	}
	expected := math.Min(1, float64(pf.Length)/in)
	how := "warm"
	if !pf.Warm {
		// The first request of each distinct prefix misses.
		how = "shared"
		expected *= math.Max(0, 1-float64(pf.Distinct)/float64(f.rs.Requests.Completed))
	}
	if expected < minExpected {
		return Finding{}, false
	}
	var ev []string
	missed := false
	s := f.srv
	if s != nil && s.PrefixCacheHitRate != nil && s.PrefixCacheQueries != nil && *s.PrefixCacheQueries > 0 {
		r := *s.PrefixCacheHitRate
		missed = r < missShare*expected
		ev = append(ev, fmt.Sprintf("`server.prefix_cache_hit_rate` %s of %s prompt tokens looked up", pct(r), count(*s.PrefixCacheQueries)))
	} else if c := f.rs.Cache; c.Known() {
		missed = c.HitRatio < missShare*expected
		ev = append(ev, fmt.Sprintf("`cache.hit_ratio` %s over %d requests", pct(c.HitRatio), c.Requests))
	}
	if !missed {
		return Finding{}, false
	}
	ev = append(ev, fmt.Sprintf("the %s prefix of %s tokens in %s would give about %s", how, count(float64(pf.Length)), count(math.Round(in)), pct(expected)))
	if s != nil && s.Preemptions != nil && *s.Preemptions > 0 {
		ev = append(ev, fmt.Sprintf("`server.preemptions` %s: preempted sequences free their blocks, cached prefixes with them", count(*s.Preemptions)))
	} else if s != nil && s.KVCacheUsage != nil && s.KVCacheUsage.Max >= kvFull {
		ev = append(ev, fmt.Sprintf("`server.kv_cache_usage` max %s: a full cache evicts cached prefixes", pct(s.KVCacheUsage.Max)))
	}
	return Finding{Rule: ruleCacheMiss, Regime: RegimeCacheMiss, Severity: SeverityWarn, Evidence: ev,
		Symptom: fmt.Sprintf("the %s prefix mostly missed the prefix cache: TTFT pays for prefill it should have skipped", how),
		Next:    fmt.Sprintf("Check that prefix caching is on (vLLM --enable-prefix-caching; SGLang's radix cache), that the prefix is the same tokens in every request (chat template, tokenizer) and at least a block long, and that the cache holds %d distinct prefixes beside the running sequences.", pf.Distinct)}, true
}

// contamination: a row meant to be cold that found its prompts cached,
// measuring a cache it, another row or another run filled.
func contamination(f *rowFacts) (Finding, bool) {
	pl := f.Plan
	if pl.Prefix != nil || pl.UniquePrompts == schema.UniqueOff {
		return Finding{}, false
	}
	var ev []string
	if c := f.rs.Cache; c.Known() && c.UnexpectedRatio > contaminatedClient {
		ev = append(ev, fmt.Sprintf("`cache.unexpected_ratio` %s: prompt tokens served from the cache beyond what the row shares on purpose, over %d requests", pct(c.UnexpectedRatio), c.Requests))
	} else if !c.Known() && pl.Dataset == nil && pl.Trace == nil {
		s := f.srv
		if s != nil && s.PrefixCacheHitRate != nil && s.PrefixCacheQueries != nil && *s.PrefixCacheQueries > 0 && *s.PrefixCacheHitRate > contaminatedServer {
			ev = append(ev, fmt.Sprintf("`server.prefix_cache_hit_rate` %s of %s prompt tokens looked up, on prompts meant to be unique", pct(*s.PrefixCacheHitRate), count(*s.PrefixCacheQueries)))
		}
	}
	if len(ev) == 0 {
		return Finding{}, false
	}
	return Finding{Rule: ruleContamination, Regime: RegimeContamination, Severity: SeverityWarn, Evidence: ev,
		Symptom: "a row meant to be cold found its prompts in the prefix cache: it measured a warm cache it did not ask for",
		Next:    "Keep prompts unique (unique_prompts: per_run), reset the server's prefix cache between runs (vLLM: POST /reset_prefix_cache), and make sure no other client shares the server; or declare the shared part as a prefix."}, true
}

// outsideEngine: the client's TTFT or TPOT well above the server's own,
// time spent between them.
func outsideEngine(f *rowFacts) (Finding, bool) {
	s := f.srv
	if s == nil {
		return Finding{}, false
	}
	// The server's quantiles are interpolated within its histogram's
	// buckets, which can be 150 ms wide where TTFT lies; its mean is
	// exact (sum ÷ count). A gap must show in both to be the network's
	// rather than the buckets'.
	wide := func(g *metrics.Gap, c metrics.Dist, floor float64) bool {
		return g != nil && c.Count > 0 && g.P50 > math.Max(floor, gapShare*c.P50) && g.Mean > math.Max(floor, gapShare*c.Mean)
	}
	var ev, what []string
	if g, c := s.TTFTGap, f.rs.Metrics.TTFT; wide(g, c, ttftGapFloorMS) {
		what = append(what, "TTFT")
		ev = append(ev, fmt.Sprintf("`server.ttft_gap` mean %s, p50 %s: the client's TTFT mean %s, p50 %s against the server's %s", ms(g.Mean), ms(g.P50), ms(c.Mean), ms(c.P50), serverFigures(s.TTFT)))
	}
	if g, c := s.TPOTGap, f.rs.Metrics.TPOT; wide(g, c, tpotGapFloorMS) {
		what = append(what, "TPOT")
		ev = append(ev, fmt.Sprintf("`server.tpot_gap` mean %s, p50 %s: the client's TPOT mean %s, p50 %s against the server's %s", ms(g.Mean), ms(g.P50), ms(c.Mean), ms(c.P50), serverFigures(s.TPOT)))
	}
	if len(ev) == 0 {
		return Finding{}, false
	}
	if sc := f.rs.SelfCheck; sc.ClientBound {
		ev = append(ev, "the client self-check flags the client as the limit")
	}
	return Finding{Rule: ruleGap, Regime: RegimeOutside, Severity: SeverityWarn, Evidence: ev,
		Symptom: "the client's " + strings.Join(what, " and ") + " exceed the server's own: time is spent outside the engine",
		Next:    "Find the time between engine and client: the network, a proxy or load balancer, the API server's tokenization and detokenization, or the client itself (see the client self-check). Measure from a client next to the server to split them."}, true
}

func serverFigures(d *metrics.ServerDist) string {
	if d == nil {
		return "(not published)"
	}
	return ms(d.Mean) + ", " + ms(d.P50)
}

// counters: the server's token counters disagree with the records.
func counters(f *rowFacts) (Finding, bool) {
	s := f.srv
	if s == nil || s.Tokens == nil || !s.Tokens.Mismatch {
		return Finding{}, false
	}
	var ev []string
	for _, c := range []struct {
		name string
		d    metrics.CounterDiff
	}{{"prompt", s.Tokens.Prompt}, {"generation", s.Tokens.Generation}} {
		if c.d.Compared {
			ev = append(ev, fmt.Sprintf("%s tokens: server %s, records %s (%+.1f%%)", c.name, count(c.d.Server), count(c.d.Records), 100*c.d.Diff))
		}
	}
	if len(ev) == 0 {
		return Finding{}, false
	}
	return Finding{Rule: ruleCounters, Regime: RegimeCounters, Severity: SeverityWarn, Evidence: ev,
		Symptom: "the server's token counters disagree with the records: requests counted twice or lost, or load the run did not send",
		Next:    "The counters count the whole server: run on a server nothing else uses, and compare the rows' requests.jsonl usage with the server's logs."}, true
}
