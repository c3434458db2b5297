package metrics

import (
	"strconv"

	"github.com/infermatrix/infermatrix/metrics/samples"
)

// Ramp is a ramped row's steps, as the summary needs them: the load of
// each step and how long each lasts (schema.RampPlan, which this package
// cannot import).
type Ramp struct {
	// Dimension is "concurrency" or "rate".
	Dimension string
	Levels    []float64
	StepNS    int64
	// Share is the part of each step's load the run offered: 1/N for one
	// shard of N (run --shard), whose rate steps the self-check then holds
	// to their share of the rate; 0 means the whole load. Levels (and so
	// the steps' labels) stay the row's, as the plan and its rules name
	// them.
	Share float64
}

// StepSummary is one step of a ramped row, summarised like a sweep point:
// the step's own latency distributions, counts, errors, throughput and
// goodput, by the requests that belong to it.
//
// A request belongs to the step it was sent in (Record.Step, stamped by
// the runner when it dispatched the request: a closed-loop user's send,
// an open-loop arrival's due time), whenever it ends: a request that
// straddles two steps counts in the first. The step's throughputs divide
// by the step's own duration (step_duration), not by the span from its
// first send to its last end, which would run into the next step: they
// are the completions of the step's requests per second of the step,
// which in a steady state is the rate the step served. The in-flight
// figures count every request in flight during the step's window, from
// whichever step, since that is the load the server saw.
type StepSummary struct {
	// Step is the step's number, from 1; Label names its load as a sweep
	// names its points (c=8, r=2.5).
	Step  int    `json:"step"`
	Label string `json:"label"`
	// Concurrency or Rate is the step's offered load.
	Concurrency int     `json:"concurrency,omitempty"`
	Rate        float64 `json:"rate,omitempty"`
	// StartS is when the step began, in seconds from the start of the
	// row's measured window; the step lasts the summary's WindowS.
	StartS float64 `json:"start_s"`
	RowSummary
}

// Load is the step's offered load: users, or requests per second.
func (s *StepSummary) Load() float64 {
	if s.Concurrency > 0 {
		return float64(s.Concurrency)
	}
	return s.Rate
}

// rampSteps holds a ramped row's per-step aggregators.
type rampSteps struct {
	ramp  *Ramp
	steps []*Aggregator
}

func newRampSteps(opts Options, store *samples.Store) *rampSteps {
	rs := &rampSteps{ramp: opts.Ramp}
	for _, lv := range opts.Ramp.Levels {
		o := opts
		o.Ramp = nil
		o.Timeslice = 0
		if opts.Ramp.Dimension == "rate" {
			o.RequestedRate = lv
			if sh := opts.Ramp.Share; sh > 0 {
				o.RequestedRate = lv * sh
			}
		}
		rs.steps = append(rs.steps, newAggregatorIn(o, store))
	}
	return rs
}

// add folds a measured record into its step; a record without a step
// (warmup, or a record from before the ramp began) is the row's only.
func (rs *rampSteps) add(r *Record) {
	if r.Warmup || r.Step < 1 || r.Step > len(rs.steps) {
		return
	}
	rs.steps[r.Step-1].Add(r)
}

// summaries summarises each step. origin is the start of the row's
// measured window (the first measured request's scheduled send, in ns
// from the row's start), from which step k starts (k−1)·step_duration
// later; parent supplies the in-flight counts and the client's load.
func (rs *rampSteps) summaries(id, base, status string, origin int64, parent *Aggregator) []StepSummary {
	out := make([]StepSummary, 0, len(rs.steps))
	d := rs.ramp.StepNS
	for i, agg := range rs.steps {
		if parent.load != nil {
			l := *parent.load
			agg.load = &l
		}
		st := StepSummary{Step: i + 1, Label: rampLabel(rs.ramp.Dimension, rs.ramp.Levels[i]), StartS: float64(int64(i)*d) / 1e9}
		if rs.ramp.Dimension == "rate" {
			st.Rate = rs.ramp.Levels[i]
		} else {
			st.Concurrency = int(rs.ramp.Levels[i])
		}
		sum := agg.Summary(id, base, status)
		sum.Timeslices = Timeslices{}
		// Throughputs over the step's own duration: scale each by the
		// window it was computed over, so that every throughput figure
		// (whatever the row's API adds) moves alike.
		if w := sum.WindowS; w > 0 && d > 0 {
			f := w / (float64(d) / 1e9)
			t := &sum.Throughput
			t.RequestsPerS *= f
			t.OutputTokensPerS *= f
			t.InputTokensPerS *= f
			t.TotalTokensPerS *= f
			t.InputsPerS *= f
			sum.Goodput.RequestsPerS *= f
		}
		if d > 0 {
			sum.WindowS = float64(d) / 1e9
			from := origin + int64(i)*d
			sum.InFlight = parent.inFlight(from, from+d)
		}
		Price(&sum, parent.opts.Pricing)
		st.RowSummary = sum
		out = append(out, st)
	}
	return out
}

// rampLabel names a level the way a sweep names a point: c=8, r=2.5.
func rampLabel(dim string, v float64) string {
	k := "c"
	if dim == "rate" {
		k = "r"
	}
	return k + "=" + strconv.FormatFloat(v, 'f', -1, 64)
}
