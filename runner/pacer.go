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
		var gap float64
		if a.kind == "gamma" {
			gap = gammaSample(a.rng, a.shape) / (a.rate * a.shape)
		} else {
			gap = a.rng.ExpFloat64() / a.rate
		}
		a.t += gap
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
