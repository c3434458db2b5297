package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// loadResult is what a virtual closed-loop run measured, in the units the
// published tables use (vllm bench serve's).
type loadResult struct {
	throughput float64       // output tokens/s delivered inside the window
	ttft       time.Duration // mean
	itl        time.Duration // mean gap between consecutive tokens of a request
	completed  int           // requests finished inside the window

	// Per request, for requests that started after the warm-up and
	// finished inside the window: time to first token, mean time per
	// output token after the first (TPOT), and output tokens ÷ end-to-end
	// latency (the speed one user sees).
	ttfts   []time.Duration
	tpots   []time.Duration
	perUser []float64
}

// perUserMean is the mean speed one user sees, output tokens/s.
func (r loadResult) perUserMean() float64 {
	if len(r.perUser) == 0 {
		return 0
	}
	s := 0.0
	for _, v := range r.perUser {
		s += v
	}
	return s / float64(len(r.perUser))
}

// quantile is the q-quantile of xs by the nearest-rank method, as vllm bench
// serve's numpy percentiles are close enough to for ±30% checks.
func quantile(xs []time.Duration, q float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(q*float64(len(s)-1) + 0.5)
	return s[min(max(i, 0), len(s)-1)]
}

// closedLoop runs users concurrent clients on the virtual clock, each
// sending a request of isl random prompt tokens and osl output tokens and
// the next as soon as the last token arrives, as `vllm bench serve
// --max-concurrency` does. Metrics cover requests that start after warm and
// tokens delivered before warm+window, the steady state.
func closedLoop(t testing.TB, cfg Config, users, isl, osl int, warm, window time.Duration) loadResult {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	end := warm + window
	var (
		res             loadResult
		tokens          int
		ttftSum, itlSum time.Duration
		ttftN, itlN     int
	)
	var send func()
	send = func() {
		prompt := make([]int, isl)
		for i := range prompt {
			prompt[i] = rng.IntN(150000)
		}
		start := c.Now()
		var first, last time.Duration
		r := &Request{Prompt: prompt, Output: osl}
		r.Deliver = func(k int, at time.Duration) {
			if k == 0 {
				first = at
			}
			if at > warm && at <= end {
				tokens++
			}
			if start >= warm && at <= end {
				if k == 0 {
					ttftSum += at - start
					ttftN++
				} else {
					itlSum += at - last
					itlN++
				}
				if k == osl-1 {
					res.completed++
					res.ttfts = append(res.ttfts, first-start)
					if osl > 1 {
						res.tpots = append(res.tpots, (at-first)/time.Duration(osl-1))
					}
					res.perUser = append(res.perUser, float64(osl)/(at-start).Seconds())
				}
			}
			last = at
			if k == osl-1 && at < end {
				send()
			}
		}
		c.Submit(r)
	}
	for range users {
		send()
	}
	c.RunUntil(end)
	res.throughput = float64(tokens) / window.Seconds()
	if ttftN > 0 {
		res.ttft = ttftSum / time.Duration(ttftN)
	}
	if itlN > 0 {
		res.itl = itlSum / time.Duration(itlN)
	}
	return res
}

// burstResult is what a virtual burst measured, as vllm bench serve reports
// a run of a fixed number of prompts: output tokens over the benchmark's
// duration, from the first send to the last token.
type burstResult struct {
	duration   time.Duration // first send to last token
	tokens     int           // output tokens delivered
	throughput float64       // tokens ÷ duration, output tokens/s
	ttft       time.Duration // mean over every request
}

// burst runs users clients on the virtual clock, all starting at time 0,
// each sending perUser requests of isl random prompt tokens and osl output
// tokens back to back (the next when the last token of the previous
// arrives), as `vllm bench serve --num-prompts users×perUser
// --max-concurrency users --request-rate inf` does. It runs until the last
// request finishes, so its figures include the ramp-up and the drain that a
// steady-state window leaves out.
func burst(t testing.TB, cfg Config, users, perUser, isl, osl int) burstResult {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var (
		res     burstResult
		last    time.Duration
		ttftSum time.Duration
		done    int
	)
	var send func(left int)
	send = func(left int) {
		prompt := make([]int, isl)
		for i := range prompt {
			prompt[i] = rng.IntN(150000)
		}
		start := c.Now()
		r := &Request{Prompt: prompt, Output: osl}
		r.Deliver = func(k int, at time.Duration) {
			res.tokens++
			last = max(last, at)
			if k == 0 {
				ttftSum += at - start
			}
			if k == osl-1 {
				done++
				if left > 1 {
					send(left - 1)
				}
			}
		}
		c.Submit(r)
	}
	for range users {
		send(perUser)
	}
	// Far past any plausible end: a burst that has not drained by then is
	// a failure, not a figure.
	limit := 10 * time.Minute
	c.RunUntil(limit)
	if want := users * perUser; done != want {
		t.Fatalf("burst: %d of %d requests finished within %v of virtual time", done, want, limit)
	}
	res.duration = last
	res.throughput = float64(res.tokens) / last.Seconds()
	res.ttft = ttftSum / time.Duration(done)
	return res
}
