package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func TestPercentileMatchesNumpy(t *testing.T) {
	// numpy.percentile([1, 2, 3, 4], q): linear method.
	s := []float64{1, 2, 3, 4}
	for _, c := range []struct{ q, want float64 }{
		{0, 1}, {25, 1.75}, {50, 2.5}, {90, 3.7}, {100, 4},
	} {
		if got := Percentile(s, c.q); !near(got, c.want, 1e-12) {
			t.Errorf("Percentile(%v, %v) = %v, want %v", s, c.q, got, c.want)
		}
	}
	if got := Percentile([]float64{7}, 99); got != 7 {
		t.Errorf("one value: %v", got)
	}
	if got := Percentile(nil, 50); !math.IsNaN(got) {
		t.Errorf("empty sample: %v, want NaN", got)
	}
}

func TestTQuantileMatchesTables(t *testing.T) {
	// Two-sided 95% critical values from any t table.
	for _, c := range []struct {
		df   int
		want float64
	}{{4, 2.776}, {9, 2.262}, {29, 2.045}, {7, 2.365}, {1, 12.706}} {
		if got := TQuantile(0.975, c.df); !near(got, c.want, 0.0006) {
			t.Errorf("t(0.975, %d) = %.4f, want %.3f", c.df, got, c.want)
		}
	}
}

func TestTIntervalByHand(t *testing.T) {
	// mean 5, squared deviations sum to 32, s² = 32/7, s/√8 = √(4/7);
	// t(0.975, 7) = 2.364624 → half-width 1.787488.
	xs := []float64{2, 4, 4, 4, 5, 5, 7, 9}
	iv := TInterval(xs, 0.95)
	if !near(iv.Lower, 5-1.787488, 1e-5) || !near(iv.Upper, 5+1.787488, 1e-5) || iv.Level != 0.95 {
		t.Errorf("TInterval = %+v, want [3.212512, 6.787488] at 0.95", iv)
	}
	if d := TInterval(xs, 0); d != iv {
		t.Errorf("level 0 should mean the default 0.95: %+v vs %+v", d, iv)
	}
	if one := TInterval([]float64{3}, 0.95); one.Lower != 3 || one.Upper != 3 {
		t.Errorf("one value: %+v, want [3, 3]", one)
	}
	for _, bad := range []Interval{TInterval(nil, 0.95), TInterval(xs, 1), TInterval(xs, -0.5)} {
		if !math.IsNaN(bad.Lower) || !math.IsNaN(bad.Upper) || bad.Contains(5) {
			t.Errorf("no interval should be NaN and contain nothing: %+v", bad)
		}
	}
}

// TestTIntervalCoverage draws 400 samples of 10 from a normal distribution
// with mean 100: the 95% interval must contain 100 in 90–99% of them.
func TestTIntervalCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const trials = 400
	hits := 0
	xs := make([]float64, 10)
	for range trials {
		for i := range xs {
			xs[i] = 100 + 15*rng.NormFloat64()
		}
		if TInterval(xs, 0.95).Contains(100) {
			hits++
		}
	}
	c := float64(hits) / trials
	t.Logf("95%% t interval, n=10: coverage %.1f%% of %d", 100*c, trials)
	if c < 0.90 || c > 0.99 {
		t.Errorf("95%% t interval covered the mean in %.1f%% of %d samples", 100*c, trials)
	}
}

// lognormal draws n latencies: median exp(mu), a right tail like TTFT's.
func lognormal(rng *rand.Rand, n int, mu, sigma, scale float64) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = scale * math.Exp(mu+sigma*rng.NormFloat64())
	}
	return xs
}

// TestPercentileIntervalCoverage: 400 samples of 300 log-normal latencies;
// the 95% bootstrap interval of p50 and of p90 must contain the true
// percentile in 90–99% of them.
func TestPercentileIntervalCoverage(t *testing.T) {
	const mu, sigma = 4.0, 0.5
	for _, c := range []struct{ q, z float64 }{{50, 0}, {90, 1.2815515655446004}} {
		truth := math.Exp(mu + sigma*c.z)
		rng := rand.New(rand.NewPCG(3, uint64(c.q)))
		const trials = 400
		hits := 0
		for k := range trials {
			iv := PercentileInterval(lognormal(rng, 300, mu, sigma, 1), c.q, 0.95, Bootstrap{Seed: uint64(k)})
			if iv.Contains(truth) {
				hits++
			}
		}
		cov := float64(hits) / trials
		t.Logf("p%v: 95%% bootstrap interval, n=300: coverage %.1f%% of %d", c.q, 100*cov, trials)
		if cov < 0.90 || cov > 0.99 {
			t.Errorf("p%v: 95%% bootstrap interval covered the truth in %.1f%% of %d samples", c.q, 100*cov, trials)
		}
	}
}

// bruteForcePercentile resamples all n values and sorts them: the textbook
// bootstrap the order-statistic shortcut must agree with.
func bruteForcePercentile(rng *rand.Rand, sorted []float64, q float64, buf []float64) float64 {
	for i := range buf {
		buf[i] = sorted[rng.IntN(len(sorted))]
	}
	slices.Sort(buf)
	return Percentile(buf, q)
}

// ksDistance is the two-sample Kolmogorov–Smirnov statistic.
func ksDistance(a, b []float64) float64 {
	slices.Sort(a)
	slices.Sort(b)
	var i, j int
	var d float64
	for i < len(a) && j < len(b) {
		v := min(a[i], b[j])
		for i < len(a) && a[i] == v {
			i++
		}
		for j < len(b) && b[j] == v {
			j++
		}
		d = max(d, math.Abs(float64(i)/float64(len(a))-float64(j)/float64(len(b))))
	}
	return d
}

// TestResamplePercentileIsTheBootstrap: the percentile of a resample drawn
// through uniform order statistics has the same distribution as that of a
// resample drawn value by value and sorted.
func TestResamplePercentileIsTheBootstrap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	sorted := lognormal(rng, 40, 0, 1, 1)
	slices.Sort(sorted)
	for _, q := range []float64{0, 10, 50, 90, 99, 100} {
		const draws = 20000
		fast, slow := make([]float64, draws), make([]float64, draws)
		rs := newResampler(7)
		buf := make([]float64, len(sorted))
		for k := range draws {
			fast[k] = rs.percentile(sorted, q)
			slow[k] = bruteForcePercentile(rng, sorted, q, buf)
		}
		// The 0.1% critical value of the KS distance for two samples
		// of 20,000 is 1.95·√(2/20000) ≈ 0.0195.
		if d := ksDistance(fast, slow); d > 0.0195 {
			t.Errorf("p%v: KS distance %.4f between shortcut and full resampling", q, d)
		}
	}
}

func TestPercentileChangeAA(t *testing.T) {
	// 200 A/A comparisons of 500 log-normal latencies each: at level 0.95
	// the share with P < 0.05 (and with a CI excluding 0) is the false-alarm
	// rate, which must be near 5%.
	for _, q := range []float64{50, 95, 99} {
		rng := rand.New(rand.NewPCG(11, uint64(q)))
		const trials = 200
		alarms, ciAlarms := 0, 0
		for k := range trials {
			c := PercentileChange(lognormal(rng, 500, 4, 0.5, 1), lognormal(rng, 500, 4, 0.5, 1), q, 0.95, Bootstrap{Seed: uint64(k)})
			if c.P < 0.05 {
				alarms++
			}
			if !c.CI.Contains(0) {
				ciAlarms++
			}
		}
		rate, ciRate := float64(alarms)/trials, float64(ciAlarms)/trials
		t.Logf("p%v: A/A false alarms %.1f%% by P, %.1f%% by CI", q, 100*rate, 100*ciRate)
		if rate < 0.01 || rate > 0.10 || ciRate < 0.01 || ciRate > 0.10 {
			t.Errorf("p%v: A/A false-alarm rate %.1f%% (P), %.1f%% (CI), want 1–10%%", q, 100*rate, 100*ciRate)
		}
	}
}

func TestPercentileChangeFindsShift(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	base := lognormal(rng, 5000, 4, 0.5, 1)
	slower := lognormal(rng, 5000, 4, 0.5, 1.25)
	for _, q := range []float64{50, 95} {
		c := PercentileChange(base, slower, q, 0.95, Bootstrap{Seed: 1})
		if c.P >= 0.01 || c.CI.Contains(0) || c.CI.Lower <= 0 {
			t.Errorf("p%v: a 25%% slowdown should be significant: %+v", q, c)
		}
		if !c.CI.Contains(0.25) || !near(c.Rel, (c.New-c.Base)/c.Base, 1e-12) {
			t.Errorf("p%v: CI should contain the true +25%%: %+v", q, c)
		}
		if c.Base != Percentile(sortedCopy(base), q) || c.New != Percentile(sortedCopy(slower), q) {
			t.Errorf("p%v: Base and New must be the samples' own percentiles: %+v", q, c)
		}
	}
}

func TestBootstrapIsReproducible(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	a, b := lognormal(rng, 300, 4, 0.5, 1), lognormal(rng, 300, 4, 0.5, 1.05)
	orig := slices.Clone(a)
	c1 := PercentileChange(a, b, 99, 0.95, Bootstrap{Seed: 42})
	c2 := PercentileChange(a, b, 99, 0.95, Bootstrap{Seed: 42})
	c3 := PercentileChange(a, b, 99, 0.95, Bootstrap{Seed: 43})
	if c1 != c2 {
		t.Errorf("same seed, different result: %+v vs %+v", c1, c2)
	}
	if c1.CI == c3.CI {
		t.Errorf("a different seed should draw different resamples: %+v", c3)
	}
	if !slices.Equal(a, orig) {
		t.Error("PercentileChange reordered the caller's slice")
	}
	m1, m2 := MeanChange(a, b, 0.95, Bootstrap{Seed: 42}), MeanChange(a, b, 0.95, Bootstrap{Seed: 42})
	if m1 != m2 {
		t.Errorf("MeanChange: same seed, different result: %+v vs %+v", m1, m2)
	}
}

func TestMeanChange(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	const trials = 200
	alarms := 0
	for k := range trials {
		c := MeanChange(lognormal(rng, 400, 4, 0.5, 1), lognormal(rng, 400, 4, 0.5, 1), 0.95, Bootstrap{Seed: uint64(k), Resamples: 1000})
		if c.P < 0.05 {
			alarms++
		}
	}
	rate := float64(alarms) / trials
	t.Logf("MeanChange A/A, n=400: false alarms %.1f%% of %d", 100*rate, trials)
	if rate < 0.01 || rate > 0.10 {
		t.Errorf("MeanChange A/A false-alarm rate %.1f%%, want 1–10%%", 100*rate)
	}
	c := MeanChange(lognormal(rng, 1000, 4, 0.5, 1), lognormal(rng, 1000, 4, 0.5, 1.25), 0.95, Bootstrap{Seed: 1})
	if c.P >= 0.01 || !c.CI.Contains(0.25) || c.CI.Contains(0) {
		t.Errorf("a 25%% slowdown of the mean should be significant and bracketed: %+v", c)
	}
}

// TestMeanChangeLargeSamples: beyond MaxMeanResample the rescaled m-out-of-n
// bootstrap must give the interval the normal theory gives for a mean,
// ±1.96·√(s₁²/n₁ + s₂²/n₂), divided by the base mean.
func TestMeanChangeLargeSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const n = 100000
	a := make([]float64, n)
	b := make([]float64, n)
	for i := range a {
		a[i] = 100 + 10*rng.NormFloat64()
		b[i] = 100 + 10*rng.NormFloat64()
	}
	c := MeanChange(a, b, 0.95, Bootstrap{Seed: 3})
	want := 2 * 1.959964 * math.Sqrt(2*100.0/n) / 100 // width relative to a mean of 100
	if got := c.CI.Width(); got < 0.9*want || got > 1.1*want {
		t.Errorf("CI width %.3g, want %.3g ±10%%", got, want)
	}
}

func TestChangeOfZeroBaseIsAbsolute(t *testing.T) {
	c := PercentileChange([]float64{0, 0, 0, 0}, []float64{0, 1, 2, 3}, 50, 0.95, Bootstrap{Seed: 1})
	if !c.Absolute || c.Note == "" || c.Rel != 1.5 {
		t.Errorf("base 0: want an absolute difference of 1.5 with a note, got %+v", c)
	}
}

// TestNoChangeWithoutData: what cannot be computed is NaN, never a
// confident-looking zero, and never a panic.
func TestNoChangeWithoutData(t *testing.T) {
	xs := []float64{1, 2, 3}
	for name, c := range map[string]Change{
		"empty base":     PercentileChange(nil, xs, 50, 0.95, Bootstrap{}),
		"q above 100":    PercentileChange(xs, xs, 101, 0.95, Bootstrap{}),
		"q below 0":      PercentileChange(xs, xs, -1, 0.95, Bootstrap{}),
		"level 1":        PercentileChange(xs, xs, 50, 1, Bootstrap{}),
		"mean, empty":    MeanChange(xs, nil, 0.95, Bootstrap{}),
		"proportion, 0n": ProportionChange(0, 0, 0, 0, 0.95),
	} {
		if !math.IsNaN(c.P) || !math.IsNaN(c.Rel) || c.CI.Contains(0) {
			t.Errorf("%s: %+v, want NaN figures", name, c)
		}
	}
	if iv := PercentileInterval(xs, 150, 0.95, Bootstrap{}); !math.IsNaN(iv.Lower) {
		t.Errorf("q 150: %+v", iv)
	}
	if iv := PercentileInterval([]float64{4}, 50, 0.95, Bootstrap{}); iv.Lower != 4 || iv.Upper != 4 {
		t.Errorf("one value: %+v", iv)
	}
}

func TestProportionChangeNewcombe(t *testing.T) {
	// Newcombe (1998), Statistics in Medicine 17:873–890, table II, method
	// 10 (hybrid score), for p₁ − p₂; here new = p₁ and base = p₂.
	for _, c := range []struct {
		newHits, newN, baseHits, baseN int
		lower, upper                   float64
	}{
		{56, 70, 48, 80, 0.0524, 0.3339},
		{9, 10, 3, 10, 0.1705, 0.8090},
		{6, 7, 2, 7, 0.0582, 0.8062},
		{5, 56, 0, 29, -0.0381, 0.1926},
		{0, 10, 0, 20, -0.1611, 0.2775},
	} {
		ch := ProportionChange(c.baseHits, c.baseN, c.newHits, c.newN, 0.95)
		scale := ch.Base
		if ch.Absolute {
			scale = 1
		}
		if !near(ch.CI.Lower*scale, c.lower, 0.00051) || !near(ch.CI.Upper*scale, c.upper, 0.00051) {
			t.Errorf("%d/%d − %d/%d: difference interval [%.4f, %.4f], want [%.4f, %.4f]",
				c.newHits, c.newN, c.baseHits, c.baseN, ch.CI.Lower*scale, ch.CI.Upper*scale, c.lower, c.upper)
		}
		if ch.Absolute != (c.baseHits == 0) {
			t.Errorf("%d/%d: Absolute = %v", c.baseHits, c.baseN, ch.Absolute)
		}
	}
	// 56/70 against 48/80: Rel = 0.2/0.6, and the pooled z-test gives
	// z = 0.2/√(104/150·46/150·(1/70+1/80)) = 2.65017, P = erfc(z/√2) = 0.0080451.
	ch := ProportionChange(48, 80, 56, 70, 0.95)
	if !near(ch.Rel, 1.0/3, 1e-12) || !near(ch.P, 0.0080451, 1e-6) {
		t.Errorf("56/70 vs 48/80: %+v", ch)
	}
	if ch := ProportionChange(0, 100, 0, 100, 0.95); ch.P != 1 || !ch.CI.Contains(0) {
		t.Errorf("no errors either side: %+v", ch)
	}
	if ch := ProportionChange(0, 0, 1, 10, 0.95); !math.IsNaN(ch.P) {
		t.Errorf("no base trials: %+v", ch)
	}
}

func TestMannWhitneyKnownAnswers(t *testing.T) {
	for _, c := range []struct {
		name  string
		a, b  []float64
		u, p  float64
		where string
	}{
		// scipy.stats.mannwhitneyu documentation's example, method="asymptotic".
		{"scipy docs", []float64{19, 22, 16, 29, 24}, []float64{20, 11, 17, 12}, 17, 0.11134688653314041, ""},
		// Complete separation: U = 0; σ = √(25·11/12), z = (12.5−0.5)/σ,
		// p = erfc(z/√2).
		{"separated", []float64{1, 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10}, 0, 0.012185780355344818, ""},
		// Ties: U counted pair by pair (a tie counts ½) = 9; groups of 3
		// twos and 2 nines give Σ(t³−t) = 24+6, σ² = 42/12·(14 − 30/156).
		{"ties", []float64{1, 2, 2, 3, 5, 7}, []float64{2, 4, 4, 6, 8, 9, 9}, 9, 0.09760706947335238, ""},
	} {
		u, p := MannWhitney(c.a, c.b)
		if u != c.u || !near(p, c.p, 1e-12) {
			t.Errorf("%s: U = %v, p = %.15g; want %v, %.15g", c.name, u, p, c.u, c.p)
		}
	}
	if _, p := MannWhitney([]float64{3, 3}, []float64{3, 3, 3}); p != 1 {
		t.Errorf("all tied: p = %v, want 1", p)
	}
	if u, p := MannWhitney(nil, []float64{1}); !math.IsNaN(u) || !math.IsNaN(p) {
		t.Errorf("empty side: %v, %v", u, p)
	}
}

func TestMannWhitneyAA(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	const trials = 400
	alarms := 0
	for range trials {
		if _, p := MannWhitney(lognormal(rng, 200, 4, 0.5, 1), lognormal(rng, 200, 4, 0.5, 1)); p < 0.05 {
			alarms++
		}
	}
	rate := float64(alarms) / trials
	t.Logf("Mann–Whitney A/A, n=200: false alarms %.1f%% of %d", 100*rate, trials)
	if rate < 0.01 || rate > 0.10 {
		t.Errorf("Mann–Whitney A/A false-alarm rate %.1f%%, want 1–10%%", 100*rate)
	}
	if _, p := MannWhitney(lognormal(rng, 200, 4, 0.5, 1), lognormal(rng, 200, 4, 0.5, 1.25)); p >= 0.01 {
		t.Errorf("a 25%% shift: p = %v", p)
	}
}

func benchmarkChange(b *testing.B, n int, f func(base, new []float64) Change) {
	rng := rand.New(rand.NewPCG(1, 1))
	base, new := lognormal(rng, n, 4, 0.5, 1), lognormal(rng, n, 4, 0.5, 1.05)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		_ = f(base, new)
	}
}

// BenchmarkPercentileChange is the cost of one metric's comparison with the
// default 2000 resamples, sorting included.
func BenchmarkPercentileChange(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(nName(n), func(b *testing.B) {
			benchmarkChange(b, n, func(x, y []float64) Change { return PercentileChange(x, y, 99, 0.95, Bootstrap{}) })
		})
	}
}

func BenchmarkMeanChange(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(nName(n), func(b *testing.B) {
			benchmarkChange(b, n, func(x, y []float64) Change { return MeanChange(x, y, 0.95, Bootstrap{}) })
		})
	}
}

func BenchmarkMannWhitney(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(nName(n), func(b *testing.B) {
			benchmarkChange(b, n, func(x, y []float64) Change { u, p := MannWhitney(x, y); return Change{Rel: u, P: p} })
		})
	}
}

func nName(n int) string { return "n=" + strconv.Itoa(n/1000) + "k" }
