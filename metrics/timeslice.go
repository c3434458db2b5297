package metrics

import (
	"math"

	"github.com/infermatrix/infermatrix/metrics/samples"
)

// MaxTimeslices bounds the slices of one row. A row longer than this many
// slices doubles the width until it fits, so that a day-long row costs as
// little memory and summary space as a short one, and a slice still shows
// how the row moved over time.
const MaxTimeslices = 1024

// Timeslices are a row's measured window cut into slices of equal width, to
// show whether the row held steady: a warm-up ramp, a server falling behind
// an arrival rate, or a stall all hide inside a row's percentiles.
type Timeslices struct {
	// WidthS is the slice width used, in seconds: report.timeslice, or a
	// power-of-two multiple of it for a row longer than MaxTimeslices.
	WidthS float64     `json:"width_s"`
	Slices []Timeslice `json:"slices"`
}

// Timeslice is one slice. Slices are aligned to multiples of the width from
// the start of the row (the clock StartNS counts on), so they line up across
// rows; the first and last are cut to the measured window.
type Timeslice struct {
	StartS float64 `json:"start_s"` // from the start of the row
	EndS   float64 `json:"end_s"`
	// Completed and Errors count measured requests by the time they ended:
	// successes, and failures other than deliberate cancellations.
	Completed int `json:"completed"`
	Errors    int `json:"errors"`
	// OutputTokens are the output tokens of successful requests that
	// arrived in the slice, by the arrival time of the events carrying them.
	OutputTokens     float64 `json:"output_tokens"`
	RequestsPerS     float64 `json:"requests_per_s"`
	OutputTokensPerS float64 `json:"output_tokens_per_s"`
	// TTFT holds the TTFT of the successful streamed requests whose first
	// token arrived in the slice: when the user waited for it.
	TTFT Dist `json:"ttft_ms"`
}

// slicer accumulates timeslices as records arrive, in completion order.
// The window's first dispatch is known only at the end (a request sent
// first may finish last), so slots are aligned to the row's clock and cut to
// the window when the summary is made.
type slicer struct {
	store *samples.Store // where the slots' TTFT samples spill
	limit int            // a slot's TTFT samples in memory before they spill
	width int64          // ns
	base  int64          // slot index of slots[0]
	slots []slot
}

type slot struct {
	completed, errors int
	tokens            float64
	ttft              *samples.Column // nil until the slot has one
}

func (s *slot) merge(o *slot) {
	s.completed += o.completed
	s.errors += o.errors
	s.tokens += o.tokens
	if o.ttft == nil {
		return
	}
	if s.ttft == nil {
		s.ttft = o.ttft
		return
	}
	s.ttft.Merge(o.ttft)
}

func newSlicer(width int64, store *samples.Store, limit int) *slicer {
	if width <= 0 {
		width = 1e9
	}
	return &slicer{width: width, store: store, limit: limit}
}

// slotLimit is the TTFT samples a timeslice keeps in memory before they
// spill, for a row whose metrics keep limit: a sixteenth, so that the
// MaxTimeslices slots together hold at most 64 times a metric's limit.
func slotLimit(limit int) int {
	if limit <= 0 {
		limit = samples.DefaultLimit
	}
	return max(1, limit/16)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// at returns the slot holding time t (ns from the row start), widening the
// slices first if t would take the row past MaxTimeslices. The pointer is
// valid until the next call.
func (s *slicer) at(t int64) *slot {
	for {
		i := floorDiv(t, s.width)
		if len(s.slots) == 0 {
			s.base = i
			s.slots = append(s.slots, slot{})
			return &s.slots[0]
		}
		last := s.base + int64(len(s.slots)) - 1
		lo, hi := min(i, s.base), max(i, last)
		if hi-lo+1 > MaxTimeslices {
			s.coarsen()
			continue
		}
		if i < s.base {
			s.slots = append(make([]slot, s.base-i), s.slots...)
			s.base = i
		} else if i > last {
			s.slots = append(s.slots, make([]slot, i-last)...)
		}
		return &s.slots[i-s.base]
	}
}

// coarsen doubles the width, merging slots pairwise. Widths stay aligned
// to multiples of the original from the row start.
func (s *slicer) coarsen() {
	s.width *= 2
	nb := floorDiv(s.base, 2)
	out := make([]slot, floorDiv(s.base+int64(len(s.slots))-1, 2)-nb+1)
	for k := range s.slots {
		out[floorDiv(s.base+int64(k), 2)-nb].merge(&s.slots[k])
	}
	s.base, s.slots = nb, out
}

// add folds in one measured record. Requests count where they ended;
// tokens where the events carrying them arrived. Each successful request's
// output token count (the count every other metric uses) is spread over its
// text events in proportion to the tokens each event carried
// (Record.EventTokens), or evenly where those were not counted, so that the
// slices' tokens add up to the row's. A response without events (not
// streamed) delivers all its tokens at its end.
func (s *slicer) add(r *Record) {
	end := r.StartNS + r.EndNS
	if !r.OK() {
		if !r.Canceled() {
			s.at(end).errors++
		}
		return
	}
	s.at(end).completed++
	if r.Stream && r.FirstTokenNS > 0 {
		sl := s.at(r.StartNS + r.FirstTokenNS)
		if sl.ttft == nil {
			c := samples.NewColumn(s.store, s.limit)
			sl.ttft = &c
		}
		sl.ttft.Add(ms(r.FirstTokenNS))
	}
	n := float64(r.OutputTokens.Count())
	if n == 0 {
		return
	}
	if len(r.Events) == 0 {
		s.at(end).tokens += n
		return
	}
	var weights float64
	if len(r.EventTokens) == len(r.Events) {
		for _, w := range r.EventTokens {
			weights += float64(w)
		}
	}
	// Events arrive in order, so the slot is looked up again only when an
	// event leaves the current one: no division per event.
	var sl *slot
	var from, to int64
	for i, e := range r.Events {
		share := n / float64(len(r.Events))
		if weights > 0 {
			share = n * float64(r.EventTokens[i]) / weights
		}
		if t := r.StartNS + e; sl == nil || t < from || t >= to {
			sl = s.at(t)
			from = floorDiv(t, s.width) * s.width
			to = from + s.width
		}
		sl.tokens += share
	}
}

// summary cuts the slots to the measured window [first, last] (ns from the
// row start). Every time a record contributes lies inside it: events and
// ends come after their request's dispatch and no later than the last end.
func (s *slicer) summary(first, last int64) Timeslices {
	ts := Timeslices{WidthS: float64(s.width) / 1e9}
	if len(s.slots) == 0 || last <= first {
		return ts
	}
	get := func(k int64) slot {
		if k < s.base || k >= s.base+int64(len(s.slots)) {
			return slot{}
		}
		return s.slots[k-s.base]
	}
	w := s.width
	lo, hi := floorDiv(first, w), floorDiv(last, w)
	// The window's very end opens a slot of no width; what ended exactly
	// there belongs to the slice before.
	closing := hi > lo && hi*w == last
	if closing {
		hi--
	}
	ts.Slices = make([]Timeslice, 0, hi-lo+1)
	for k := lo; k <= hi; k++ {
		sl := get(k)
		if closing && k == hi {
			tail := get(k + 1)
			sl.merge(&tail)
		}
		start, end := max(k*w, first), min((k+1)*w, last)
		t := Timeslice{
			StartS: float64(start) / 1e9, EndS: float64(end) / 1e9,
			Completed: sl.completed, Errors: sl.errors,
			OutputTokens: round6(sl.tokens),
		}
		if sl.ttft != nil {
			// A spill file that cannot be read back leaves the
			// slice's TTFT absent.
			t.TTFT, _ = columnDist(sl.ttft, nil)
		}
		t.TTFT.values, t.TTFT.col = nil, nil // the slice's statistics are all it needs
		if d := float64(end-start) / 1e9; d > 0 {
			t.RequestsPerS = round6(float64(sl.completed) / d)
			t.OutputTokensPerS = round6(sl.tokens / d)
		}
		ts.Slices = append(ts.Slices, t)
	}
	return ts
}

// round6 keeps six decimals, as summaries write every statistic, so that
// shares of tokens do not print as 33.333333333333336.
func round6(v float64) float64 { return math.Round(v*1e6) / 1e6 }
