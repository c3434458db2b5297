package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/infermatrix/infermatrix/livemetrics"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/protocol"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/workload"
)

// errGraceOver cancels requests still running when a stopped row's grace
// period ends.
var errGraceOver = errors.New("cancelled at the end of the grace period")

// Reasons a row stops dispatching.
const (
	stopRequests = "requests"
	stopDuration = "duration"
	stopError    = "error"
	stopTrace    = "end of trace"
	// stopUnreachable: the server refused connections for the run's
	// unreachable_after (see gate).
	stopUnreachable = "server unreachable"
)

// rowRun executes one planned row.
type rowRun struct {
	row   *schema.PlannedRow
	index int
	// trial is the trial of a repeated row, from 1; 0 without repeat.
	trial  int
	runID  string
	client *protocol.Client
	wl     *workload.Row
	urls   []string
	// record takes each finished request; it writes the record to disk
	// before returning and is safe for concurrent use.
	record func(*metrics.Record)
	// live counts the row's requests in flight for the live figures;
	// nil when they are off (its methods then do nothing).
	live *livemetrics.Row
	// gate holds requests back while the server refuses connections; it
	// is the run's, shared by its rows.
	gate *gate
	// unsent counts open-loop arrivals that came due while the gate was
	// closed: they were not sent.
	unsent int

	// start is the row's start: record times count from it. loadStart is
	// when the row's load begins, after any warm-prefix priming: arrival
	// schedules, warmup_duration and duration count from it.
	start     time.Time
	loadStart time.Time

	// phase, when set, tells the row's telemetry where the row is
	// (metrics.Phase*), so that each scrape is marked prime, warmup, load
	// or drain.
	phase func(string)
	// scrapeNow, when set, takes a telemetry round at once: after the
	// warm prefixes, so the window's counters do not count them.
	scrapeNow func()
	// scrapeEvery is the telemetry interval, for the rounds a row on
	// virtual time takes itself.
	scrapeEvery time.Duration

	// templateTokens, when set, counts the chat template's tokens the
	// built-in server adds to a request body (template.go).
	templateTokens func(body []byte) int

	// ramp is a ramped row's step clock, prefill its prefill-concurrency
	// gate; each nil when the row has none (ramp.go, prefill_gate.go).
	ramp    *rampClock
	prefill *prefillGate
	// shard is the run's shard (shard.go); zero when it is not sharded.
	shard Shard

	mu       sync.Mutex
	seq      int64
	convs    int64 // conversations started, for conversation rows
	measured int
	durTimer stopper
	// vclock, when set, is the row's clock on virtual time (virtual.go):
	// the duration timer runs on it instead of the wall clock.
	vclock *vexec
	// stopHook, when set, learns why dispatching stopped, under mu: on
	// virtual time a duration stop starts the grace period.
	stopHook func(reason string)
	// globalOpen is when (from loadStart) a sharded open loop's first
	// measured global arrival is due, whichever shard sends it; set once
	// globalOpenSet (noteGlobalArrival). Guarded by mu.
	globalOpen    time.Duration
	globalOpenSet bool
	stopped       chan struct{} // closed when dispatching stops
	stopReason    string
	prepareError  error
}

// ticket is one dispatch decision.
type ticket struct {
	seq    int64
	warmup bool
	step   int // a ramped row's step, from 1 (rampStep)
}

// take decides whether another request may be dispatched at now, and
// whether it is warmup. It is the single place the row's stopping rules
// live, so that closed- and open-loop rows stop alike.
func (rr *rowRun) take(now time.Time) (ticket, bool) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.stopReason != "" {
		return ticket{}, false
	}
	r := rr.row
	rr.seq = rr.nextKept(rr.seq)
	warm := rr.seq < int64(rr.warmupCount()+rr.primeCount()) ||
		(r.WarmupDuration > 0 && now.Sub(rr.loadStart) < r.WarmupDuration.D())
	if !warm {
		if n := rr.requestCount(); n > 0 && rr.measured >= n {
			rr.stop(stopRequests)
			return ticket{}, false
		}
		if rr.rampOver(now) {
			rr.stop(stopDuration)
			return ticket{}, false
		}
		if rr.measured == 0 {
			rr.setPhase(metrics.PhaseLoad)
		}
		if r.Duration > 0 && rr.measured == 0 {
			// The measured window opens with the first measured request;
			// a timer closes it, so a row stops on time even while every
			// user is waiting on a slow response.
			left := r.Duration.D() - rr.clockNow().Sub(now)
			if rr.globalOpenSet {
				// A sharded open loop's window opens where the
				// unsharded row's does (noteGlobalArrival).
				left = rr.loadStart.Add(rr.globalOpen + r.Duration.D()).Sub(rr.clockNow())
			}
			rr.durTimer = rr.afterFunc(left, func() {
				rr.mu.Lock()
				rr.stop(stopDuration)
				rr.mu.Unlock()
			})
		}
		rr.measured++
	}
	t := ticket{seq: rr.seq, warmup: warm, step: rr.rampStep(now, warm)}
	rr.seq++
	return t, true
}

// setPhase tells the row's telemetry where the row is.
func (rr *rowRun) setPhase(p string) {
	if rr.phase != nil {
		rr.phase(p)
	}
}

// peek returns the sequence number the next ticket will have, and false
// when a request-count row has nothing left to send at due, so the
// dispatcher does not wait out one more arrival gap for nothing.
func (rr *rowRun) peek(due time.Time) (int64, bool) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	r := rr.row
	rr.seq = rr.nextKept(rr.seq)
	warm := rr.seq < int64(rr.warmupCount()+rr.primeCount()) ||
		(r.WarmupDuration > 0 && due.Sub(rr.loadStart) < r.WarmupDuration.D())
	return rr.seq, warm || rr.requestCount() == 0 || rr.measured < rr.requestCount()
}

// stop ends dispatching; rr.mu must be held.
func (rr *rowRun) stop(reason string) {
	if rr.stopReason == "" {
		rr.stopReason = reason
		close(rr.stopped)
		if rr.stopHook != nil {
			rr.stopHook(reason)
		}
	}
}

// stopIfUnreachable stops the row when the gate tripped (the server
// refused connections for the run's unreachable_after), reporting
// whether it did.
func (rr *rowRun) stopIfUnreachable() bool {
	if _, tripped := rr.gate.outage(); !tripped {
		return false
	}
	rr.mu.Lock()
	rr.stop(stopUnreachable)
	rr.mu.Unlock()
	return true
}

func (rr *rowRun) reason() string {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return rr.stopReason
}

// fail stops the row because a request could not be prepared.
func (rr *rowRun) fail(err error) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.prepareError == nil {
		rr.prepareError = err
	}
	rr.stop(stopError)
}

func (rr *rowRun) primeCount() int { return rr.row.PrimingRequests() }

// recordID is a request's id, unique in the run: the run, the row's
// index, the trial of a repeated row, and the request's sequence number.
// A shard's ids carry the shard too: every shard sends the same warm
// prefixes, under the same sequence numbers, and shards on virtual time
// share the run id (virtualNonce), so ids stay unique in a merge.
func (rr *rowRun) recordID(seq int64) string {
	id := rr.runID
	if rr.shard.on() {
		id = fmt.Sprintf("%s-s%d", id, rr.shard.Index)
	}
	if rr.trial > 0 {
		return fmt.Sprintf("%s-%d-t%d-%d", id, rr.index, rr.trial, seq)
	}
	return fmt.Sprintf("%s-%d-%d", id, rr.index, seq)
}

// prepare builds the request for a ticket. Building happens before the
// request's scheduled time, so prompt synthesis delays no dispatch.
func (rr *rowRun) prepare(t ticket, scheduled time.Duration) (*call, error) {
	r := rr.row
	t.seq = rr.promptSeq(t.seq)
	rec := rr.newRecord(t, scheduled)
	var body []byte
	var err error
	if int(t.seq) < rr.primeCount() {
		// Priming: each warm prefix once, generating a single token.
		p := rr.wl.PrimePrompt(int(t.seq))
		body, err = rr.wl.Body(p, r.Streaming)
		rec.InputTokens.Requested = p.Requested
		rec.InputTokens.Client = p.InTokens
		rec.SharedTokens = p.Shared
		rec.OutputTokens.Requested = p.MaxTokens
	} else {
		p := rr.wl.Prompt(t.seq)
		body, err = rr.wl.Body(p, r.Streaming)
		rec.InputTokens.Requested = p.Requested
		rec.InputTokens.Client = p.InTokens
		rec.SharedTokens = p.Shared
		rec.OutputTokens.Requested = p.MaxTokens
		rec.Inputs = len(p.Inputs)
	}
	if err != nil {
		return nil, err
	}
	if rr.templateTokens != nil {
		rec.TemplateTokens = rr.templateTokens(body)
	}
	return &call{Call: protocol.Call{URL: rec.URL, Body: body, Rec: rec}}, nil
}

// newRecord is a ticket's record before the request is built.
func (rr *rowRun) newRecord(t ticket, scheduled time.Duration) *metrics.Record {
	return &metrics.Record{
		ID:          rr.recordID(t.seq),
		Row:         rr.row.ID,
		Seq:         t.seq,
		Trial:       rr.trial,
		Warmup:      t.warmup,
		Step:        t.step,
		URL:         rr.urls[int(t.seq)%len(rr.urls)],
		Stream:      rr.row.Streaming,
		ScheduledNS: scheduled.Nanoseconds(),
	}
}

// call is one request to make: what the client sends and records, and
// what the runner keeps beside it.
type call struct {
	protocol.Call
	// probe says the request is the one allowed through a closed gate.
	probe bool
	// release, when set, gives back the request's prefill slot
	// (prefill_gate.go); fire calls it at the first token or the end.
	release func()
}

// errCanceled is the cause of a row's deliberate cancellations (cancel:),
// which the record then gives as its message.
var errCanceled = errors.New("cancelled by the client")

// fire sends one request under the in-flight context and records it, and
// tells the gate whether it reached the server.
func (rr *rowRun) fire(inflight context.Context, cl *call) {
	cl.OnConn = rr.gate.connected
	ctx, cancel := context.WithTimeoutCause(inflight, rr.row.Timeout.D(), protocol.ErrRequestTimeout)
	defer cancel()
	if cl.release != nil {
		// The prefill slot goes back at the first token, or at the end.
		defer cl.release()
		ctx = protocol.WithFirstToken(ctx, cl.release)
	}
	if c := rr.row.Cancel; c != nil && !cl.Rec.Warmup && cancels(rr.wl.Seed(), cl.Rec.Seq, c.Fraction) {
		cctx, ccancel := context.WithCancelCause(ctx)
		defer ccancel(nil)
		cl.CancelAfter = c.After.D()
		cl.Cancel = func() { ccancel(errCanceled) }
		ctx = cctx
	}
	rr.live.Begin()
	rr.client.Do(ctx, &cl.Call)
	rr.live.End()
	// The gate hears first, the record's writer after: under an open
	// loop every millisecond the gate stays open after a refusal is
	// more arrivals sent into a dead server. A client out of file
	// descriptors says nothing of the server.
	if rec := cl.Rec; rec.Error != nil && rec.Error.Class == metrics.ErrConnect && rec.ConnNS == 0 && rec.Error.Detail != metrics.DetailClientFiles {
		rr.gate.failed(cl.probe)
		rr.stopIfUnreachable()
	} else {
		rr.gate.done(cl.probe)
	}
	rr.record(cl.Rec)
}

// run executes the row. It returns when every dispatched request has ended
// and been recorded; interrupted reports whether ctx ended it early.
func (rr *rowRun) run(ctx context.Context) (interrupted bool, err error) {
	if rr.start.IsZero() {
		rr.start = time.Now()
	}
	rr.loadStart = rr.start
	rr.stopped = make(chan struct{})
	rr.ramp, rr.prefill = newRampClock(rr.row.Load.Ramp), newPrefillGate(rr.row.PrefillConcurrency)
	rr.client.RowStart = rr.start
	defer func() {
		rr.mu.Lock()
		if rr.durTimer != nil {
			rr.durTimer.Stop()
		}
		rr.mu.Unlock()
	}()

	// Requests in flight outlive the dispatch context: when dispatching
	// stops they get the grace period, then are cancelled.
	inflight, cancelInflight := context.WithCancelCause(context.Background())
	defer cancelInflight(nil)

	// Warm prefixes are sent first, one at a time, each waited for, so the
	// server's prefix cache holds every one before the row's load begins.
	if rr.primeCount() > 0 {
		rr.setPhase(metrics.PhasePrime)
	}
	for i := 0; i < rr.primeCount() && ctx.Err() == nil; i++ {
		pass, probe := rr.gate.wait(ctx, rr.stopped)
		if !pass {
			break
		}
		t, _ := rr.take(time.Now())
		cl, err := rr.prepare(t, time.Since(rr.start))
		if err != nil {
			rr.gate.done(probe)
			return false, err
		}
		cl.probe = probe
		rr.fire(inflight, cl)
	}
	if rr.primeCount() > 0 {
		if rr.scrapeNow != nil && ctx.Err() == nil {
			rr.scrapeNow()
		}
		rr.loadStart = time.Now()
	}
	rr.openShardRamp()
	if rr.row.Warmup > 0 || rr.row.WarmupDuration > 0 {
		rr.setPhase(metrics.PhaseWarmup)
	}

	var wg sync.WaitGroup
	mode := rr.row.Load.Mode
	if rr.ramp != nil {
		mode = modeRamp
	}
	switch mode {
	case modeRamp:
		rr.ramped(ctx, inflight, &wg)
	case schema.ModeConcurrency:
		if rr.row.Conversation != nil {
			rr.conversationLoop(ctx, inflight, &wg)
			break
		}
		rr.closedLoop(ctx, inflight, &wg)
	case schema.ModeRate:
		if rr.row.Conversation != nil {
			rr.conversationArrivals(ctx, inflight, &wg)
			break
		}
		rr.openLoop(ctx, inflight, &wg, rr.rateArrivals())
	case schema.ModeTrace:
		rr.openLoop(ctx, inflight, &wg, traceArrivals(rr.wl.Schedule()))
	default:
		return false, fmt.Errorf("load mode %q is not supported", rr.row.Load.Mode)
	}

	rr.setPhase(metrics.PhaseDrain)
	// Dispatching is over. Requests still in flight finish on their own
	// when the row ran out of requests; after a duration stop or an
	// interrupt (including one that arrives while they finish) they get
	// the grace period, then are cancelled.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	grace := func() {
		select {
		case <-done:
		case <-time.After(rr.row.Grace.D()):
			cancelInflight(errGraceOver)
			<-done
		}
	}
	if ctx.Err() != nil || rr.reason() == stopDuration {
		grace()
	} else {
		select {
		case <-done:
		case <-ctx.Done():
			grace()
		}
	}
	rr.mu.Lock()
	err = rr.prepareError
	rr.mu.Unlock()
	return ctx.Err() != nil, err
}

// closedLoop runs the row's users: each sends its next request as soon as
// its previous one ends. It returns when dispatching stops (the users still
// finish their last requests, tracked by wg).
func (rr *rowRun) closedLoop(ctx, inflight context.Context, wg *sync.WaitGroup) {
	for w := 0; w < rr.shard.split(rr.row.Load.Concurrency); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rr.user(ctx, inflight)
		}()
	}
	select {
	case <-ctx.Done():
	case <-rr.stopped:
	}
}

// user is one closed-loop user: it sends its next request as soon as its
// previous one ends, until dispatching stops.
func (rr *rowRun) user(ctx, inflight context.Context) {
	for ctx.Err() == nil {
		pass, probe := rr.gate.wait(ctx, rr.stopped)
		if !pass {
			rr.stopIfUnreachable()
			return
		}
		t, ok := rr.take(time.Now())
		if !ok {
			rr.gate.done(probe)
			return
		}
		cl, err := rr.prepare(t, 0)
		if err != nil {
			rr.gate.done(probe)
			rr.fail(err)
			return
		}
		cl.probe = probe
		// A closed-loop user sends as soon as it is ready: its
		// schedule is now.
		cl.Rec.ScheduledNS = time.Since(rr.start).Nanoseconds()
		if !rr.admitPrefill(ctx, cl) {
			rr.gate.done(probe)
			return
		}
		rr.fire(inflight, cl)
	}
}

// openLoop dispatches requests at their scheduled times, whatever the state
// of earlier ones. With a concurrency cap, an arrival waits for a free slot
// and the wait is recorded as its queue time; without one, every arrival is
// sent when due, however many are in flight. It never quietly turns into a
// closed loop: when the dispatcher itself falls behind its schedule, each
// record shows it as StartNS - QueueNS - ScheduledNS, and the row's summary
// flags it.
//
// next gives each arrival's offset from the load start, in order: drawn
// from an arrival process for a rate row, read from the file for a trace,
// whose end (next reports false) ends the row.
func (rr *rowRun) openLoop(ctx, inflight context.Context, wg *sync.WaitGroup, next func() (time.Duration, bool)) {
	var slots chan struct{}
	if c := rr.maxConcurrency(); c > 0 {
		slots = make(chan struct{}, c)
	}
	pace := newPacer()
	defer pace.close()
	disp := newDispatchers()
	defer disp.close()
	// Requests are built ahead of their time by a goroutine of their
	// own: building one (a prompt cut and counted, a JSON body) can take
	// longer than the gap between two Poisson arrivals at thousands per
	// second, and a dispatcher that built each request just before
	// sending it would send late whenever one took long.
	quit := make(chan struct{})
	var built sync.WaitGroup
	defer func() { close(quit); built.Wait() }() // no build outlives the row
	ahead := rr.prepareAhead(next, quit, &built)
	var waitedUntil time.Time // when the dispatcher last got a slot it had to wait for
	for first := true; ; first = false {
		var item preparedCall
		select {
		case item = <-ahead:
		case <-ctx.Done():
			return
		case <-rr.stopped:
			return
		}
		if first {
			rr.startLoadClock()
		}
		if item.err != nil {
			rr.fail(item.err)
			return
		}
		if item.exhausted {
			rr.take(time.Now()) // records why the row stopped
			return
		}
		if item.cl == nil {
			rr.mu.Lock()
			rr.stop(stopTrace)
			rr.mu.Unlock()
			return
		}
		due := rr.loadStart.Add(item.at)
		if _, more := rr.peek(due); !more {
			rr.take(due) // records why the row stopped
			return
		}
		cl := item.cl
		cl.Rec.ScheduledNS = due.Sub(rr.start).Nanoseconds()
		if !pace.sleepUntil(ctx, rr.stopped, due) {
			return
		}
		pass, probe := rr.gate.open()
		if !pass && rr.stopIfUnreachable() {
			return
		}
		t, ok := rr.take(due)
		if !ok {
			rr.gate.done(probe)
			return
		}
		if !pass {
			// The server refuses connections and the gate is closed:
			// this arrival is not sent (it would only fail), and not
			// sent later, out of its time. The row's summary counts it.
			rr.mu.Lock()
			rr.unsent++
			rr.mu.Unlock()
			continue
		}
		cl.probe = probe
		if t.seq != cl.Rec.Seq {
			// Only this goroutine takes tickets, so the numbers the
			// builder assumed must be the ones taken.
			rr.fail(fmt.Errorf("internal error: built request %d for ticket %d", cl.Rec.Seq, t.seq))
			return
		}
		cl.Rec.Warmup, cl.Rec.Step = t.warmup, t.step
		if slots != nil || rr.prefill != nil {
			q := time.Now()
			if due.Before(waitedUntil) {
				// It came due while the dispatcher was waiting for a
				// slot for an earlier arrival: it has queued since its
				// time, and that wait is the cap's, not dispatch lag.
				q = due
			}
			if slots != nil {
				select {
				case slots <- struct{}{}:
				default:
					select {
					case slots <- struct{}{}:
					case <-ctx.Done():
						rr.gate.done(cl.probe)
						return
					case <-rr.stopped:
						rr.gate.done(cl.probe)
						return
					}
					waitedUntil = time.Now()
				}
			}
			if rr.prefill != nil {
				// After the in-flight slot: a request holds a prefill
				// slot only while it is sent and waits for its first
				// token, never while it waits for room in flight.
				ok, waited := rr.prefill.acquire(ctx, rr.stopped)
				if !ok {
					if slots != nil {
						<-slots
					}
					rr.gate.done(cl.probe)
					return
				}
				if waited {
					waitedUntil = time.Now()
				}
				cl.release = rr.prefill.releaser()
			}
			cl.Rec.QueueNS = time.Since(q).Nanoseconds()
		}
		wg.Add(1)
		disp.run(func() {
			defer wg.Done()
			if slots != nil {
				defer func() { <-slots }()
			}
			rr.fire(inflight, cl)
		})
	}
}

// rateArrivals is a rate row's schedule, offsets from the load start. The
// warmup and measured arrivals each offer exactly the rate, counted in
// requests or in seconds (see conditioned).
func (rr *rowRun) rateArrivals() func() (time.Duration, bool) {
	l, r := rr.row.Load, rr.row
	arr := newArrivals(l.Rate, l.Arrival, l.Burstiness, rr.wl.Seed())
	warm, measured := r.Warmup, r.Requests
	if r.WarmupDuration > 0 {
		warm = int(math.Round(r.WarmupDuration.D().Seconds() * l.Rate))
	}
	if measured == 0 && r.Duration > 0 {
		measured = int(math.Round(r.Duration.D().Seconds() * l.Rate))
	}
	if measured > 0 {
		arr = arr.conditioned(warm, measured)
	}
	return func() (time.Duration, bool) { return arr.next(), true }
}

// traceArrivals returns a trace's schedule (workload.Row.Schedule) one
// arrival at a time; the dispatcher's i-th arrival is entry i, which
// request seq i is built from.
func traceArrivals(schedule []time.Duration) func() (time.Duration, bool) {
	i := 0
	return func() (time.Duration, bool) {
		if i >= len(schedule) {
			return 0, false
		}
		i++
		return schedule[i-1], true
	}
}

// cancels decides, reproducibly, whether request seq is one of the row's
// cancelled fraction: the draw depends on the row's seed (workload.Row.Seed)
// and seq only, not on the order requests finish in.
func cancels(seed uint64, seq int64, fraction float64) bool {
	return rand.New(rand.NewPCG(seed^0xca9ce1, uint64(seq))).Float64() < fraction
}

// preparedCall is a request built ahead of its arrival time. A nil cl
// with a nil err means the arrivals ran out (the end of a trace), or, with
// exhausted set, that the row has no more requests to send.
type preparedCall struct {
	at        time.Duration // due, from the row's load start
	cl        *call
	err       error
	exhausted bool
}

// prepareAhead builds the open loop's requests in arrival order, with the
// sequence numbers the dispatcher will take, up to prepareDepth ahead of
// it, until quit is closed.
func (rr *rowRun) prepareAhead(next func() (time.Duration, bool), quit <-chan struct{}, built *sync.WaitGroup) <-chan preparedCall {
	out := make(chan preparedCall, prepareDepth)
	rr.mu.Lock()
	seq := rr.nextKept(rr.seq)
	rr.mu.Unlock()
	next = rr.kept(next)
	// A row with a known number of requests builds no more than it sends:
	// long prompts (a Mooncake trace's) are not cheap to build.
	limit := int64(-1)
	if r := rr.row; r.Requests > 0 && r.WarmupDuration == 0 {
		limit = int64(r.TotalRequests())
	}
	built.Add(1)
	go func() {
		defer built.Done()
		for ; ; seq = rr.nextKept(seq + 1) {
			var item preparedCall
			if limit >= 0 && seq >= limit {
				item.exhausted = true
				select {
				case out <- item:
				case <-quit:
				}
				return
			}
			at, ok := next()
			if ok {
				item.at = at
				// The schedule is stamped when the request is
				// dispatched: the load clock may start after this
				// build (startLoadClock).
				item.cl, item.err = rr.prepare(ticket{seq: seq}, at)
			}
			select {
			case out <- item:
			case <-quit:
				return
			}
			if !ok || item.err != nil {
				return
			}
		}
	}()
	return out
}

// startLoadClock starts an open loop's schedule now, when its dispatcher
// holds its first request and is ready to send it, instead of at the
// row's start. Between the two come the row's first telemetry scrape and
// the first request's build (with a template probe, a round trip to the
// server): on the row's clock the first arrivals would be due before the
// client could send anything, and would leave late, in a burst, a load
// pattern the experiment did not ask for, and a dispatch lag the client
// need not have had. A sharded row keeps the row's start: its arrivals
// are its share of one global schedule, which the shards' clocks align
// (--start-at).
func (rr *rowRun) startLoadClock() {
	if rr.shard.on() {
		return
	}
	rr.mu.Lock()
	rr.loadStart = time.Now()
	rr.mu.Unlock()
}

// scheduleStart is where the row's arrival schedule began on its clock,
// for the summary: 0 for a row without one (a closed loop).
func (rr *rowRun) scheduleStart() int64 {
	if rr.row.Load.Mode == schema.ModeConcurrency {
		return 0
	}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return rr.loadStart.Sub(rr.start).Nanoseconds()
}

// prepareDepth is how many requests the open loop builds ahead: enough to
// ride out a slow build or a garbage-collection pause at thousands of
// requests per second, few enough that a row stopping early wastes little.
const prepareDepth = 256
