package runner

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"
)

// TestRampSteps: a ramp runs one row whose steps each get a summary of
// their own, offering each step's load: users join step by step (the
// server sees about the step's users in flight), and arrivals come at each
// step's rate (a constant-rate step sends exactly rate × step_duration).
// Warmup runs before the first step and belongs to none.
func TestRampSteps(t *testing.T) {
	p := plan(t, `server: {target: builtin, sim: {preset: fixed, ttft: 10ms, itl: 2ms}}
defaults: {input_tokens: 32, output_tokens: 8, body: {ignore_eos: true}}
rows:
  - {id: users, warmup: 2, ramp: {concurrency: {from: 1, to: 3, step: 1}, step_duration: 500ms}}
  - {id: arrivals, warmup: 3, rate: {arrival: constant}, ramp: {rate: {from: 20, to: 60, step: 20}, step_duration: 500ms}}
`)
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	users, arrivals := res.Summary.Row("users"), res.Summary.Row("arrivals")
	if len(users.Steps) != 3 || len(arrivals.Steps) != 3 {
		t.Fatalf("steps: users %d, arrivals %d; want 3 each", len(users.Steps), len(arrivals.Steps))
	}
	for i, st := range users.Steps {
		want := float64(i + 1)
		if st.Concurrency != i+1 || st.Label != "c="+string(rune('1'+i)) || st.WindowS != 0.5 {
			t.Errorf("users step %d: concurrency %d, label %q, window %v s; want %d, c=%d, 0.5", st.Step, st.Concurrency, st.Label, st.WindowS, i+1, i+1)
		}
		// The first request of a joining user starts at its step's
		// start; ends of the last step's requests run past it. Allow
		// a quarter either way.
		if m := st.InFlight.Mean; math.Abs(m-want) > 0.25*want {
			t.Errorf("users step %d: %.2f in flight on average; want about %v", st.Step, m, want)
		}
		if st.Requests.Completed == 0 || st.Requests.Failed > 0 {
			t.Errorf("users step %d: %+v", st.Step, st.Requests)
		}
		// Throughput is over the step's own half second.
		if got, want := st.Throughput.RequestsPerS, float64(st.Requests.Completed)/0.5; math.Abs(got-want) > 1e-9*want {
			t.Errorf("users step %d: %v req/s; want %d completed ÷ 0.5 s = %v", st.Step, got, st.Requests.Completed, want)
		}
	}
	sent, prevRate := 0, 0.0
	for i, st := range arrivals.Steps {
		want, least := 10*(i+1), 10*(i+1)
		if i == len(arrivals.Steps)-1 {
			// The row stops on the clock when its last step ends: a
			// client running late (say, under -race on a busy machine)
			// may not get its last arrivals out in time.
			least = want - 3
		}
		if st.Rate != float64(20*(i+1)) || st.Requests.Sent < least || st.Requests.Sent > want {
			t.Errorf("arrivals step %d: rate %v, sent %d; want %d, %d", st.Step, st.Rate, st.Requests.Sent, 20*(i+1), want)
		}
		// The rate the client achieved rises with the steps. How close
		// it comes to each step's rate over half a second is the client's
		// timing on this machine (a late first send is caught up in a
		// burst), which the row's own validity checks judge, not this test.
		if got := st.SelfCheck.AchievedRate; !(got > prevRate) {
			t.Errorf("arrivals step %d: dispatched at %.1f req/s, not above the step before (%.1f)", st.Step, got, prevRate)
		}
		prevRate = st.SelfCheck.AchievedRate
		sent += st.Requests.Sent
	}
	if sent != arrivals.Requests.Sent || arrivals.Requests.Warmup != 3 {
		t.Errorf("arrivals: steps sent %d, row %d, warmup %d; want the row's measured requests all in steps, 3 warmup", sent, arrivals.Requests.Sent, arrivals.Requests.Warmup)
	}
	for _, row := range []string{"users", "arrivals"} {
		for _, r := range records(t, res.Dir, row) {
			if r.Warmup != (r.Step == 0) {
				t.Errorf("%s: request %d: warmup %v, step %d; want a step on every measured request only", row, r.Seq, r.Warmup, r.Step)
			}
		}
	}
}

// TestPrefillConcurrency: with prefill_concurrency K, no more than K
// requests are ever between their send and their first token, counted
// from the records' own stamps at every send; the cap binds (some
// requests wait, and the wait is their queue time), in a closed loop and
// an open one.
func TestPrefillConcurrency(t *testing.T) {
	p := plan(t, `server: {target: builtin, sim: {preset: fixed, ttft: 15ms, itl: 2ms}}
defaults: {input_tokens: 32, output_tokens: 6, requests: 30, body: {ignore_eos: true}}
rows:
  - {id: closed, concurrency: 6, prefill_concurrency: 2}
  - {id: open, rate: {per_second: 400, arrival: constant}, prefill_concurrency: 1}
`)
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	for row, k := range map[string]int{"closed": 2, "open": 1} {
		recs := records(t, res.Dir, row)
		type span struct{ from, to int64 }
		var spans []span
		var times []int64
		queued := 0
		for _, r := range recs {
			if r.Error != nil || r.FirstTokenNS == 0 {
				t.Fatalf("%s: request %d has no first token: %+v", row, r.Seq, r.Error)
			}
			spans = append(spans, span{r.StartNS, r.StartNS + r.FirstTokenNS})
			times = append(times, r.StartNS)
			if r.QueueNS > 0 {
				queued++
			}
		}
		slices.Sort(times)
		peak := 0
		for _, at := range times {
			n := 0
			for _, s := range spans {
				if s.from <= at && at < s.to {
					n++
				}
			}
			peak = max(peak, n)
		}
		if peak != k {
			t.Errorf("%s: at most %d requests waited for their first token at once; want exactly the cap, %d", row, peak, k)
		}
		if queued == 0 {
			t.Errorf("%s: no request waited for the gate; the cap of %d should bind", row, k)
		}
		rs := res.Summary.Row(row)
		if rs.Metrics.Queue.Max <= 0 {
			t.Errorf("%s: queue time %+v; want the gate's waits", row, rs.Metrics.Queue)
		}
	}
}
