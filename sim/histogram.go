package sim

import (
	"math"
	"sync/atomic"
	"time"
)

// histogram is a Prometheus histogram over durations with fixed bucket upper
// bounds. It is lock-free: an observation is a short scan of the bounds and
// three or four atomic adds, cheap enough for the per-token path, where a
// mutex would serialise every stream of the server on one lock.
//
// Counts are kept per bucket, not cumulatively, so that an observation
// touches one bucket; the exposition accumulates them. A scrape that races
// with observations may see a count and a sum that disagree by the
// observations in flight, as Prometheus client libraries allow.
type histogram struct {
	bounds []time.Duration // ascending upper bounds; +Inf is implicit
	le     []string        // bounds as exposition label values ("0.001", "1.0")
	counts []atomic.Uint64 // len(bounds)+1, the last for +Inf
	sumNs  atomic.Int64    // sum of observations, nanoseconds
	maxNs  atomic.Int64    // largest observation, for quantiles past the last bound
}

// newHistogram returns a histogram with the given upper bounds in seconds,
// written as the Python client writes them so that names and label values
// match vLLM's exposition.
func newHistogram(boundsSeconds ...float64) *histogram {
	if len(boundsSeconds)+1 > maxBuckets {
		panic("sim: too many histogram buckets for a histBatch")
	}
	h := &histogram{
		bounds: make([]time.Duration, len(boundsSeconds)),
		le:     make([]string, len(boundsSeconds)),
		counts: make([]atomic.Uint64, len(boundsSeconds)+1),
	}
	for i, s := range boundsSeconds {
		h.bounds[i] = time.Duration(math.Round(s * 1e9))
		h.le[i] = string(appendPromFloat(nil, s))
	}
	return h
}

// observe records one observation of d. Negative values count as zero: a
// clock that reports a token early is not a negative latency.
func (h *histogram) observe(d time.Duration) { h.observeN(d, 1) }

// observeN records n observations of the same value d, as when one event
// flushes several tokens at once.
func (h *histogram) observeN(d time.Duration, n uint64) {
	if n == 0 {
		return
	}
	d = max(d, 0)
	i := 0
	for i < len(h.bounds) && d > h.bounds[i] {
		i++
	}
	// The largest value first, then the count: a reader that loads the
	// counts and then the largest value (snapshot, quantile) never sees
	// an observation counted that exceeds it.
	h.raiseMax(int64(d))
	h.counts[i].Add(n)
	h.sumNs.Add(int64(d) * int64(n))
}

// raiseMax raises the largest observation to d if it is smaller.
func (h *histogram) raiseMax(d int64) {
	for {
		m := h.maxNs.Load()
		if d <= m || h.maxNs.CompareAndSwap(m, d) {
			return
		}
	}
}

// maxBuckets bounds the buckets a histBatch can hold, the +Inf bucket
// included; newHistogram's callers stay below it.
const maxBuckets = 24

// batchSize is how many observations a histBatch holds before it merges
// them: small enough that /metrics lags a running stream by a fraction of a
// second, large enough that the atomics are amortised away.
const batchSize = 64

// histBatch accumulates one request's observations of a histogram, so that
// the per-event path does no atomic operation: shared counters updated by
// every stream on every token would bounce their cache lines between cores
// under load, and slow the very flushes whose lateness they measure. A
// batch is used by one goroutine and merged into the histogram every
// batchSize observations and when the request ends.
type histBatch struct {
	h      *histogram
	counts [maxBuckets]uint64
	sum    int64
	max    int64
	n      uint32 // observations since the last merge
}

// observeN records n observations of d, merging when the batch is full.
func (b *histBatch) observeN(d time.Duration, n uint64) {
	d = max(d, 0)
	i := 0
	for i < len(b.h.bounds) && d > b.h.bounds[i] {
		i++
	}
	b.counts[i] += n
	b.sum += int64(d) * int64(n)
	b.max = max(b.max, int64(d))
	if b.n++; b.n >= batchSize {
		b.flush()
	}
}

// flush merges the batch into its histogram and empties it.
func (b *histBatch) flush() {
	if b.n == 0 {
		return
	}
	b.h.raiseMax(b.max) // before the counts, as in observeN
	for i, c := range b.counts[:len(b.h.counts)] {
		if c != 0 {
			b.h.counts[i].Add(c)
		}
	}
	b.h.sumNs.Add(b.sum)
	h := b.h
	*b = histBatch{h: h}
}

// snapshot returns the per-bucket counts (not cumulative), their total and
// the sum of the observations.
func (h *histogram) snapshot() (counts []uint64, total uint64, sum time.Duration) {
	counts = make([]uint64, len(h.counts))
	for i := range h.counts {
		counts[i] = h.counts[i].Load()
		total += counts[i]
	}
	return counts, total, time.Duration(h.sumNs.Load())
}

// quantile returns an upper bound on the q-quantile (0 < q <= 1) of the
// observations: the upper bound of the bucket holding the observation of
// rank ceil(q*count), or the largest observation when that is smaller (as it
// is when the rank falls in the +Inf bucket). It returns 0 when the
// histogram is empty. A bucket bound is exact enough to check a target that
// is itself a bound, such as "p99 at most 500µs".
func (h *histogram) quantile(q float64) time.Duration {
	counts, total, _ := h.snapshot()
	return bucketQuantile(h.bounds, counts, total, time.Duration(h.maxNs.Load()), q)
}

// bucketQuantile is histogram.quantile over given per-bucket counts (the
// last for +Inf), their total, and largest, an upper bound on every
// observation they count.
func bucketQuantile(bounds []time.Duration, counts []uint64, total uint64, largest time.Duration, q float64) time.Duration {
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	rank = min(max(rank, 1), total)
	var cum uint64
	for i, c := range counts {
		cum += c
		if cum >= rank {
			if i < len(bounds) {
				return min(bounds[i], largest)
			}
			return largest
		}
	}
	return largest
}

// appendHistogram writes h in the text exposition format: HELP and TYPE,
// one cumulative _bucket line per bound and +Inf, then _count and _sum, in
// the Python client's order.
func appendHistogram(b []byte, name, help, labels string, h *histogram) []byte {
	b = appendMeta(b, name, "histogram", help)
	counts, total, sum := h.snapshot()
	var cum uint64
	for i, c := range counts {
		cum += c
		le := "+Inf"
		if i < len(h.le) {
			le = h.le[i]
		}
		b = appendSample(b, name+"_bucket", labels+`,le="`+le+`"`, float64(cum))
	}
	b = appendSample(b, name+"_count", labels, float64(total))
	return appendSample(b, name+"_sum", labels, sum.Seconds())
}
