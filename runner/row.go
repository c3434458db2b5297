package runner

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

// errGraceOver cancels requests still running when a stopped row's grace
// period ends.
var errGraceOver = errors.New("cancelled at the end of the grace period")

// rowRun executes one planned row.
type rowRun struct {
	row    *schema.PlannedRow
	index  int
	runID  string
	client *client
	wl     *workload
	urls   []string
	out    chan<- *metrics.Record

	start time.Time

	mu           sync.Mutex
	seq          int64
	measured     int
	measureStart time.Time
	stopped      chan struct{} // closed when dispatching stops
	stopReason   string
	cancelRng    *rand.Rand
}

// ticket is one dispatch decision.
type ticket struct {
	seq    int64
	warmup bool
}

// take decides whether another request may be dispatched now, and whether
// it is warmup. It is the single place the row's stopping rules live, so
// that closed- and open-loop rows stop alike.
func (rr *rowRun) take(now time.Time) (ticket, bool) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.stopReason != "" {
		return ticket{}, false
	}
	r := rr.row
	warm := rr.seq < int64(r.Warmup+rr.primeCount()) ||
		(r.WarmupDuration > 0 && now.Sub(rr.start) < r.WarmupDuration.D())
	if !warm {
		if rr.measured == 0 {
			rr.measureStart = now
		}
		if r.Requests > 0 && rr.measured >= r.Requests {
			rr.stop("requests")
			return ticket{}, false
		}
		if r.Duration > 0 && now.Sub(rr.measureStart) >= r.Duration.D() {
			rr.stop("duration")
			return ticket{}, false
		}
		rr.measured++
	}
	t := ticket{seq: rr.seq, warmup: warm}
	rr.seq++
	return t, true
}

// stop ends dispatching; rr.mu must be held.
func (rr *rowRun) stop(reason string) {
	if rr.stopReason == "" {
		rr.stopReason = reason
		close(rr.stopped)
	}
}

func (rr *rowRun) primeCount() int {
	if rr.wl == nil {
		return 0
	}
	return len(rr.wl.prefixes) * boolInt(rr.row.Prefix != nil && rr.row.Prefix.Warm)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// prepared is a request ready to send: its body is built before its
// scheduled time, so prompt synthesis never delays dispatch.
type prepared struct {
	t       ticket
	call    *call
	primeOf int // >= 0 for a warm-prefix priming request
}

// prepare builds the request for a ticket.
func (rr *rowRun) prepare(t ticket, scheduled time.Duration) (*call, error) {
	r := rr.row
	rec := &metrics.Record{
		ID:          fmt.Sprintf("%s-%d-%d", rr.runID, rr.index, t.seq),
		Row:         r.ID,
		Seq:         t.seq,
		Warmup:      t.warmup,
		URL:         rr.urls[int(t.seq)%len(rr.urls)],
		Stream:      r.Streaming,
		ScheduledNS: scheduled.Nanoseconds(),
	}
	var body []byte
	var err error
	if p := rr.primeCount(); int(t.seq) < p {
		// Priming: each warm prefix once, generating a single token.
		body, err = rr.wl.body(prompt{text: rr.wl.prefixes[t.seq], maxTokens: 1}, r.Streaming)
		rec.InputTokens.Requested = rr.wl.prefixN
		rec.InputTokens.Client = rr.wl.prefixN
		rec.OutputTokens.Requested = 1
	} else {
		p := rr.wl.prompt(t.seq)
		body, err = rr.wl.body(p, r.Streaming)
		rec.InputTokens.Requested = p.requested
		rec.InputTokens.Client = p.inTokens
		rec.OutputTokens.Requested = p.maxTokens
	}
	if err != nil {
		return nil, err
	}
	return &call{url: rec.URL, body: body, rec: rec}, nil
}

// fire sends one request under the in-flight context and hands its record
// to the collector.
func (rr *rowRun) fire(inflight context.Context, cl *call) {
	ctx, cancel := context.WithTimeoutCause(inflight, rr.row.Timeout.D(), errRequestTimeout)
	defer cancel()
	if c := rr.row.Cancel; c != nil && !cl.rec.Warmup && rr.drawCancel(c.Fraction) {
		cctx, ccancel := context.WithCancelCause(ctx)
		defer ccancel(nil)
		cl.cancelAfter = c.After.D()
		cl.cancel = func() { ccancel(errCanceled) }
		ctx = cctx
	}
	rr.client.do(ctx, cl)
	rr.out <- cl.rec
}

// drawCancel decides, reproducibly, whether a request is one of the
// cancelled fraction.
func (rr *rowRun) drawCancel(fraction float64) bool {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return rr.cancelRng.Float64() < fraction
}

// run executes the row. It returns when every dispatched request has ended
// and been handed to the collector; interrupted reports whether ctx ended
// it early.
func (rr *rowRun) run(ctx context.Context) (interrupted bool, err error) {
	rr.start = time.Now()
	rr.stopped = make(chan struct{})
	rr.client.rowStart = rr.start
	rr.cancelRng = rand.New(rand.NewPCG(rr.wl.seed, 0xca9ce1))

	// Requests in flight outlive the dispatch context: when dispatching
	// stops they get the grace period, then are cancelled.
	inflight, cancelInflight := context.WithCancelCause(context.Background())
	defer cancelInflight(nil)

	var wg sync.WaitGroup
	var prepErr error
	var prepOnce sync.Once
	fail := func(e error) {
		prepOnce.Do(func() { prepErr = e })
		rr.mu.Lock()
		rr.stop("error")
		rr.mu.Unlock()
	}

	// Warm prefixes are sent first, one at a time, each waited for, so the
	// server's prefix cache holds every one before any other request.
	for i := 0; i < rr.primeCount() && ctx.Err() == nil; i++ {
		t, ok := rr.take(time.Now())
		if !ok {
			break
		}
		cl, err := rr.prepare(t, time.Since(rr.start))
		if err != nil {
			return false, err
		}
		rr.fire(inflight, cl)
	}

	switch rr.row.Load.Mode {
	case schema.ModeConcurrency:
		for w := 0; w < rr.row.Load.Concurrency; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					t, ok := rr.take(time.Now())
					if !ok {
						return
					}
					cl, err := rr.prepare(t, 0)
					if err != nil {
						fail(err)
						return
					}
					// A closed-loop user sends as soon as it is ready:
					// its schedule is now.
					cl.rec.ScheduledNS = time.Since(rr.start).Nanoseconds()
					rr.fire(inflight, cl)
				}
			}()
		}
		// Workers send synchronously, so they return only once their last
		// request ends; waiting for them happens below, under the grace
		// period when dispatching was cut short.
		select {
		case <-ctx.Done():
		case <-rr.stopped:
		}
	case schema.ModeRate:
		rr.openLoop(ctx, inflight, &wg, fail)
	default:
		return false, fmt.Errorf("row %s: load mode %q is not supported yet", rr.row.ID, rr.row.Load.Mode)
	}

	interrupted = ctx.Err() != nil
	rr.mu.Lock()
	graceful := interrupted || rr.stopReason == "duration"
	rr.mu.Unlock()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if graceful {
		select {
		case <-done:
		case <-time.After(rr.row.Grace.D()):
			cancelInflight(errGraceOver)
			<-done
		}
	} else {
		<-done
	}
	return interrupted, prepErr
}

// openLoop dispatches requests at their scheduled times, whatever the state
// of earlier ones. With a concurrency cap, an arrival waits for a free slot
// and the wait is recorded as queue time; without one, every arrival is
// sent on time, however many are in flight. It never quietly turns into a
// closed loop: lateness shows in each record as StartNS - QueueNS -
// ScheduledNS.
func (rr *rowRun) openLoop(ctx, inflight context.Context, wg *sync.WaitGroup, fail func(error)) {
	l := rr.row.Load
	arr := newArrivals(l.Rate, l.Arrival, l.Burstiness, rr.wl.seed)
	var slots chan struct{}
	if l.MaxConcurrency > 0 {
		slots = make(chan struct{}, l.MaxConcurrency)
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		at := arr.next()
		due := rr.start.Add(at)
		t, ok := rr.take(due)
		if !ok {
			return
		}
		cl, err := rr.prepare(t, at)
		if err != nil {
			fail(err)
			return
		}
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		}
		if slots != nil {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			// Queue time runs from the scheduled arrival: if the dispatcher
			// reached this request late, it was because earlier arrivals
			// were waiting for slots, which is queueing too.
			cl.rec.QueueNS = max(0, time.Since(due).Nanoseconds())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if slots != nil {
				defer func() { <-slots }()
			}
			rr.fire(inflight, cl)
		}()
	}
}
