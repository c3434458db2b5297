// Package search owns the strategy of a search row: given the outcomes of
// the probes so far, which load to try next and when to stop, and how many
// probes a search can take at worst. It knows nothing of servers, rows or
// rules: a probe is a load and whether it passed, so the strategy can be
// tested exhaustively against any pass/fail function.
//
// The strategy brackets, then bisects. It starts at Min, the load the
// server is expected to hold; each pass doubles the load (capped at Max)
// until a probe fails or Max passes, so that no probe offers more than
// twice the highest load already shown to hold (an overloaded probe is
// slow, fills queues and may time out). Once a pass and a failure bracket
// the limit, each probe tries the geometric mean of the two: the
// resolution is relative (10% by default), and halving the ratio hi/lo
// reaches a relative width in the fewest probes whatever the scale.
package search

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Defaults of Plan's resolution.
const (
	DefaultRelative = 0.1
	// DefaultUsers is the absolute resolution of a concurrency search:
	// one user, below which a closed loop cannot be split.
	DefaultUsers = 1
	// MaxProbes bounds any search, whatever its range and resolution.
	MaxProbes = 40
)

// Plan is one search: the range of loads and how close the answer must be.
type Plan struct {
	Min, Max float64
	// Integer says loads are whole numbers (users of a closed loop);
	// otherwise they are rates, kept to a few significant digits.
	Integer bool
	// The search stops when the lowest failing load is within
	// max(Relative × highest passing load, Absolute) of the highest
	// passing one. Either may be 0, not both (for whole loads, adjacent
	// values always stop it).
	Relative float64
	Absolute float64
}

// Check reports what makes a plan unusable.
func (p Plan) Check() error {
	switch {
	case !(p.Min > 0):
		return fmt.Errorf("min must be positive, got %g", p.Min)
	case !(p.Max > p.Min):
		return fmt.Errorf("max (%g) must be above min (%g)", p.Max, p.Min)
	case p.Integer && (p.Min != math.Trunc(p.Min) || p.Max != math.Trunc(p.Max)):
		return fmt.Errorf("min and max must be whole numbers, got %g and %g", p.Min, p.Max)
	case p.Relative < 0 || p.Absolute < 0:
		return errors.New("resolution must not be negative")
	case !p.Integer && p.Relative == 0 && p.Absolute == 0:
		return errors.New("a rate search needs a relative or an absolute resolution above 0")
	}
	return nil
}

// Status is how a search ended, or that it has not.
type Status string

const (
	// Running: the search wants another probe.
	Running Status = "running"
	// Bracketed: a passing and a failing load within the resolution.
	Bracketed Status = "bracketed"
	// AllPass: Max passed; the limit is above the range.
	AllPass Status = "all_pass"
	// MinFails: Min already fails; the limit is below the range.
	MinFails Status = "min_fails"
	// Stopped: the search ended before its answer (MaxProbes, or the
	// run was interrupted or failed).
	Stopped Status = "stopped"
)

// Probe is one tried load and its outcome.
type Probe struct {
	Value  float64 `json:"value"`
	Passed bool    `json:"passed"`
}

// Search is the state of one search.
type Search struct {
	plan   Plan
	probes []Probe
	lo, hi float64 // highest passing, lowest failing load; 0 for none yet
	done   bool
}

// New starts a search; the plan must pass Check.
func New(p Plan) (*Search, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	return &Search{plan: p}, nil
}

// Next is the load to probe next, or false when the search is over.
func (s *Search) Next() (float64, bool) {
	st := s.Status()
	if st != Running {
		return 0, false
	}
	p := s.plan
	switch {
	case len(s.probes) == 0:
		return p.Min, true
	case s.hi == 0: // everything so far passed: grow
		next := math.Min(p.Max, s.lo*2)
		if p.Integer {
			next = math.Min(p.Max, math.Max(s.lo+1, math.Round(s.lo*2)))
		}
		return next, true
	}
	return s.between(s.lo, s.hi), true
}

// between is a load strictly inside (lo, hi) near their geometric mean:
// whole for an integer plan, else rounded to the fewest significant
// digits that keep it inside (readable row ids: r=3.46, not r=3.4641016).
func (s *Search) between(lo, hi float64) float64 {
	mid := math.Sqrt(lo * hi)
	if s.plan.Integer {
		return math.Min(hi-1, math.Max(lo+1, math.Round(mid)))
	}
	for digits := 2; digits < 17; digits++ {
		v, err := strconv.ParseFloat(strconv.FormatFloat(mid, 'g', digits, 64), 64)
		if err == nil && v > lo && v < hi {
			return v
		}
	}
	return mid
}

// Record adds a probe's outcome. A probe that could not be judged (its
// figures invalid, the row failed) is recorded as not passing: a limit is
// only claimed where a probe showed it holds.
func (s *Search) Record(value float64, passed bool) {
	s.probes = append(s.probes, Probe{Value: value, Passed: passed})
	if passed {
		if value > s.lo {
			s.lo = value
		}
		if s.hi != 0 && s.hi <= s.lo { // not monotone: forget the lower failure
			s.hi = 0
			for _, q := range s.probes {
				if !q.Passed && q.Value > s.lo && (s.hi == 0 || q.Value < s.hi) {
					s.hi = q.Value
				}
			}
		}
		return
	}
	if value > s.lo && (s.hi == 0 || value < s.hi) {
		s.hi = value
	}
}

// Stop ends the search before its answer (the run was interrupted).
func (s *Search) Stop() { s.done = true }

// Status says whether the search is over and how.
func (s *Search) Status() Status {
	p := s.plan
	switch {
	case len(s.probes) == 0:
		if s.done {
			return Stopped
		}
		return Running
	case s.lo == 0 && s.hi != 0 && s.hi <= p.Min:
		return MinFails
	case s.hi == 0 && s.lo >= p.Max:
		return AllPass
	case s.lo != 0 && s.hi != 0 && s.closeEnough(s.lo, s.hi):
		return Bracketed
	case s.done || len(s.probes) >= MaxProbes:
		return Stopped
	}
	return Running
}

func (s *Search) closeEnough(lo, hi float64) bool {
	p := s.plan
	gap := hi - lo
	if p.Integer && gap <= 1 {
		return true
	}
	return gap <= math.Max(p.Relative*lo, p.Absolute)*(1+1e-9)
}

// Result is where a search stands.
type Result struct {
	Status Status `json:"status"`
	// Passing is the highest load that passed, Failing the lowest above
	// it that did not; nil where there is none.
	Passing *float64 `json:"passing_value"`
	Failing *float64 `json:"failing_value"`
	Probes  []Probe  `json:"probes"`
}

// Result reports the search's answer so far.
func (s *Search) Result() Result {
	r := Result{Status: s.Status(), Probes: append([]Probe(nil), s.probes...)}
	if s.lo != 0 {
		v := s.lo
		r.Passing = &v
	}
	if s.hi != 0 {
		v := s.hi
		r.Failing = &v
	}
	return r
}

// Replay runs a search over recorded outcomes, in order, as the run made
// them: how a record restates a search from its probe rows.
func Replay(p Plan, probes []Probe) Result {
	s := &Search{plan: p}
	for _, q := range probes {
		s.Record(q.Value, q.Passed)
	}
	if s.Status() == Running {
		s.done = true
	}
	return s.Result()
}

// WorstCase is the most probes the search can take over every answer the
// server could give, capped at MaxProbes. Each probe lies above the highest
// pass and below the lowest failure, so any sequence of answers is one a
// monotone server could give, and the state is just that pair.
func WorstCase(p Plan) int {
	if p.Check() != nil {
		return 0
	}
	memo := map[[2]float64]int{}
	return min(MaxProbes, remaining(&Search{plan: p}, memo))
}

// remaining is the most probes a search in s's state still takes.
func remaining(s *Search, memo map[[2]float64]int) int {
	key := [2]float64{s.lo, s.hi}
	if len(s.probes) > 0 {
		if n, ok := memo[key]; ok {
			return n
		}
	}
	v, ok := s.nextIgnoringCap()
	n := 0
	if ok {
		for _, passed := range []bool{true, false} {
			c := &Search{plan: s.plan, probes: []Probe{{}}, lo: s.lo, hi: s.hi}
			c.Record(v, passed)
			n = max(n, 1+remaining(c, memo))
		}
	}
	if len(s.probes) > 0 {
		memo[key] = n
	}
	return n
}

// nextIgnoringCap is Next without the MaxProbes limit, for WorstCase.
func (s *Search) nextIgnoringCap() (float64, bool) {
	saved := s.probes
	if len(saved) > 1 {
		s.probes = saved[:1]
	}
	v, ok := s.Next()
	s.probes = saved
	return v, ok
}

// FormatValue writes a load as row ids and sentences show it: 24, 3.46.
func FormatValue(v float64) string { return trimFloat(v) }

func trimFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
