package schema

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/infermatrix/infermatrix/metrics"
)

// Ramp raises a row's load in steps, within one row: the load never drains
// between steps, unlike a sweep, whose points are separate rows each with
// its own ramp-up and drain. Each step is summarised like a sweep point
// (metrics.StepSummary). AIPerf calls the smooth version of this
// --concurrency-ramp-duration and --request-rate-ramp-duration; infermatrix
// holds each level for a whole step, so that every level has figures of
// its own.
type Ramp struct {
	Concurrency  *RampRange `yaml:"concurrency" json:"concurrency,omitempty" doc:"Ramp the closed-loop users: from users at first, step more at every step, up to to; integers."`
	Rate         *RampRange `yaml:"rate" json:"rate,omitempty" doc:"Ramp the open-loop arrival rate, in requests per second (the row's rate settings, arrival, burstiness and max_concurrency, apply; rate.per_second is not set)."`
	StepDuration *Duration  `yaml:"step_duration" json:"step_duration,omitempty" doc:"How long each step holds its load; the row runs steps × step_duration after its warmup." required:"true"`
}

// RampRange is the levels of a ramp: from, from+step, ..., to.
type RampRange struct {
	From float64 `yaml:"from" json:"from,omitempty" doc:"The first step's load." exclusiveMinimum:"0" maximum:"1000000" required:"true"`
	To   float64 `yaml:"to" json:"to,omitempty" doc:"The last step's load; above from, and reached exactly: (to - from) is a whole number of steps." exclusiveMinimum:"0" maximum:"1000000" required:"true"`
	Step float64 `yaml:"step" json:"step,omitempty" doc:"How much each step adds." exclusiveMinimum:"0" maximum:"1000000" required:"true"`
}

// RampPlan is a resolved ramp: the load of every step, in order.
type RampPlan struct {
	// Dimension is ModeConcurrency or ModeRate.
	Dimension    string    `json:"dimension"`
	Levels       []float64 `json:"levels"`
	StepDuration Duration  `json:"step_duration"`
}

// MaxRampSteps bounds a ramp's steps: each is summarised, judged and shown
// in the decision record like a sweep point.
const MaxRampSteps = MaxSweepValues

// Label names step i (from 0) of the ramp the way a sweep names its
// points: c=8, r=2.5.
func (p *RampPlan) Label(i int) string {
	return shortDim(p.Dimension) + "=" + strconv.FormatFloat(p.Levels[i], 'f', -1, 64)
}

// Total is how long the ramp's steps last together.
func (p *RampPlan) Total() Duration {
	return Duration(int64(p.StepDuration) * int64(len(p.Levels)))
}

// String describes the ramp in words: "concurrency 4→32 in 8 steps of 30s".
func (p *RampPlan) String() string {
	if len(p.Levels) == 0 {
		return "ramp"
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	return fmt.Sprintf("%s %s→%s in %d steps of %s", p.Dimension, f(p.Levels[0]), f(p.Levels[len(p.Levels)-1]), len(p.Levels), p.StepDuration)
}

// rampLoad resolves the row's ramp and prefill_concurrency into p, after
// the load switch of plannedRow has resolved concurrency and rate. A ramp
// fixes how the row stops (after its last step), so requests and duration
// are refused with it; it offers load one way, so another load key or a
// sweep of the load is refused too.
func (r *resolver) rampLoad(row *Row, rowPath string, m *merged, p *PlannedRow) {
	if m.PrefillConcurrency != nil {
		p.PrefillConcurrency = *m.PrefillConcurrency
	}
	rp := m.Ramp
	if rp == nil {
		return
	}
	path := m.at("ramp")
	if rp.Concurrency != nil && rp.Rate != nil {
		r.problem(path+".rate", "ramp concurrency and rate in separate rows", "a ramp cannot raise both concurrency and rate")
		return
	}
	if rp.Concurrency == nil && rp.Rate == nil {
		if !r.d.misspelled(path, "concurrency", "rate") && !r.d.isBroken(path+".concurrency") && !r.d.isBroken(path+".rate") {
			r.problem(path, "e.g. ramp: {concurrency: {from: 4, to: 32, step: 4}, step_duration: 30s}", "the ramp raises nothing: give concurrency or rate")
		}
		return
	}
	dim, rng := ModeConcurrency, rp.Concurrency
	if rp.Rate != nil {
		dim, rng = ModeRate, rp.Rate
	}
	rngPath := path + "." + dim
	ok := true
	if dim == ModeConcurrency {
		for _, k := range []struct {
			key string
			v   float64
		}{{"from", rng.From}, {"to", rng.To}, {"step", rng.Step}} {
			if k.v != math.Trunc(k.v) {
				r.problem(rngPath+"."+k.key, "users come whole: write an integer", "concurrency %s must be an integer, got %v", k.key, k.v)
				ok = false
			}
		}
	}
	levels, steps, whole := rampLevels(rng.From, rng.To, rng.Step)
	switch {
	case rng.From <= 0 || rng.To <= 0 || rng.Step <= 0:
		ok = false // reported where decoded
	case rng.To <= rng.From:
		r.problem(rngPath+".to", "a ramp rises: set to above from (for a single level, set concurrency or rate instead)", "ramp to (%v) is not above from (%v)", rng.To, rng.From)
		ok = false
	case !whole:
		r.problem(rngPath+".step", fmt.Sprintf("from %v, steps of %v do not land on %v; choose a step that divides %v", rng.From, rng.Step, rng.To, rng.To-rng.From),
			"(to - from) / step is not a whole number of steps")
		ok = false
	case levels == nil:
		r.problem(rngPath+".step", "use a larger step, or split the ramp into several rows", "the ramp has %d steps, over the limit of %d", steps, MaxRampSteps)
		ok = false
	}
	if dim == ModeConcurrency && m.Concurrency != nil {
		r.problem(m.at("concurrency"), "the ramp sets the users; remove concurrency", "concurrency is both set and ramped")
		ok = false
	}
	if dim == ModeRate && p.Load.Rate > 0 {
		r.problem(m.at("rate")+".per_second", "the ramp sets the rate; keep arrival settings under rate", "rate.per_second is both set and ramped")
		ok = false
	}
	if sw := row.Sweep; sw != nil && (len(sw.Concurrency) > 0 || len(sw.Rate) > 0) {
		key := "concurrency"
		if len(sw.Concurrency) == 0 {
			key = "rate"
		}
		r.problem(rowPath+".sweep."+key, "a ramp already steps the load within the row; sweep input_tokens or output_tokens, or ramp in separate rows",
			"a row cannot both ramp and sweep its load")
		ok = false
	}
	if m.Trace != nil {
		r.problem(path, "a trace fixes its own schedule", "a trace row cannot be ramped")
		ok = false
	}
	if row.Search != nil {
		r.problem(path, "a search finds the load by rows of its own; ramp in a separate row", "a search row cannot also ramp")
		ok = false
	}
	for k, set := range map[string]bool{"requests": m.Requests != nil, "duration": m.Duration != nil} {
		if set {
			r.problem(m.at(k), "a ramp stops after its last step (steps × step_duration); remove it", "%s cannot be set with a ramp", k)
			ok = false
		}
	}
	if m.Repeat != nil && *m.Repeat > 1 {
		r.problem(m.at("repeat"), "run the ramp once, or sweep the levels as separate rows to repeat them", "repeat is not supported with a ramp yet")
		ok = false
	}
	if rp.StepDuration != nil && *rp.StepDuration <= 0 {
		r.problem(path+".step_duration", "e.g. step_duration: 30s", "step_duration must be positive")
		ok = false
	}
	if !ok || rp.StepDuration == nil {
		return
	}
	plan := &RampPlan{Dimension: dim, Levels: levels, StepDuration: *rp.StepDuration}
	if dim == ModeConcurrency {
		p.Load = LoadPlan{Mode: ModeConcurrency, Concurrency: int(levels[len(levels)-1])}
	} else {
		if p.Load.Mode != ModeRate {
			p.Load = LoadPlan{Mode: ModeRate, Arrival: DefaultArrival}
		}
		// The peak rate: what the connection pool and the dispatch-lag
		// limit must be sized for.
		p.Load.Rate = levels[len(levels)-1]
	}
	p.Load.Ramp = plan
	p.Requests = 0
	p.Duration = plan.Total()
}

// rampLevels lists from, from+step, ..., to; whole is false when to is not
// a whole number of steps above from. Past MaxRampSteps only the count is
// returned (levels nil), for the message. Levels are from + i·step rounded
// to 9 significant digits, so that 0.1-sized rate steps do not drift into
// 0.30000000000000004.
func rampLevels(from, to, step float64) (levels []float64, steps int, whole bool) {
	if step <= 0 || to <= from {
		return nil, 0, false
	}
	n := (to - from) / step
	k := math.Round(n)
	if math.Abs(n-k) > 1e-9*math.Max(1, n) {
		return nil, 0, false
	}
	if k+1 > MaxRampSteps {
		return nil, int(min(k+1, math.MaxInt32)), true
	}
	out := make([]float64, int(k)+1)
	for i := range out {
		out[i], _ = strconv.ParseFloat(strconv.FormatFloat(from+float64(i)*step, 'g', 9, 64), 64)
	}
	out[len(out)-1] = to
	return out, len(out), true
}

// describeRamp is the ramp's part of LoadPlan.String.
func describeRamp(l LoadPlan) string {
	s := l.Ramp.String()
	if l.Mode == ModeRate {
		s = strings.Replace(strings.Replace(s, "rate ", l.Arrival+" rate ", 1), " in ", " req/s in ", 1)
		if l.MaxConcurrency > 0 {
			s += fmt.Sprintf(", max %d in flight", l.MaxConcurrency)
		}
	}
	return s
}

// Metrics is the ramp as a row's summary needs it (metrics.Options.Ramp);
// nil for a row without ramp.
func (p *RampPlan) Metrics() *metrics.Ramp {
	if p == nil {
		return nil
	}
	return &metrics.Ramp{Dimension: p.Dimension, Levels: p.Levels, StepNS: int64(p.StepDuration)}
}

// LoadString describes the row's load in words, with its prefill cap:
// "concurrency 64, prefill ≤ 4".
func (r *PlannedRow) LoadString() string {
	s := r.Conversation.loadText(r.Load)
	if r.PrefillConcurrency > 0 {
		s += fmt.Sprintf(", prefill ≤ %d", r.PrefillConcurrency)
	}
	return s
}
