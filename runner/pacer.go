package runner

import (
	"math"
	"math/rand/v2"
	"time"
)

// arrivals generates the send times of an open-loop row: offsets from the
// row's start, one per call to next. It never sleeps, so its statistics are
// tested directly (see pacer_test.go); the dispatcher does the waiting.
//
// The generator is seeded, so a rerun offers the same arrival pattern.
type arrivals struct {
	rate  float64 // mean arrivals per second
	kind  string  // constant, poisson or gamma
	shape float64 // gamma shape (burstiness)
	rng   *rand.Rand
	t     float64 // seconds since start of the next arrival
	n     int64
	// gaps, when set, are the first len(gaps) gaps drawn in advance and
	// rescaled (see conditioned); later gaps are drawn as they come.
	gaps []float64
}

// maxConditioned bounds the gaps conditioned drains in advance: beyond a
// million arrivals a rate's sampling error (1/√n) is under 0.1%, and
// the draws would cost memory for nothing.
const maxConditioned = 1 << 20

// conditioned draws the gaps of a row that sends warm warmup requests and
// then measured ones, and rescales them so that the warmup arrivals span
// exactly warm/rate seconds up to the first measured one, and the measured
// ones exactly (measured−1)/rate from first to last: the row offers
// exactly the rate it names, however few requests it sends. A row stopped
// by duration is conditioned on the count its duration holds at the rate
// (arrivals past them, should the row run on, are drawn as they come).
//
// For Poisson arrivals this is the arrival process conditioned on its
// count: n exponential gaps divided by their sum are distributed as the
// spacings of n uniform points, which is what a Poisson process's arrival
// times are, given how many arrived in the window. Burstiness (gamma)
// keeps its shape; the sizes of its gaps relative to each other are
// unchanged. vLLM's benchmark rescales its gamma gaps the same way. Constant
// arrivals need nothing.
func (a *arrivals) conditioned(warm, measured int) *arrivals {
	if a.kind == "constant" || warm+measured > maxConditioned || warm+measured < 2 {
		return a
	}
	draw := func(k int, span float64) []float64 {
		g := make([]float64, k)
		var sum float64
		for i := range g {
			g[i] = a.gap()
			sum += g[i]
		}
		if sum > 0 {
			for i := range g {
				g[i] *= span / sum
			}
		}
		return g
	}
	// Gaps: warm of them lead up to the first measured arrival, then
	// measured−1 between measured arrivals.
	a.gaps = append(draw(warm, float64(warm)/a.rate), draw(max(measured-1, 0), float64(max(measured-1, 0))/a.rate)...)
	return a
}

// gap draws one gap between arrivals, in seconds.
func (a *arrivals) gap() float64 {
	if a.kind == "gamma" {
		return gammaSample(a.rng, a.shape) / (a.rate * a.shape)
	}
	return a.rng.ExpFloat64() / a.rate
}

func newArrivals(rate float64, kind string, burstiness float64, seed uint64) *arrivals {
	return &arrivals{rate: rate, kind: kind, shape: burstiness, rng: rand.New(rand.NewPCG(seed, 0xa441))}
}

// next returns the offset of the next arrival.
//
// Constant arrivals are computed as n/rate rather than accumulated, so
// float error cannot drift the schedule over a million requests. Poisson
// gaps are exponential with mean 1/rate; gamma gaps have shape k and scale
// 1/(rate·k), which keeps the mean rate while k < 1 clusters arrivals into
// bursts and k > 1 evens them out (k = 1 is Poisson). The first request goes
// at time zero in every mode.
func (a *arrivals) next() time.Duration {
	var at float64
	switch a.kind {
	case "constant":
		at = float64(a.n) / a.rate
	default:
		at = a.t
		if a.n < int64(len(a.gaps)) {
			a.t += a.gaps[a.n]
		} else {
			a.t += a.gap()
		}
	}
	a.n++
	return time.Duration(at * float64(time.Second))
}

// gammaSample draws from Gamma(shape, 1) by Marsaglia and Tsang's method,
// boosted for shape < 1 (Gamma(k) = Gamma(k+1) · U^(1/k)).
func gammaSample(rng *rand.Rand, shape float64) float64 {
	if shape < 1 {
		u := rng.Float64()
		for u == 0 {
			u = rng.Float64()
		}
		return gammaSample(rng, shape+1) * math.Pow(u, 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x {
			return d * v
		}
		if math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
