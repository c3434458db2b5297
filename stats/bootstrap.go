package stats

import (
	"math"
	"math/rand/v2"
	"slices"
)

// DefaultResamples is the number of bootstrap resamples a Bootstrap with
// Resamples 0 draws. 2000 puts the 2.5% and 97.5% quantiles of the
// resampled statistic on 50 resamples each, enough for their Monte Carlo
// error to be small beside the interval's width (Efron and Tibshirani
// recommend 1000 or more for percentile intervals).
const DefaultResamples = 2000

// Bootstrap configures resampling: Resamples (default 2000 when 0) and a
// Seed, so results are reproducible: the same samples, settings and binary
// give the same interval and p-value.
type Bootstrap struct {
	Resamples int
	Seed      uint64
}

func (b Bootstrap) resamples() int {
	if b.Resamples <= 0 {
		return DefaultResamples
	}
	return b.Resamples
}

// pcgStream is PCG's second word: any fixed odd constant; this one is the
// golden ratio's, so Seed alone names the stream.
const pcgStream = 0x9e3779b97f4a7c15

// resampler draws bootstrap resamples from one seeded PCG stream.
type resampler struct{ rng *rand.Rand }

func newResampler(seed uint64) *resampler {
	return &resampler{rng: rand.New(rand.NewPCG(seed, pcgStream))}
}

// Change compares a statistic of two samples: Rel = (New−Base)/Base; CI is
// the interval of Rel; P the two-sided p-value of "no change".
//
// When Base is 0 a relative change has no meaning (an error ratio going from
// 0 to 0.01 is not "infinitely worse"), so Rel and CI hold the absolute
// difference New − Base instead, Absolute is true, and Note says so.
type Change struct {
	Base, New, Rel float64
	CI             Interval
	P              float64
	// Absolute is true when Rel and CI are New − Base rather than relative.
	Absolute bool `json:",omitempty"`
	// Note says, in words, anything a reader must know to read the figures.
	Note string `json:",omitempty"`
}

const absoluteNote = "base is 0: Rel and CI are the absolute difference new − base"

func nanChange(base, new, level float64) Change {
	return Change{Base: base, New: new, Rel: math.NaN(), CI: nanInterval(level), P: math.NaN()}
}

// diff is the change from b to n: relative, or absolute when abs.
func diff(b, n float64, abs bool) float64 {
	if abs {
		return n - b
	}
	if b == 0 {
		// A resample whose base statistic happens to be 0 while the
		// sample's is not: the change is unbounded, in n's direction.
		switch {
		case n > 0:
			return math.Inf(1)
		case n < 0:
			return math.Inf(-1)
		}
		return 0
	}
	return (n - b) / b
}

// boundAt is Percentile over sorted bootstrap estimates, safe with the
// infinities diff can return (∞ − ∞ would make the interpolation NaN).
func boundAt(sorted []float64, q float64) float64 {
	h := (float64(len(sorted)) - 1) * q / 100
	i := int(math.Floor(h))
	if i >= len(sorted)-1 || sorted[i] == sorted[i+1] {
		return sorted[min(i, len(sorted)-1)]
	}
	return Percentile(sorted, q)
}

// Finish turns the resampled differences d into c's interval and p-value:
// the percentile interval (the (1−level)/2 and (1+level)/2 quantiles of d),
// and P = 2·min(share of d ≤ 0, share of d ≥ 0), kept within
// [1/(R+1), 1] since R resamples cannot show a p-value below 1/(R+1).
// It sorts d in place. Exported for resampling schemes of their own (the
// block bootstrap of compare), so every interval is read one way.
func (c *Change) Finish(d []float64, lv float64) {
	slices.Sort(d)
	c.CI = Interval{Lower: boundAt(d, 100*(1-lv)/2), Upper: boundAt(d, 100*(1+lv)/2), Level: lv}
	var le, ge int
	for _, v := range d {
		if v <= 0 {
			le++
		}
		if v >= 0 {
			ge++
		}
	}
	r := float64(len(d))
	c.P = min(1, max(2*float64(min(le, ge))/r, 1/(r+1)))
}

func sortedCopy(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

// PercentileInterval is the bootstrap percentile interval of the q-th
// percentile of xs: the (1−level)/2 and (1+level)/2 quantiles of the q-th
// percentile over b's resamples. It assumes the values are independent
// draws from one distribution (docs/statistics.md says where load testing
// bends that). Fewer than 2 values give Lower = Upper = the value, none NaN.
func PercentileInterval(xs []float64, q, level float64, b Bootstrap) Interval {
	lv, ok := levelOf(level)
	if !ok || len(xs) == 0 || !(q >= 0 && q <= 100) {
		return nanInterval(lv)
	}
	s := sortedCopy(xs)
	if len(s) == 1 {
		return Interval{Lower: s[0], Upper: s[0], Level: lv}
	}
	rs := newResampler(b.Seed)
	est := make([]float64, b.resamples())
	for k := range est {
		est[k] = rs.percentile(s, q)
	}
	slices.Sort(est)
	return Interval{Lower: Percentile(est, 100*(1-lv)/2), Upper: Percentile(est, 100*(1+lv)/2), Level: lv}
}

// PercentileChange compares the q-th percentile of new with base's: each
// sample is resampled independently, the percentile of each resample taken,
// and their relative difference collected; CI and P come from those
// differences (see Change). The requests of a row are taken as independent,
// which closed-loop load bends (docs/statistics.md).
func PercentileChange(base, new []float64, q, level float64, b Bootstrap) Change {
	lv, ok := levelOf(level)
	if !(q >= 0 && q <= 100) {
		return nanChange(math.NaN(), math.NaN(), lv)
	}
	if !ok || len(base) == 0 || len(new) == 0 {
		return nanChange(Percentile(sortedCopy(base), q), Percentile(sortedCopy(new), q), lv)
	}
	sb, sn := sortedCopy(base), sortedCopy(new)
	c := Change{Base: Percentile(sb, q), New: Percentile(sn, q)}
	c.setRel()
	rs := newResampler(b.Seed)
	d := make([]float64, b.resamples())
	for k := range d {
		d[k] = diff(rs.percentile(sb, q), rs.percentile(sn, q), c.Absolute)
	}
	c.Finish(d, lv)
	return c
}

// MeanChange is PercentileChange for the mean. Each resample costs a draw
// per value (there is no shortcut for a sum), so samples larger than
// MaxMeanResample are resampled at that size and the spread rescaled
// (docs/statistics.md, "m-out-of-n").
func MeanChange(base, new []float64, level float64, b Bootstrap) Change {
	lv, ok := levelOf(level)
	if !ok || len(base) == 0 || len(new) == 0 {
		return nanChange(Mean(base), Mean(new), lv)
	}
	c := Change{Base: Mean(base), New: Mean(new)}
	c.setRel()
	rs := newResampler(b.Seed)
	d := make([]float64, b.resamples())
	for k := range d {
		d[k] = diff(rs.mean(base, c.Base), rs.mean(new, c.New), c.Absolute)
	}
	c.Finish(d, lv)
	return c
}

func (c *Change) setRel() {
	if c.Base == 0 {
		c.Absolute, c.Note = true, absoluteNote
	}
	c.Rel = diff(c.Base, c.New, c.Absolute)
}

// MaxMeanResample bounds the size of a mean's resample, so comparing the
// means of two samples of 100,000 takes under a second (docs/performance.md).
// Beyond it the m-out-of-n bootstrap, rescaled by √(m/n), gives the interval
// a full-size resample would, to within its Monte Carlo error: the mean is a
// smooth statistic, for which the rescaled m-out-of-n bootstrap is
// consistent.
const MaxMeanResample = 20000

// mean draws one bootstrap resample of xs and returns its mean. When xs is
// larger than MaxMeanResample it draws m = MaxMeanResample values and
// shrinks the deviation from the sample mean m0 by √(m/n), so the resampled
// means spread as those of full-size resamples would.
func (r *resampler) mean(xs []float64, m0 float64) float64 {
	n := len(xs)
	m := min(n, MaxMeanResample)
	var sum float64
	for range m {
		sum += xs[r.rng.IntN(n)]
	}
	mean := sum / float64(m)
	if m == n {
		return mean
	}
	return m0 + math.Sqrt(float64(m)/float64(n))*(mean-m0)
}

// percentile returns the q-th percentile (type 7) of one bootstrap resample
// of sorted, exactly as Percentile would on the resample sorted, without
// drawing it. A resample is n uniform draws U₁…Uₙ on [0, 1) mapped to
// sorted[⌊U·n⌋]; the map is monotone, so the resample's k-th smallest value
// is sorted[⌊U₍ₖ₎·n⌋], with U₍ₖ₎ the k-th smallest uniform. U₍ₖ₎ follows
// Beta(k, n−k+1), and given U₍ₖ₎ = u the next one is the least of n−k
// uniforms on (u, 1). Type 7 needs only the two ranks around h = (n−1)·q/100,
// so each resample costs a Beta draw and a uniform, whatever n is: the same
// distribution as resampling all n values, at a cost independent of n.
func (r *resampler) percentile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 1 {
		return sorted[0]
	}
	h := (float64(n) - 1) * q / 100
	lo := math.Floor(h)
	i := int(lo) // 0-based rank; the 1-based rank is k = i+1
	if i >= n-1 {
		return sorted[r.indexOf(r.beta(float64(n), 1), n)]
	}
	k := i + 1
	u := r.beta(float64(k), float64(n-k+1))
	// The least of n−k uniforms on (u, 1): u + (1−u)(1 − V^(1/(n−k))).
	v := 1 - r.rng.Float64() // (0, 1]
	next := u + (1-u)*-math.Expm1(math.Log(v)/float64(n-k))
	a, b := sorted[r.indexOf(u, n)], sorted[r.indexOf(next, n)]
	return a + (h-lo)*(b-a)
}

func (r *resampler) indexOf(u float64, n int) int {
	return min(int(u*float64(n)), n-1)
}

// beta draws from Beta(a, b), a, b ≥ 1, as X/(X+Y) with X ~ Gamma(a) and
// Y ~ Gamma(b).
func (r *resampler) beta(a, b float64) float64 {
	x := r.gamma(a)
	return x / (x + r.gamma(b))
}

// gamma draws from Gamma(a, 1), a ≥ 1, by Marsaglia and Tsang's method
// (ACM TOMS 26(3), 2000): a squeeze and a log test, accepted over 95% of
// the time for every a ≥ 1.
func (r *resampler) gamma(a float64) float64 {
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		var x, v float64
		for {
			x = r.rng.NormFloat64()
			v = 1 + c*x
			if v > 0 {
				break
			}
		}
		v = v * v * v
		u := r.rng.Float64()
		if u < 1-0.0331*x*x*x*x {
			return d * v
		}
		if math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
