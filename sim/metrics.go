package sim

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// metrics are the server-side counters a benchmark scrapes to cross-check
// its own client-side measurements. They are atomics and lock-free
// histograms, not a lock, because they are updated once per event on the hot
// path.
type metrics struct {
	running          atomic.Int64  // requests admitted and not yet finished
	promptTokens     atomic.Uint64 // prompt tokens of requests whose prefill finished
	generationTokens atomic.Uint64 // output tokens emitted
	successLength    atomic.Uint64 // requests that ran to max_tokens
	successStop      atomic.Uint64 // requests that stopped at a seeded EOS
	faults           [len(faultKinds)]atomic.Uint64

	// The request-level histograms vLLM exposes, measured in the handler
	// when the bytes are flushed, from the request's arrival.
	ttft, itl, e2e *histogram
	// tpot is per request, (last − first token) ÷ (tokens − 1): the
	// figure a client's TPOT compares with.
	tpot *histogram
	// flushLateness is the simulator's own: how late each token's flush
	// returned against the time the model scheduled the token.
	flushLateness *histogram
	// queue is vLLM's queue time: from a request's arrival at the engine
	// to its first scheduling, observed when the request finishes (an
	// engine model only).
	queue *histogram
}

// Bucket bounds in seconds, as vLLM's PrometheusStatLogger
// (vllm/v1/metrics/loggers.py) declares them, so that quantiles computed
// from the simulator's histograms are comparable with a real server's.
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
		1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	e2eBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
		40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	// vLLM's request_queue_time_seconds shares e2e's bounds
	// (request_latency_buckets). Flush lateness is a matter of microseconds on a healthy host; the
	// fine low buckets resolve a sub-millisecond p99 target.
	latenessBuckets = []float64{10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6,
		1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3}
)

func newMetrics() metrics {
	return metrics{
		ttft:          newHistogram(ttftBuckets...),
		itl:           newHistogram(itlBuckets...),
		e2e:           newHistogram(e2eBuckets...),
		tpot:          newHistogram(itlBuckets...),
		flushLateness: newHistogram(latenessBuckets...),
		queue:         newHistogram(e2eBuckets...),
	}
}

// FlushLateness reports how many token flushes the server has timed and the
// median and 99th percentile of their lateness: the time from when the
// timing model scheduled a token to when the write and flush carrying it
// returned. Streamed tokens only; tokens an injected stall or slow_headers
// held back are left out.
//
// The percentiles come from the flush-lateness histogram, so each is the
// upper bound of the bucket holding it (10µs, 25µs, 50µs, 100µs, 250µs,
// 500µs, 1ms, ...), or the largest lateness seen when that is smaller: a
// reported p99 of 500µs means at least 99% of flushes were at most 500µs
// late. The counts are cumulative since the server started; LatenessSnapshot
// reads the lateness of an interval.
func (s *Server) FlushLateness() (count uint64, p50, p99 time.Duration) {
	_, count, _ = s.metrics.flushLateness.snapshot()
	return count, s.metrics.flushLateness.quantile(0.50), s.metrics.flushLateness.quantile(0.99)
}

// LatenessSnapshot is a reading of the server's flush-lateness histogram,
// the one FlushLateness reads, so that a caller can learn the lateness of
// the flushes of an interval alone: take a reading before a benchmark row
// and one after, and after.Since(before) reports the row's flushes. The
// zero value is a reading taken before the first flush, so
// s.LatenessSnapshot().Since(LatenessSnapshot{}) reports every flush so far.
//
// A stream merges its observations into the histogram in batches (at most
// 64 at a time, and when it ends), so a reading taken while streams run
// lags them by the unmerged part; a reading taken when no stream is running,
// as between two rows, counts every flush before it.
type LatenessSnapshot struct {
	bounds  []time.Duration // the histogram's bucket upper bounds; shared, never written
	counts  []uint64        // per bucket, not cumulative; the last is +Inf
	largest time.Duration   // the largest lateness observed before the reading
}

// LatenessSnapshot returns a reading of the flush-lateness histogram now.
func (s *Server) LatenessSnapshot() LatenessSnapshot {
	h := s.metrics.flushLateness
	// The counts before the largest value, which every observation
	// raises before it is counted: no counted flush exceeds largest.
	counts, _, _ := h.snapshot()
	return LatenessSnapshot{bounds: h.bounds, counts: counts, largest: time.Duration(h.maxNs.Load())}
}

// Since reports the flushes that a counts and b, an earlier reading of the
// same server, does not: how many, and the median, 99th percentile and
// largest of their lateness. It returns zeros when there are none.
//
// The percentiles are upper bounds as FlushLateness reports them: the upper
// bound of the bucket holding the percentile (10µs, 25µs, 50µs, 100µs,
// 250µs, 500µs, 1ms, 2.5ms, 5ms, 10ms, 25ms, 50ms, 100ms), or largest when
// that is smaller. A histogram does not keep each interval's largest value:
// largest is exact when the interval raised the server's all-time largest
// lateness, and otherwise the smaller of that all-time value and the upper
// bound of the highest bucket the interval reached, an upper bound on it.
func (a LatenessSnapshot) Since(b LatenessSnapshot) (count uint64, p50, p99, largest time.Duration) {
	diff := make([]uint64, len(a.counts))
	top := -1 // the highest bucket the interval reached
	for i, c := range a.counts {
		var before uint64
		if i < len(b.counts) {
			before = b.counts[i]
		}
		if c > before { // a reading out of order counts nothing
			diff[i] = c - before
			count += diff[i]
			top = i
		}
	}
	if count == 0 {
		return 0, 0, 0, 0
	}
	largest = a.largest
	if a.largest <= b.largest && top < len(a.bounds) {
		largest = min(largest, a.bounds[top])
	}
	p50 = bucketQuantile(a.bounds, diff, count, largest, 0.50)
	p99 = bucketQuantile(a.bounds, diff, count, largest, 0.99)
	return count, p50, p99, largest
}

// serveMetrics writes the Prometheus text exposition format 0.0.4 with
// vLLM's metric names and model_name label, so that tooling pointed at a
// vLLM server reads the simulator unchanged. The simulator's own metrics are
// prefixed infermatrix_sim:.
func (s *Server) serveMetrics(w http.ResponseWriter) {
	model := `model_name="` + escapeLabel(s.cfg.Model) + `"`
	st := s.timing.stats()
	m := &s.metrics
	b := make([]byte, 0, 16<<10)
	gauge := func(name, help string, v float64) {
		b = appendMeta(b, name, "gauge", help)
		b = appendSample(b, name, model, v)
	}
	counter := func(name, help string, v uint64) {
		b = appendMeta(b, name, "counter", help)
		b = appendSample(b, name, model, float64(v))
	}

	// The fixed model has no scheduler: every admitted request is
	// running, and the handlers count them. An engine model knows its
	// batch and its queue.
	running := float64(m.running.Load())
	if _, fixed := s.timing.(constantTiming); !fixed {
		running = float64(st.running)
	}
	gauge("vllm:num_requests_running", "Number of requests in model execution batches.", running)
	gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", float64(st.waiting))
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", st.kvUsage)
	counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", st.prefixQueries)
	counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", st.prefixHits)
	counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", st.preemptions)
	counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", m.promptTokens.Load())
	counter("vllm:generation_tokens_total", "Number of generation tokens processed.", m.generationTokens.Load())

	b = appendMeta(b, "vllm:request_success_total", "counter", "Count of successfully processed requests.")
	b = appendSample(b, "vllm:request_success_total", model+`,finished_reason="stop"`, float64(m.successStop.Load()))
	b = appendSample(b, "vllm:request_success_total", model+`,finished_reason="length"`, float64(m.successLength.Load()))

	b = appendHistogram(b, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", model, m.ttft)
	b = appendHistogram(b, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", model, m.itl)
	b = appendHistogram(b, "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", model, m.e2e)
	b = appendHistogram(b, "vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", model, m.tpot)
	if st.queueTimeSupported {
		b = appendHistogram(b, "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", model, m.queue)
	}

	b = appendHistogram(b, "infermatrix_sim:flush_lateness_seconds",
		"Host-side lateness of each token flush against the time the model scheduled it.", model, m.flushLateness)
	b = appendMeta(b, "infermatrix_sim:faults_injected_total", "counter", "Faults injected, by kind.")
	for i, k := range faultKinds {
		b = appendSample(b, "infermatrix_sim:faults_injected_total", model+`,kind="`+string(k)+`"`, float64(m.faults[i].Load()))
	}
	if st.stepLatenessSupported {
		b = appendStepLateness(b, model, st.stepLateness)
	}
	// The simulated GPUs, as a DCGM exporter on the same endpoint would
	// serve them.
	b = appendDCGM(b, st.gpus)

	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// appendStepLateness writes the engine's recent step lateness as a summary
// of quantiles. The samples are a recent window, not a cumulative series, so
// the summary has no _count or _sum, which would have to be monotonic.
func appendStepLateness(b []byte, labels string, samples []float64) []byte {
	const name = "infermatrix_sim:step_lateness_seconds"
	b = appendMeta(b, name, "summary", "Lateness of the engine's recent steps against their deadlines.")
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	for _, q := range []struct {
		label string
		q     float64
	}{{"0.5", 0.5}, {"0.9", 0.9}, {"0.99", 0.99}} {
		b = appendSample(b, name, labels+`,quantile="`+q.label+`"`, nearestRank(sorted, q.q))
	}
	return b
}

// nearestRank returns the q-quantile of sorted by the nearest-rank method,
// or NaN when there are no samples, as Prometheus summaries report.
func nearestRank(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(float64(len(sorted))*q+0.999999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// appendMeta writes a metric family's HELP and TYPE lines.
func appendMeta(b []byte, name, kind, help string) []byte {
	b = append(b, "# HELP "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, help...)
	b = append(b, "\n# TYPE "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, kind...)
	return append(b, '\n')
}

// appendSample writes one sample line.
func appendSample(b []byte, name, labels string, v float64) []byte {
	b = append(b, name...)
	b = append(b, '{')
	b = append(b, labels...)
	b = append(b, "} "...)
	b = appendPromFloat(b, v)
	return append(b, '\n')
}

// appendPromFloat writes v as Python's prometheus_client does ("3.0"), so
// that the exposition matches vLLM's byte for byte where it can.
func appendPromFloat(b []byte, v float64) []byte {
	start := len(b)
	b = strconv.AppendFloat(b, v, 'f', -1, 64)
	if !strings.ContainsAny(string(b[start:]), ".eEnN") {
		b = append(b, ".0"...)
	}
	return b
}

// escapeLabel escapes a label value for the text exposition format.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
