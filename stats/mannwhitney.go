package stats

import (
	"math"
	"slices"
)

// MannWhitney is the two-sided Mann–Whitney U test (Wilcoxon rank-sum) of
// whether values of a tend to be larger or smaller than values of b, over
// whole distributions rather than one percentile. u is U for a: the number
// of pairs (x from a, y from b) with x > y, ties counting one half, computed
// from mid-ranks. p uses the normal approximation with the tie correction to
// the variance and a continuity correction of ½, as scipy.stats.mannwhitneyu
// does with method="asymptotic" (and by default above 8 values a side). The
// approximation is good from about 20 values a side; below that p is
// approximate. An empty side gives NaN; every value tied gives p = 1.
func MannWhitney(a, b []float64) (u, p float64) {
	n1, n2 := len(a), len(b)
	if n1 == 0 || n2 == 0 {
		return math.NaN(), math.NaN()
	}
	type obs struct {
		v     float64
		fromA bool
	}
	all := make([]obs, 0, n1+n2)
	for _, v := range a {
		all = append(all, obs{v, true})
	}
	for _, v := range b {
		all = append(all, obs{v, false})
	}
	slices.SortFunc(all, func(x, y obs) int {
		switch {
		case x.v < y.v:
			return -1
		case x.v > y.v:
			return 1
		}
		return 0
	})
	n := float64(n1 + n2)
	var rankSumA, tieTerm float64
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		// Positions i..j-1 hold one value: each gets the mid-rank of
		// ranks i+1..j.
		mid := float64(i+1+j) / 2
		for k := i; k < j; k++ {
			if all[k].fromA {
				rankSumA += mid
			}
		}
		t := float64(j - i)
		tieTerm += t*t*t - t
		i = j
	}
	f1, f2 := float64(n1), float64(n2)
	u = rankSumA - f1*(f1+1)/2
	mu := f1 * f2 / 2
	sigma := math.Sqrt(f1 * f2 / 12 * ((n + 1) - tieTerm/(n*(n-1))))
	if sigma == 0 || math.IsNaN(sigma) {
		return u, 1
	}
	z := (math.Abs(u-mu) - 0.5) / sigma
	p = min(1, math.Erfc(z/math.Sqrt2))
	return u, p
}
