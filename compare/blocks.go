package compare

import (
	"math"
	"sort"

	"github.com/infermatrix/infermatrix/metrics"
)

// minBlocks is the fewest blocks a side needs for its percentile to be
// judged: with fewer, the resamples are too few distinct combinations to
// draw an interval from.
const minBlocks = 5

// request is one successful measured request's latencies.
type request struct {
	part             int   // which trial's records (0 without trials)
	seq              int64 // dispatch order within its trial
	ttft, tpot, e2e  float64
	hasTTFT, hasTPOT bool
	itl              []float64
}

func newRequest(sem, api string, part int, r *metrics.Record) request {
	q := request{part: part, seq: r.Seq, itl: metrics.ITLSamples(sem, api, r)}
	q.ttft, q.tpot, q.e2e, q.hasTTFT, q.hasTPOT = metrics.RequestValues(sem, api, r)
	return q
}

// blocks holds each latency's values cut into blocks of size consecutive
// requests (by dispatch order).
//
// Requests of one row are not independent draws. Under closed-loop load
// the users fall into step: requests dispatched together share their
// batch, their prefill's neighbours and their stalls, and the pattern
// drifts slowly over the run (a TTFT of 13 ms for one cohort of eight, 33
// ms for the next). Resampling requests one by one takes that pattern for
// a precise fact about the server, and two runs of the same experiment
// then differ "significantly". Resampling blocks of consecutive requests
// (Künsch's block bootstrap, non-overlapping blocks) keeps each block's
// dependence inside it, so the interval carries the run's own drift.
type blocks struct {
	size                 int
	ttft, tpot, e2e, itl [][]float64
}

func (b blocks) of(family string) [][]float64 {
	switch family {
	case "ttft":
		return b.ttft
	case "tpot":
		return b.tpot
	case "e2e":
		return b.e2e
	}
	return b.itl
}

// blockSize is the block length for n requests with inFlight requests in
// flight on average: a tenth of the row, so that the run's drift over time
// shows between the blocks (the batch-means method of simulation output
// analysis, with ten batches), and no less than twice the requests in
// flight, so that one block spans at least two generations of the same
// users or two overlapping waves of arrivals. Runs of the built-in server
// showed why a tenth and not the textbook n^(1/3): under closed-loop load
// its users stay in step for dozens of requests, and blocks of a few
// requests left two runs of the same experiment "significantly" apart.
func blockSize(n int, inFlight float64) int {
	return max(1, int(math.Ceil(2*inFlight)), int(math.Ceil(float64(n)/10)))
}

// cutBlocks sorts the requests by trial and dispatch order and cuts each
// trial's requests into m ÷ size blocks of nearly equal length (so no
// block is shorter than size, and none spans two trials).
func cutBlocks(reqs []request, inFlight float64) blocks {
	sort.Slice(reqs, func(i, j int) bool {
		if reqs[i].part != reqs[j].part {
			return reqs[i].part < reqs[j].part
		}
		return reqs[i].seq < reqs[j].seq
	})
	size := blockSize(len(reqs), inFlight)
	out := blocks{size: size}
	for start := 0; start < len(reqs); {
		end := start
		for end < len(reqs) && reqs[end].part == reqs[start].part {
			end++
		}
		trial := reqs[start:end]
		k := max(1, len(trial)/size)
		for j := range k {
			out.add(trial[j*len(trial)/k : (j+1)*len(trial)/k])
		}
		start = end
	}
	return out
}

// add appends one block of requests' values to each latency.
func (b *blocks) add(reqs []request) {
	var ttft, tpot, e2e, itl []float64
	for _, q := range reqs {
		if q.hasTTFT {
			ttft = append(ttft, q.ttft)
		}
		if q.hasTPOT {
			tpot = append(tpot, q.tpot)
		}
		e2e = append(e2e, q.e2e)
		itl = append(itl, q.itl...)
	}
	b.ttft = appendNonEmpty(b.ttft, ttft)
	b.tpot = appendNonEmpty(b.tpot, tpot)
	b.e2e = appendNonEmpty(b.e2e, e2e)
	b.itl = appendNonEmpty(b.itl, itl)
}

func appendNonEmpty(b [][]float64, v []float64) [][]float64 {
	if len(v) == 0 {
		return b
	}
	return append(b, v)
}
