package engine

import (
	"math/rand/v2"
	"testing"
	"time"
)

// loadResult is what a virtual closed-loop run measured, in the units the
// published tables use.
type loadResult struct {
	throughput float64       // output tokens/s delivered inside the window
	ttft       time.Duration // mean
	itl        time.Duration // mean gap between consecutive tokens of a request
	completed  int           // requests finished inside the window
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
		tokens          int
		ttftSum, itlSum time.Duration
		ttftN, itlN     int
		completed       int
	)
	var send func()
	send = func() {
		prompt := make([]int, isl)
		for i := range prompt {
			prompt[i] = rng.IntN(150000)
		}
		start := c.Now()
		var last time.Duration
		r := &Request{Prompt: prompt, Output: osl}
		r.Deliver = func(k int, at time.Duration) {
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
					completed++
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
	res := loadResult{throughput: float64(tokens) / window.Seconds(), completed: completed}
	if ttftN > 0 {
		res.ttft = ttftSum / time.Duration(ttftN)
	}
	if itlN > 0 {
		res.itl = itlSum / time.Duration(itlN)
	}
	return res
}
