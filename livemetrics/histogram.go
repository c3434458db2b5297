package livemetrics

import (
	"slices"
	"sync/atomic"
	"time"
)

// The buckets are upper bounds in seconds, on a 1-1.5-2-3-5-7.5 ladder
// (each bound at most 1.67 times the last) through the range where LLM
// serving objectives sit, so that histogram_quantile, which interpolates
// linearly inside a bucket, is off by well under a bucket's width there:
// a p99 TTFT of 180 ms reads between 150 and 200 ms, not "somewhere below
// 250". Fewer, coarser buckets beyond, where only an outage lands.
var (
	// TTFTBuckets span a small model's first token (a few ms) to a
	// prefill queued behind a saturated server (a minute).
	TTFTBuckets = []float64{.005, .01, .015, .02, .03, .05, .075, .1, .15, .2, .3, .5, .75, 1, 1.5, 2, 3, 5, 7.5, 10, 15, 20, 30, 60}
	// ITLBuckets span a fast decode step (1 ms) to a stall (10 s);
	// batched servers (TGI) put zero gaps in the first bucket.
	ITLBuckets = []float64{.001, .002, .003, .005, .0075, .01, .015, .02, .025, .03, .04, .05, .075, .1, .15, .2, .3, .5, 1, 2.5, 10}
	// LagBuckets span a healthy dispatcher (tens of µs behind its
	// schedule) to one that has fallen seconds behind: the client, not
	// the server, is then the bottleneck.
	LagBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
)

// histogram is a cumulative-on-read histogram of durations: one atomic
// add per observation to its bucket and one to the sum.
type histogram struct {
	bounds  []float64 // seconds, ascending
	boundNS []int64   // the same in nanoseconds
	counts  []atomic.Uint64
	sumNS   atomic.Int64
}

func newHistogram(bounds []float64) *histogram {
	h := &histogram{bounds: bounds, boundNS: make([]int64, len(bounds)), counts: make([]atomic.Uint64, len(bounds)+1)}
	for i, b := range bounds {
		h.boundNS[i] = int64(b * float64(time.Second))
	}
	return h
}

// observe adds one duration in nanoseconds. A bucket holds values up to
// and including its bound, as Prometheus' le says.
func (h *histogram) observe(ns int64) {
	i, _ := slices.BinarySearch(h.boundNS, ns)
	h.counts[i].Add(1)
	h.sumNS.Add(ns)
}

// observeGaps adds the gaps between consecutive event times.
func (h *histogram) observeGaps(events []int64) {
	if len(events) < 2 {
		return
	}
	var sum int64
	for i := 1; i < len(events); i++ {
		g := events[i] - events[i-1]
		j, _ := slices.BinarySearch(h.boundNS, g)
		h.counts[j].Add(1)
		sum += g
	}
	h.sumNS.Add(sum)
}

// read returns the cumulative bucket counts, the count and the sum in
// seconds. The count is the last bucket's, so that a scrape always
// satisfies count == the +Inf bucket even while observations land.
func (h *histogram) read() (cum []uint64, count uint64, sum float64) {
	cum = make([]uint64, len(h.bounds))
	var n uint64
	for i := range h.bounds {
		n += h.counts[i].Load()
		cum[i] = n
	}
	n += h.counts[len(h.bounds)].Load()
	return cum, n, time.Duration(h.sumNS.Load()).Seconds()
}
