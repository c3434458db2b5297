package sim

import (
	"context"
	"time"
)

// timingModel is the seam between the protocol layer and the model of how
// fast the server generates. The protocol layer knows requests and bytes;
// the timing model knows only token counts and time.
//
// The seam hands out a per-request clock with a blocking wait, rather than a
// formula for token times, because the engine model that replaces the
// constant one will decide token times as it goes: a token's time will depend
// on the batch it lands in, which depends on the requests that arrive later.
type timingModel interface {
	// admit registers a request that arrived at arrival, with its prompt
	// and output token counts, and returns the clock that paces its
	// output. The caller must release the clock when the request ends.
	admit(arrival time.Time, promptTokens, outputTokens int) tokenClock
}

// tokenClock paces the output tokens of one request. It is used by one
// goroutine, the request's handler.
type tokenClock interface {
	// wait blocks until output token k (counting from 0) has been
	// emitted, or until ctx is done, in which case it returns ctx's
	// error. Successive calls pass non-decreasing k and may skip: a
	// non-streaming response waits for its first token and then its
	// last.
	wait(ctx context.Context, k int) error
	// release tells the model that the request is over, finished or
	// abandoned, so that it can free what it holds for it.
	release()
}

// constantTiming emits a request's first token TTFT after its arrival and
// each later token ITL after the one before, whatever else is running. It is
// the thin first model: enough for a realistic protocol, with no contention.
type constantTiming struct {
	ttft, itl time.Duration
}

func (m constantTiming) admit(arrival time.Time, _, _ int) tokenClock {
	return &constantClock{first: arrival.Add(m.ttft), itl: m.itl}
}

// constantClock computes each token's absolute deadline from the arrival
// time, so that the lateness of one wakeup does not delay every token after
// it. It keeps one timer for the whole stream to avoid allocating per token.
type constantClock struct {
	first time.Time // when token 0 is due; carries a monotonic reading
	itl   time.Duration
	timer *time.Timer
}

func (c *constantClock) wait(ctx context.Context, k int) error {
	d := time.Until(c.first.Add(time.Duration(k) * c.itl))
	if d <= 0 {
		// Already due, as when the server runs behind or ITL is tiny:
		// skip the timer so that fast configurations stay cheap.
		return ctx.Err()
	}
	if c.timer == nil {
		c.timer = time.NewTimer(d)
	} else {
		// Since Go 1.23 a Reset timer never delivers a stale value, so no
		// drain is needed.
		c.timer.Reset(d)
	}
	select {
	case <-c.timer.C:
		return nil
	case <-ctx.Done():
		c.timer.Stop()
		return ctx.Err()
	}
}

func (c *constantClock) release() {
	if c.timer != nil {
		c.timer.Stop()
	}
}
