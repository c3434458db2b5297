package metrics

import (
	"math"
	"testing"
)

// TestRampStepSummaries: a ramped row's measured requests are split by
// the step they were sent in, however long they ran; a step's throughput
// is over its own duration; its in-flight count sees every request the
// server held during it, from whichever step; warmup belongs to no step.
func TestRampStepSummaries(t *testing.T) {
	const s = int64(1e9)
	ramp := &Ramp{Dimension: "concurrency", Levels: []float64{1, 2}, StepNS: s}
	a := NewAggregator(Options{Ramp: ramp})
	rec := func(step int, start, dur int64, ttft int64) *Record {
		return &Record{Step: step, Warmup: step == 0, Stream: true, ScheduledNS: start, StartNS: start, EndNS: dur,
			FirstTokenNS: ttft, LastTokenNS: dur, Events: []int64{ttft, dur}, OutputTokens: Tokens{Requested: 2, Client: 2}}
	}
	// Warmup before the window; step 1 from 1 s: one request of 1.5 s
	// straddling into step 2; step 2 from 2 s: four short requests.
	a.Add(rec(0, 0, s/2, 10e6))
	a.Add(rec(1, s, 3*s/2, 100e6))
	for i := range int64(4) {
		a.Add(rec(2, 2*s+i*s/5, s/10, 20e6))
	}
	sum := a.Summary("r", "r", RowComplete)
	if len(sum.Steps) != 2 {
		t.Fatalf("%d steps; want 2", len(sum.Steps))
	}
	one, two := sum.Steps[0], sum.Steps[1]
	if one.Requests.Sent != 1 || two.Requests.Sent != 4 || sum.Requests.Warmup != 1 || one.Requests.Warmup != 0 {
		t.Errorf("sent %d and %d, warmup %d (step 1: %d); want 1 and 4, the warmup in the row only", one.Requests.Sent, two.Requests.Sent, sum.Requests.Warmup, one.Requests.Warmup)
	}
	if one.Metrics.TTFT.P50 != 100 || two.Metrics.TTFT.P50 != 20 {
		t.Errorf("TTFT p50 %v and %v; want each step's own, 100 and 20", one.Metrics.TTFT.P50, two.Metrics.TTFT.P50)
	}
	if one.WindowS != 1 || one.Throughput.RequestsPerS != 1 || two.Throughput.RequestsPerS != 4 {
		t.Errorf("windows %v s, req/s %v and %v; want 1 s, 1 and 4 (over the step, not the requests' span)", one.WindowS, one.Throughput.RequestsPerS, two.Throughput.RequestsPerS)
	}
	if math.Abs(two.Throughput.OutputTokensPerS-8) > 1e-9 {
		t.Errorf("step 2: %v output tok/s; want 8", two.Throughput.OutputTokensPerS)
	}
	// Step 2's window [2 s, 3 s) holds the straddler until 2.5 s (0.5)
	// and the four 0.1 s requests (0.4).
	if math.Abs(two.InFlight.Mean-0.9) > 1e-6 || two.InFlight.Max != 2 {
		t.Errorf("step 2 in flight %+v; want mean 0.9, max 2", two.InFlight)
	}
	if one.Label != "c=1" || two.Concurrency != 2 || two.StartS != 1 {
		t.Errorf("step 2: label %q, concurrency %d, start %v s; want c=1 (step 1), 2, 1", one.Label, two.Concurrency, two.StartS)
	}
}
