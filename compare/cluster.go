package compare

import (
	"math"
	"math/rand/v2"
	"sort"

	"github.com/infermatrix/infermatrix/stats"
)

// maxClusterValues bounds the values a clustered bootstrap walks per
// resample. A row of 10,000 requests of 1,000 tokens has ten million token
// gaps; each request keeps an evenly spaced share of its own gaps, so every
// request still weighs in proportion to its length and the resample stays
// a resample of requests, at a cost of about a tenth of a second per row.
const maxClusterValues = 50000

// clustered is a sample of values that come in groups (the token gaps of
// each request), sorted by value, each with the group it belongs to.
type clustered struct {
	vals   []float64
	owner  []int32
	groups int
}

func newClustered(groups [][]float64) clustered {
	total := 0
	for _, g := range groups {
		total += len(g)
	}
	stride := 1
	if total > maxClusterValues {
		stride = int(math.Ceil(float64(total) / maxClusterValues))
	}
	type v struct {
		x float64
		g int32
	}
	all := make([]v, 0, total/stride+len(groups))
	for i, g := range groups {
		for j := 0; j < len(g); j += stride {
			all = append(all, v{g[j], int32(i)})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].x < all[j].x })
	c := clustered{vals: make([]float64, len(all)), owner: make([]int32, len(all)), groups: len(groups)}
	for i, a := range all {
		c.vals[i], c.owner[i] = a.x, a.g
	}
	return c
}

// percentile is the q-th percentile (Hyndman–Fan type 7, as stats and the
// summaries take it) of the sample in which group i appears w[i] times.
func (c clustered) percentile(w []int32, q float64) float64 {
	n := 0
	for _, o := range c.owner {
		n += int(w[o])
	}
	if n == 0 {
		return math.NaN()
	}
	h := float64(n-1) * q / 100
	lo := int(math.Floor(h))
	frac := h - float64(lo)
	seen, at := 0, math.NaN()
	for i, o := range c.owner {
		k := int(w[o])
		if k == 0 {
			continue
		}
		if !math.IsNaN(at) {
			return at + frac*(c.vals[i]-at) // rank lo+1 is the next value
		}
		if seen+k > lo {
			at = c.vals[i]
			if seen+k > lo+1 {
				return at // ranks lo and lo+1 are both this value
			}
		}
		seen += k
	}
	return at
}

// resampleWeights draws groups with replacement: w[i] is how many times
// group i was drawn.
func resampleWeights(rng *rand.Rand, w []int32) {
	clear(w)
	for range w {
		w[rng.IntN(len(w))]++
	}
}

// clusteredChange is stats.PercentileChange for grouped values: each
// resample draws whole requests with replacement, keeping every gap of a
// request drawn. Token gaps of one request share its batch, its position in
// the queue and its stalls; resampling gaps one by one would take them for
// independent draws and give an interval far too narrow (a false alarm
// rate well above the level's). The interval and p-value are read from
// the resampled relative differences as stats reads its own.
func clusteredChange(base, new [][]float64, q, level float64, resamples int, seed uint64) stats.Change {
	cb, cn := newClustered(base), newClustered(new)
	ones := func(n int) []int32 {
		w := make([]int32, n)
		for i := range w {
			w[i] = 1
		}
		return w
	}
	ch := stats.Change{Base: cb.percentile(ones(cb.groups), q), New: cn.percentile(ones(cn.groups), q)}
	nan := stats.Change{Base: ch.Base, New: ch.New, Rel: math.NaN(), P: math.NaN(),
		CI: stats.Interval{Lower: math.NaN(), Upper: math.NaN(), Level: level}}
	if cb.groups < 2 || cn.groups < 2 || math.IsNaN(ch.Base) || math.IsNaN(ch.New) || ch.Base == 0 {
		return nan
	}
	ch.Rel = (ch.New - ch.Base) / ch.Base
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	wb, wn := make([]int32, cb.groups), make([]int32, cn.groups)
	d := make([]float64, resamples)
	for k := range d {
		resampleWeights(rng, wb)
		resampleWeights(rng, wn)
		b, n := cb.percentile(wb, q), cn.percentile(wn, q)
		d[k] = (n - b) / b
	}
	ch.Finish(d, level)
	return ch
}
