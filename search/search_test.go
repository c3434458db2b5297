package search

import (
	"math"
	"testing"
)

// run drives a search against a pass/fail function and returns its result.
func run(t *testing.T, p Plan, passes func(float64) bool) Result {
	t.Helper()
	s, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[float64]bool{}
	for {
		v, ok := s.Next()
		if !ok {
			break
		}
		if v < p.Min || v > p.Max {
			t.Fatalf("probe %g outside [%g, %g]", v, p.Min, p.Max)
		}
		if p.Integer && v != math.Trunc(v) {
			t.Fatalf("probe %g is not a whole number of users", v)
		}
		if seen[v] {
			t.Fatalf("probe %g tried twice", v)
		}
		seen[v] = true
		s.Record(v, passes(v))
	}
	return s.Result()
}

func users(min, max float64) Plan {
	return Plan{Min: min, Max: max, Integer: true, Relative: DefaultRelative, Absolute: DefaultUsers}
}

// Every limit of a monotone server in the range is bracketed within the
// resolution, in no more probes than WorstCase says.
func TestMonotoneUsersBracketed(t *testing.T) {
	for _, p := range []Plan{users(1, 256), users(4, 100), {Min: 1, Max: 300, Integer: true, Absolute: 1}} {
		worst := WorstCase(p)
		for limit := p.Min; limit < p.Max; limit++ {
			r := run(t, p, func(v float64) bool { return v <= limit })
			if r.Status != Bracketed || r.Passing == nil || r.Failing == nil {
				t.Fatalf("%+v limit %g: %+v", p, limit, r)
			}
			lo, hi := *r.Passing, *r.Failing
			if lo > limit || hi <= limit {
				t.Fatalf("%+v limit %g: bracket [%g, %g] misses it", p, limit, lo, hi)
			}
			if hi-lo > math.Max(1, math.Max(p.Relative*lo, p.Absolute)) {
				t.Fatalf("%+v limit %g: bracket [%g, %g] wider than the resolution", p, limit, lo, hi)
			}
			if len(r.Probes) > worst {
				t.Fatalf("%+v limit %g: %d probes, WorstCase says %d", p, limit, len(r.Probes), worst)
			}
		}
	}
}

// With an absolute resolution of one user and no relative one, the search
// finds the exact limit.
func TestExactLimit(t *testing.T) {
	p := Plan{Min: 1, Max: 1000, Integer: true, Absolute: 1}
	r := run(t, p, func(v float64) bool { return v <= 437 })
	if *r.Passing != 437 || *r.Failing != 438 {
		t.Fatalf("got [%g, %g], want [437, 438]", *r.Passing, *r.Failing)
	}
}

func TestRatesBracketed(t *testing.T) {
	p := Plan{Min: 0.5, Max: 64, Relative: 0.05}
	worst := WorstCase(p)
	for _, limit := range []float64{0.51, 0.9, 1, 3.3, 7.77, 20, 63.9} {
		r := run(t, p, func(v float64) bool { return v <= limit })
		if r.Status != Bracketed {
			t.Fatalf("limit %g: %+v", limit, r)
		}
		lo, hi := *r.Passing, *r.Failing
		if lo > limit || hi <= limit || hi-lo > 0.05*lo*(1+1e-9) {
			t.Fatalf("limit %g: bracket [%g, %g]", limit, lo, hi)
		}
		if len(r.Probes) > worst {
			t.Fatalf("limit %g: %d probes over WorstCase %d", limit, len(r.Probes), worst)
		}
		// Rates are kept readable: a few significant digits.
		for _, q := range r.Probes {
			if s := fmtShort(q.Value); len(s) > 8 {
				t.Fatalf("limit %g: probe %s is not short", limit, s)
			}
		}
	}
}

func fmtShort(v float64) string { return trimFloat(v) }

func TestAllPass(t *testing.T) {
	r := run(t, users(2, 100), func(float64) bool { return true })
	if r.Status != AllPass || *r.Passing != 100 || r.Failing != nil {
		t.Fatalf("%+v", r)
	}
	// Doubling: 2, 4, ..., 64, then max.
	want := []float64{2, 4, 8, 16, 32, 64, 100}
	if len(r.Probes) != len(want) {
		t.Fatalf("probes %+v, want values %v", r.Probes, want)
	}
	for i, q := range r.Probes {
		if q.Value != want[i] {
			t.Fatalf("probe %d = %g, want %g", i, q.Value, want[i])
		}
	}
}

func TestAllFailAndMinFails(t *testing.T) {
	r := run(t, users(8, 100), func(float64) bool { return false })
	if r.Status != MinFails || r.Passing != nil || *r.Failing != 8 || len(r.Probes) != 1 {
		t.Fatalf("%+v", r)
	}
}

// The limit right at the range's edges.
func TestResolutionEdges(t *testing.T) {
	p := users(1, 64)
	r := run(t, p, func(v float64) bool { return v <= 1 })
	if r.Status != Bracketed || *r.Passing != 1 || *r.Failing != 2 {
		t.Fatalf("limit at min: %+v", r)
	}
	r = run(t, p, func(v float64) bool { return v < 64 })
	// Only 64 fails: the bracket ends there, within 10% of its pass.
	if r.Status != Bracketed || *r.Failing != 64 || 64-*r.Passing > 0.1**r.Passing {
		t.Fatalf("limit just under max: %+v", r)
	}
	// Adjacent whole numbers stop the search even with a tiny
	// relative resolution and no absolute one.
	r = run(t, Plan{Min: 10, Max: 20, Integer: true, Relative: 0.001}, func(v float64) bool { return v <= 13 })
	if r.Status != Bracketed || *r.Passing != 13 || *r.Failing != 14 {
		t.Fatalf("adjacent users: %+v", r)
	}
}

// An invalid probe counts as a failure: the search never claims a load it
// did not see pass, even when the server is not monotone.
func TestNonMonotone(t *testing.T) {
	r := run(t, users(1, 128), func(v float64) bool { return v != 16 && v <= 40 })
	if r.Passing == nil || *r.Passing >= 16 && *r.Failing != 16 {
		t.Fatalf("%+v", r)
	}
	for _, q := range r.Probes {
		if q.Value == *r.Passing && !q.Passed {
			t.Fatalf("passing value %g did not pass: %+v", q.Value, r)
		}
	}
}

func TestReplayMatchesRun(t *testing.T) {
	p := users(1, 256)
	r := run(t, p, func(v float64) bool { return v <= 37 })
	if got := Replay(p, r.Probes); got.Status != r.Status || *got.Passing != *r.Passing || *got.Failing != *r.Failing {
		t.Fatalf("replay %+v, run %+v", got, r)
	}
	// A search cut short replays as stopped, with what it had.
	got := Replay(p, r.Probes[:2])
	if got.Status != Stopped || *got.Passing != 2 || got.Failing != nil {
		t.Fatalf("cut short: %+v", got)
	}
}

func TestWorstCase(t *testing.T) {
	// 1..256 doubling: 9 probes to reach 256; a failure at 256 leaves
	// [128, 256] to bisect down to 10%: 181, then 152 or 215, ...
	if n := WorstCase(users(1, 256)); n < 9 || n > 14 {
		t.Fatalf("WorstCase(1..256) = %d", n)
	}
	if n := WorstCase(users(1, 2)); n != 2 {
		t.Fatalf("WorstCase(1..2) = %d, want 2", n)
	}
	if n := WorstCase(Plan{Min: 1, Max: 100000, Integer: true, Absolute: 1}); n > MaxProbes || n < 17 {
		t.Fatalf("WorstCase(1..100000 exact) = %d", n)
	}
	if n := WorstCase(Plan{Min: 2, Max: 1}); n != 0 {
		t.Fatalf("WorstCase of a bad plan = %d", n)
	}
}

func TestCheck(t *testing.T) {
	for _, p := range []Plan{
		{Min: 0, Max: 10, Integer: true},
		{Min: 10, Max: 10, Integer: true},
		{Min: 1.5, Max: 10, Integer: true},
		{Min: 1, Max: 10},
		{Min: 1, Max: 10, Relative: -1},
	} {
		if p.Check() == nil {
			t.Errorf("%+v passes Check", p)
		}
	}
	if err := users(1, 10).Check(); err != nil {
		t.Error(err)
	}
}

func TestStop(t *testing.T) {
	s, _ := New(users(1, 64))
	s.Record(1, true)
	s.Stop()
	if _, ok := s.Next(); ok || s.Status() != Stopped {
		t.Fatalf("stopped search goes on: %v", s.Status())
	}
}
