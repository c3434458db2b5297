// Package stats holds the statistics infermatrix judges runs with:
// percentiles, confidence intervals for a mean (Student's t) and for a
// percentile (bootstrap), the change of a statistic between two samples with
// its interval and p-value, and the Mann–Whitney test. It imports nothing of
// infermatrix's own, so every package that needs a number can use it.
// Methods, assumptions and measured false-alarm rates: docs/statistics.md.
//
// Samples must not hold NaN: a NaN sorts first and would be taken for the
// smallest value. Callers drop failed requests before they get here.
package stats

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// DefaultLevel is the confidence level a Level of 0 stands for. 0.95 is what
// AIPerf reports and what most readers assume when a level is not named.
const DefaultLevel = 0.95

// Interval is a two-sided confidence interval at Level (e.g. 0.95). An
// interval that cannot be computed (no samples, a level outside (0, 1)) has
// NaN bounds, so it contains nothing and no rule passes on it by accident.
type Interval struct{ Lower, Upper, Level float64 }

// Contains reports whether v lies within the interval, bounds included.
func (iv Interval) Contains(v float64) bool { return iv.Lower <= v && v <= iv.Upper }

// Width is Upper − Lower.
func (iv Interval) Width() float64 { return iv.Upper - iv.Lower }

func nanInterval(level float64) Interval {
	return Interval{Lower: math.NaN(), Upper: math.NaN(), Level: level}
}

// levelOf resolves a requested level: 0 means DefaultLevel; anything outside
// (0, 1) is not a level, and ok is false.
func levelOf(level float64) (lv float64, ok bool) {
	if level == 0 {
		return DefaultLevel, true
	}
	return level, level > 0 && level < 1
}

// Percentile is numpy.percentile(sorted, q) with the default linear method
// (Hyndman and Fan type 7): linear interpolation between the closest ranks,
// h = (n−1)·q/100. sorted must be in ascending order and q in [0, 100]. The
// same choice as vLLM's and AIPerf's benchmarks, so the figures agree with
// theirs on the same samples. An empty sample gives NaN.
func Percentile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	if n == 1 {
		return sorted[0]
	}
	h := (float64(n) - 1) * q / 100
	lo := math.Floor(h)
	i := int(lo)
	if i >= n-1 {
		return sorted[n-1]
	}
	return sorted[i] + (h-lo)*(sorted[i+1]-sorted[i])
}

// Mean is the arithmetic mean; NaN for an empty sample.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var sum float64
	for _, v := range xs {
		sum += v
	}
	return sum / float64(len(xs))
}

// TInterval is Student's t interval for the mean of xs:
// mean ± t_{(1+level)/2, n−1} · s/√n, with s the sample standard deviation
// (n−1 in the denominator). It assumes the values are independent and their
// mean close to normal, which holds for the means of repeated trials, the use
// it is made for. With n < 2 there is no spread to measure, and the interval
// is the value itself (Lower = Upper); with no values it is NaN. level 0
// means DefaultLevel.
func TInterval(xs []float64, level float64) Interval {
	lv, ok := levelOf(level)
	if !ok || len(xs) == 0 {
		return nanInterval(lv)
	}
	m := Mean(xs)
	n := len(xs)
	if n < 2 {
		return Interval{Lower: m, Upper: m, Level: lv}
	}
	var ss float64
	for _, v := range xs {
		d := v - m
		ss += d * d
	}
	s := math.Sqrt(ss / float64(n-1))
	half := TQuantile((1+lv)/2, n-1) * s / math.Sqrt(float64(n))
	return Interval{Lower: m - half, Upper: m + half, Level: lv}
}

// TQuantile is the p-quantile of Student's t distribution with df degrees of
// freedom (gonum's inverse regularized incomplete beta function underneath).
func TQuantile(p float64, df int) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(df)}.Quantile(p)
}
