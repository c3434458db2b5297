package runner

import (
	"math"
	"testing"
	"time"
)

// The arrival generators are pure: these tests draw schedules and check
// their statistics without sleeping.

func gaps(a *arrivals, n int) []float64 {
	prev := a.next()
	if prev != 0 {
		panic("first arrival not at zero")
	}
	out := make([]float64, n)
	for i := range out {
		at := a.next()
		out[i] = (at - prev).Seconds()
		prev = at
	}
	return out
}

func meanCV(xs []float64) (mean, cv float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss/float64(len(xs))) / mean
}

func TestConstantArrivals(t *testing.T) {
	a := newArrivals(5000, "constant", 0, 1)
	for i := 0; i < 1_000_000; i++ {
		at := a.next()
		// Exact: computed as i/rate, never accumulated.
		if want := time.Duration(float64(i) / 5000 * float64(time.Second)); at != want {
			t.Fatalf("arrival %d at %v; want %v", i, at, want)
		}
	}
}

func TestRandomArrivals(t *testing.T) {
	tests := []struct {
		name   string
		kind   string
		shape  float64
		wantCV float64 // coefficient of variation of the gaps: 1/sqrt(shape)
	}{
		{"poisson", "poisson", 0, 1},
		{"gamma bursty", "gamma", 0.25, 2},
		{"gamma smooth", "gamma", 4, 0.5},
		{"gamma k=1 is poisson", "gamma", 1, 1},
	}
	const rate, n = 20.0, 200000
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gaps(newArrivals(rate, tt.kind, tt.shape, 7), n)
			mean, cv := meanCV(g)
			if math.Abs(mean*rate-1) > 0.02 {
				t.Errorf("mean gap %.5fs; want %.5fs (rate %g/s)", mean, 1/rate, rate)
			}
			if math.Abs(cv-tt.wantCV)/tt.wantCV > 0.03 {
				t.Errorf("gap CV %.3f; want %.3f", cv, tt.wantCV)
			}
		})
	}
}

func TestArrivalsAreSeeded(t *testing.T) {
	a, b := newArrivals(10, "poisson", 0, 42), newArrivals(10, "poisson", 0, 42)
	c := newArrivals(10, "poisson", 0, 43)
	same, differ := true, false
	for i := 0; i < 100; i++ {
		x, y, z := a.next(), b.next(), c.next()
		same = same && x == y
		differ = differ || x != z
	}
	if !same || !differ {
		t.Errorf("same seed same schedule: %v; other seed differs: %v", same, differ)
	}
}
