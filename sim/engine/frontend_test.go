package engine

import (
	"testing"
	"time"
)

// TestRequestCostGrowsWithPrompt checks that the front end's work on a
// request grows with its prompt: request_cost_per_token × prompt tokens is
// added to time to first token, exactly, on an otherwise idle deployment.
func TestRequestCostGrowsWithPrompt(t *testing.T) {
	base := preset(t, "llama-3.1-8b-h100").PhysicsOnly()
	withCost := base
	withCost.FrontEnd.RequestCost = 100 * time.Microsecond
	withCost.FrontEnd.RequestCostPerToken = 2 * time.Microsecond
	for _, prompt := range []int{100, 4000} {
		t0, _, err := Unloaded(base, prompt, 1)
		if err != nil {
			t.Fatal(err)
		}
		t1, _, err := Unloaded(withCost, prompt, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := t1-t0, 100*time.Microsecond+time.Duration(prompt)*2*time.Microsecond; got != want {
			t.Errorf("prompt %d: the front end added %v to TTFT, want %v", prompt, got, want)
		}
	}
}

// TestFrontEndSerializesRequests checks that one front end serves requests
// one at a time: of two requests arriving together, the second reaches the
// engine only after the front end's work on both.
func TestFrontEndSerializesRequests(t *testing.T) {
	cfg := preset(t, "llama-3.1-8b-h100").PhysicsOnly()
	cfg.FrontEnd.RequestCost = 10 * time.Millisecond
	c := newCluster(t, cfg)
	a, b := submit(c, ids(0, 64), 1), submit(c, ids(1000, 64), 1)
	drain(c)
	if a.at[0] < 10*time.Millisecond || a.at[0] >= 20*time.Millisecond {
		t.Errorf("first request's first token at %v, want after its own 10ms of front-end work and before the second's", a.at[0])
	}
	if b.at[0] < 20*time.Millisecond {
		t.Errorf("second request's first token at %v, want after both requests' 10ms of front-end work", b.at[0])
	}
}

// TestBusyOutputDelaysRequests checks the back-pressure: the front end that
// turns tokens into stream chunks is the one that takes new requests, so a
// request arriving behind a large step's tokens waits for them.
func TestBusyOutputDelaysRequests(t *testing.T) {
	ttftBehind := func(tokenCost time.Duration) time.Duration {
		cfg := preset(t, "llama-3.1-8b-h100").PhysicsOnly()
		cfg.FrontEnd.TokenCost = tokenCost
		cfg.FrontEnd.RequestCost = time.Microsecond
		c := newCluster(t, cfg)
		var late *trace
		var sentAt time.Duration
		for i := range 20 {
			tr := submit(c, ids(i*1000, 32), 2)
			if i == 0 {
				tr.Deliver = func(k int, at time.Duration) {
					tr.at = append(tr.at, at)
					if k == 0 && late == nil {
						// The other 19 first tokens of this step are
						// still queued at the front end.
						sentAt = at
						late = submit(c, ids(50000, 32), 1)
					}
				}
			}
		}
		drain(c)
		return late.at[0] - sentAt
	}
	quick, busy := ttftBehind(0), ttftBehind(500*time.Microsecond)
	// 19 tokens at 0.5 ms are still ahead of the new request.
	if busy-quick < 19*500*time.Microsecond {
		t.Errorf("TTFT behind a busy output path %v, idle %v: want at least 9.5ms more", busy, quick)
	}
}

// TestLatencySpreadHeavyTail checks the per-request log-normal factor on the
// request path: at light load TTFT's p99/p50 approaches e^(2.33σ), and the
// mean stays that of the unscaled path (the factor is mean-one).
func TestLatencySpreadHeavyTail(t *testing.T) {
	cfg := preset(t, "llama-3.1-8b-h100").PhysicsOnly()
	cfg.FrontEnd.RequestLatency = 100 * time.Millisecond
	cfg.FrontEnd.LatencySpread = 0.44
	c := newCluster(t, cfg)
	var ttfts []time.Duration
	var sum time.Duration
	for i := range 4000 {
		at := time.Duration(i) * 50 * time.Millisecond
		c.RunUntil(at)
		r := &Request{Prompt: ids(i*100, 16), Output: 1}
		r.Deliver = func(_ int, got time.Duration) { ttfts = append(ttfts, got-at); sum += got - at }
		c.Submit(r)
	}
	drain(c)
	ratio := float64(quantile(ttfts, 0.99)) / float64(quantile(ttfts, 0.5))
	if ratio < 2.4 || ratio > 3.2 {
		t.Errorf("TTFT p99/p50 %.2f, want about e^(2.33 × 0.44) = 2.78", ratio)
	}
	if mean := sum / time.Duration(len(ttfts)); mean < 95*time.Millisecond || mean > 110*time.Millisecond {
		t.Errorf("mean TTFT %v, want about the 100ms path plus a prefill", mean)
	}
}
