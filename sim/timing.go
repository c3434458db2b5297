package sim

import (
	"context"
	"time"
)

// timingModel is the seam between the protocol layer and the model of how
// fast the server generates. The protocol layer knows requests and bytes;
// the timing model knows only tokens and time.
//
// The seam hands out a per-request clock with a blocking wait, rather than a
// formula for token times, because the engine model decides token times as
// it goes: a token's time depends on the batch it lands in, which depends on
// the requests that arrive later.
type timingModel interface {
	// admit registers a request and returns the clock that paces its
	// output. The caller must release the clock when the request ends.
	admit(a admission) tokenClock
	// stats reports the model's scheduler state for /metrics.
	stats() modelStats
	// close stops whatever the model runs in the background. Clocks
	// still waiting return an error.
	close()
}

// admission is what the timing model learns about a request when it arrives.
type admission struct {
	arrival time.Time
	// prompt holds the prompt's token ids. The engine hashes them in
	// blocks for its prefix cache, so two prompts sharing a prefix share
	// cached blocks exactly when their token ids agree.
	prompt []int
	// output is the number of tokens the request will generate, decided
	// at parse time (max_tokens, or earlier with a seeded EOS).
	output int
	// generated, when set, holds the ids of the tokens the request will
	// generate (its text is drawn before it is admitted), so that the
	// engine caches its reply's blocks as vLLM does: a chat's next turn,
	// whose prompt is this prompt and this reply, then hits both.
	generated []int
}

// modelStats is a snapshot of the scheduler, for /metrics. The fixed model
// has no scheduler and reports zeros except for what the handlers count.
type modelStats struct {
	running, waiting      int
	kvUsage               float64 // fraction of KV blocks in use, 0..1
	prefixQueries         uint64  // prompt tokens looked up in the prefix cache
	prefixHits            uint64  // of which found cached
	preemptions           uint64
	stepLateness          []float64 // recent step-deadline lateness samples, seconds (real-time engine only)
	stepLatenessSupported bool
	// queueTimeSupported says the model knows each request's time in a
	// queue before it was first scheduled (an engine; the fixed model has
	// no queue, and serves no queue-time histogram).
	queueTimeSupported bool
	// gpus are the simulated GPUs' readings; none for a model without
	// GPUs (the fixed model, or a GPU without telemetry figures).
	gpus []gpuReading
}

// queueTimer is implemented by the clocks of models that queue requests:
// queued reports how long the request waited before it was first
// scheduled, once that is known (by its first token).
type queueTimer interface {
	queued() (time.Duration, bool)
}

// tokenClock paces the output tokens of one request. It is used by one
// goroutine, the request's handler.
type tokenClock interface {
	// wait blocks until output token k (counting from 0) has been
	// emitted, or until ctx is done, in which case it returns ctx's
	// error. It returns the time the model scheduled token k for, so
	// that the handler can measure how late its flush was. Successive
	// calls pass non-decreasing k and may skip: a non-streaming
	// response waits for its first token and then its last.
	wait(ctx context.Context, k int) (due time.Time, err error)
	// cached returns how many of the request's prompt tokens the model
	// found in its prefix cache when it first admitted the request, as
	// vLLM V1 reports them: a readmission after a preemption, which may
	// find the request's own blocks, does not change it. A model without
	// a prefix cache returns 0.
	cached() int
	// release tells the model that the request is over, finished or
	// abandoned, so that it can free what it holds for it.
	release()
}

// constantTiming emits a request's first token TTFT after its arrival and
// each later token ITL after the one before, whatever else is running. It is
// the "fixed" preset: no batching and no contention, for testing clients
// against known latencies.
type constantTiming struct {
	ttft, itl time.Duration
}

func (m constantTiming) admit(a admission) tokenClock {
	return &constantClock{first: a.arrival.Add(m.ttft), itl: m.itl}
}

func (constantTiming) stats() modelStats { return modelStats{} }
func (constantTiming) close()            {}

// constantClock computes each token's absolute deadline from the arrival
// time, so that the lateness of one wakeup does not delay every token after
// it. It keeps one timer for the whole stream to avoid allocating per token.
type constantClock struct {
	first time.Time // when token 0 is due; carries a monotonic reading
	itl   time.Duration
	timer *time.Timer
}

func (c *constantClock) wait(ctx context.Context, k int) (time.Time, error) {
	due := c.first.Add(time.Duration(k) * c.itl)
	d := time.Until(due)
	if d <= 0 {
		// Already due, as when the server runs behind or ITL is tiny:
		// skip the timer so that fast configurations stay cheap.
		return due, ctx.Err()
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
		return due, nil
	case <-ctx.Done():
		c.timer.Stop()
		return due, ctx.Err()
	}
}

// cached is 0: the fixed model has no prefix cache.
func (*constantClock) cached() int { return 0 }

func (c *constantClock) release() {
	if c.timer != nil {
		c.timer.Stop()
	}
}
