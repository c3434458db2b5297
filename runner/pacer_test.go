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

// TestConditionedArrivals: a row of n requests at rate r offers exactly
// rate r: its measured arrivals span (n−1)/r, its warmup ones lead up to
// them in w/r, and the gaps keep their randomness (a Poisson sample's
// gaps vary, a constant schedule's do not).
func TestConditionedArrivals(t *testing.T) {
	for _, kind := range []string{"poisson", "gamma"} {
		const warm, n, rate = 5, 30, 10.0
		a := newArrivals(rate, kind, 0.5, 3).conditioned(warm, n)
		var at []float64
		for range warm + n + 3 {
			at = append(at, a.next().Seconds())
		}
		if d := at[warm] - at[0]; math.Abs(d-warm/rate) > 1e-6 {
			t.Errorf("%s: warmup spans %v s; want %v", kind, d, warm/rate)
		}
		if d := at[warm+n-1] - at[warm]; math.Abs(d-(n-1)/rate) > 1e-6 {
			t.Errorf("%s: measured arrivals span %v s; want %v", kind, d, (n-1)/rate)
		}
		gaps := map[float64]bool{}
		for i := warm + 1; i < warm+n; i++ {
			if at[i] < at[i-1] {
				t.Fatalf("%s: arrivals out of order", kind)
			}
			gaps[math.Round((at[i]-at[i-1])*1e6)] = true
		}
		if len(gaps) < n/2 {
			t.Errorf("%s: %d distinct gaps of %d; the randomness is gone", kind, len(gaps), n-1)
		}
		// Past the conditioned ones, arrivals go on at the rate.
		if at[warm+n+2] <= at[warm+n+1] {
			t.Errorf("%s: arrivals stop after the conditioned ones", kind)
		}
	}
	// The same seed gives the same schedule; constant needs nothing.
	x, y := newArrivals(10, "poisson", 0, 9).conditioned(2, 10), newArrivals(10, "poisson", 0, 9).conditioned(2, 10)
	for range 12 {
		if x.next() != y.next() {
			t.Fatal("conditioned schedules differ for one seed")
		}
	}
	if c := newArrivals(10, "constant", 0, 1).conditioned(2, 10); c.gaps != nil {
		t.Error("a constant schedule was rescaled")
	}
}

// TestTraceArrivals: the dispatcher's view of a trace's schedule is the
// schedule in order, then the end.
func TestTraceArrivals(t *testing.T) {
	next := traceArrivals([]time.Duration{0, 7})
	a, ok1 := next()
	b, ok2 := next()
	_, ok3 := next()
	if a != 0 || b != 7 || !ok1 || !ok2 || ok3 {
		t.Errorf("arrivals %v %v %v %v %v; want 0, 7, then the end", a, ok1, b, ok2, ok3)
	}
	if _, ok := traceArrivals(nil)(); ok {
		t.Error("a row without a trace has an arrival; want the end at once")
	}
}
