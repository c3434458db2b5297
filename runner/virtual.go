package runner

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/protocol"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/sim"
)

// A run on virtual time (run --virtual) executes its rows against the
// built-in server's virtual clock (sim.Virtual) instead of a socket and the
// wall clock. The row's rules are the same code as in real time (take, the
// arrival processes, prepare, the records, the aggregator); what differs is
// who waits. Here nobody does: vexec is a discrete-event loop that merges
// the client's events (arrivals, users' next requests, timeouts, the
// duration's end) with the engine's, in time order, and each request that
// ends is replayed through the row's own protocol client, whose clock the
// replay moves to the time of each byte. So records, summaries and reports
// are those of a real run, and a run depends on its inputs and seeds only:
// not on the host, its load or its timers.

// stopper is a timer that can be stopped: a *time.Timer in real time, a
// vevent on virtual time.
type stopper interface{ Stop() bool }

// afterFunc runs f after d on the row's clock.
func (rr *rowRun) afterFunc(d time.Duration, f func()) stopper {
	if rr.vclock != nil {
		return rr.vclock.after(d, f)
	}
	return time.AfterFunc(d, f)
}

// clockNow is the row's clock: the wall clock, or the virtual one.
func (rr *rowRun) clockNow() time.Time {
	if rr.vclock != nil {
		return rr.vclock.nowTime()
	}
	return time.Now()
}

// VirtualEpoch is zero on the virtual clock, as records' start_unix_ns give
// it: a fixed instant, so that a run's records are the same every time, and
// one that no record of a real run carries.
var VirtualEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// virtualBase is the base URL requests name on virtual time. Nothing is
// dialled: the .invalid top-level domain is reserved for names that must
// not resolve.
const virtualBase = "http://virtual.invalid/v1"

// ErrNotVirtual is wrapped by Run's error when the experiment cannot run on
// virtual time (a real server, or a row virtual time does not serve).
var ErrNotVirtual = errors.New("cannot run on virtual time")

// VirtualProblems lists why plan cannot run on virtual time, empty when it
// can: the server must be the built-in one with an engine preset, and
// every row one the virtual executor serves.
func VirtualProblems(plan *schema.Plan) []string {
	var out []string
	check := func(who string, builtin bool, s schema.SimSettings) {
		if !builtin {
			out = append(out, who+" is not the built-in server: virtual time simulates the built-in server only")
			return
		}
		if s.Preset == schema.PresetFixed {
			out = append(out, who+" uses preset fixed, whose constant latencies have no virtual clock: use an engine preset")
		}
		for _, f := range s.Faults {
			if f.Kind == "stall" || f.Kind == "slow_headers" {
				out = append(out, fmt.Sprintf("%s injects %s faults, which wait on the wall clock", who, f.Kind))
			}
		}
		if s.GroundTruth {
			out = append(out, who+" writes ground truth, which compares the client's clock with the server's: on virtual time they are one clock")
		}
	}
	if len(plan.Server.Variants) == 0 {
		check("server", plan.Server.Builtin, plan.Server.Sim)
	}
	for _, v := range plan.Server.Variants {
		if v.Launch != nil {
			out = append(out, fmt.Sprintf("variant %s launches a server process", v.Name))
			continue
		}
		check("variant "+v.Name, v.Builtin, v.Sim)
	}
	return out
}

// virtualServer is a built-in server on virtual time and the HTTP client
// whose transport replays its responses.
type virtualServer struct {
	v    *sim.Virtual
	http *http.Client
}

// openVirtual creates the built-in server of t on virtual time, its clock's
// zero at epoch.
func openVirtual(t serverTarget, plan *schema.Plan, su *serverSetup, epoch time.Time) (*virtualServer, error) {
	cfg, err := BuiltinConfig(t.sim)
	if err != nil {
		return nil, fmt.Errorf("built-in server: %w", err)
	}
	cfg.Model = t.model
	if len(plan.Rows) > 0 {
		cfg.Tokenizer = su.toks[plan.Rows[0].Tokenizer]
	}
	v, err := sim.NewVirtual(cfg, epoch)
	if err != nil {
		return nil, err
	}
	return &virtualServer{v: v, http: &http.Client{Transport: v.Transport()}}, nil
}

// scrapePlan is telemetry on virtual time: the virtual server's own
// /metrics, scraped through its transport and stamped on its clock, each
// round taken by the row when its clock reaches it. Endpoints the
// experiment lists (telemetry.metrics, telemetry.gpu) name real machines
// and are not scraped: the simulated server serves its GPUs' figures
// beside its own.
func (vs *virtualServer) scrapePlan(p schema.TelemetryPlan) *scrapePlan {
	if !p.Enabled {
		return nil
	}
	p.Metrics, p.GPU = nil, nil
	sp := newScrapePlan(p, []string{virtualBase}, "", nil)
	sp.client = vs.http
	sp.clock = func() time.Time { return vs.v.Time(vs.v.Now()) }
	return sp
}

// vevent is one client event on the virtual clock.
type vevent struct {
	at   time.Duration
	n    uint64 // order of scheduling, to break ties reproducibly
	fn   func()
	dead bool
	i    int
	// passive events (a request's timeout, the grace period's end) only
	// end what is still going: with nothing else to happen, the row is
	// over, and the clock does not run on to them.
	passive bool
	x       *vexec
}

// Stop cancels the event, reporting whether it had not run yet.
func (e *vevent) Stop() bool {
	was := !e.dead
	if was && !e.passive {
		e.x.active--
	}
	e.dead = true
	return was
}

type veventHeap []*vevent

func (h veventHeap) Len() int { return len(h) }
func (h veventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].n < h[j].n
}
func (h veventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].i = i; h[j].i = j }
func (h *veventHeap) Push(x any)   { e := x.(*vevent); e.i = len(*h); *h = append(*h, e) }
func (h *veventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// vexec runs one row on virtual time.
type vexec struct {
	rr     *rowRun
	v      *sim.Virtual
	events veventHeap
	n      uint64
	// inflight are the requests sent and not yet recorded, in the order
	// they were sent (a cut at the end of the grace period goes in order).
	inflight []*vreq
	path     string // the API's path on the server
	active   int    // live events that are not passive
	prefill  *vprefill
	// rampJoined says a ramped closed loop's later users are scheduled.
	rampJoined bool
}

// vprefill is prefill_concurrency on virtual time (see prefillGate): free
// slots, and who waits for one, first come first served.
type vprefill struct {
	free    int
	waiting []func()
}

// acquire runs f when a slot is free: at once, or when one is released.
func (g *vprefill) acquire(f func()) {
	if g.free > 0 {
		g.free--
		f()
		return
	}
	g.waiting = append(g.waiting, f)
}

// releaser gives a slot back once, to the first waiter if any.
func (g *vprefill) releaser() func() {
	done := false
	return func() {
		if done {
			return
		}
		done = true
		if len(g.waiting) > 0 {
			f := g.waiting[0]
			g.waiting = g.waiting[1:]
			f()
			return
		}
		g.free++
	}
}

// vreq is one request in flight on virtual time.
type vreq struct {
	cl       *call
	call     *sim.VirtualCall
	after    func() // what its end lets happen next: a user's next request, a free slot
	timers   []stopper
	recorded bool
	// reply, when set, keeps the answer's text: a conversation's turn.
	reply *protocol.Reply
	// release gives back a prefill slot, at the first token or the end.
	release func()
}

func (x *vexec) now() time.Duration    { return x.v.Now() }
func (x *vexec) nowTime() time.Time    { return x.v.Time(x.v.Now()) }
func (x *vexec) since0() time.Duration { return x.nowTime().Sub(x.rr.start) }

// at schedules f at virtual time t (not before now).
func (x *vexec) at(t time.Duration, f func()) *vevent {
	x.n++
	x.active++
	e := &vevent{at: max(t, x.now()), n: x.n, fn: f, x: x}
	heap.Push(&x.events, e)
	return e
}

// after schedules f d from now.
func (x *vexec) after(d time.Duration, f func()) stopper { return x.at(x.now()+d, f) }

// guard schedules a passive f d from now: a deadline on what is in flight.
func (x *vexec) guard(d time.Duration, f func()) stopper {
	e := x.at(x.now()+d, f)
	e.passive = true
	x.active--
	return e
}

// loop runs events in time order until none is left: the engine's first
// at any instant, then the client's. It checks ctx between events.
func (x *vexec) loop(ctx context.Context, onInterrupt func()) {
	interrupted := false
	for i := 0; ; i++ {
		if !interrupted && i%256 == 0 && ctx.Err() != nil {
			interrupted = true
			onInterrupt()
		}
		for len(x.events) > 0 && x.events[0].dead {
			heap.Pop(&x.events)
		}
		t, ok := time.Duration(math.MaxInt64), false
		if len(x.events) > 0 && (x.active > 0 || len(x.inflight) > 0) {
			t, ok = x.events[0].at, true
		}
		if te, eok := x.v.Next(); eok && te < t {
			t, ok = te, true
		}
		if td, dok := x.v.NextDone(); dok && td < t {
			t, ok = td, true
		}
		if !ok {
			return
		}
		x.v.RunUntil(t)
		x.v.EndDue(t)
		for len(x.events) > 0 && x.events[0].at <= t {
			e := heap.Pop(&x.events).(*vevent)
			if !e.dead {
				e.Stop()
				e.fn()
			}
		}
	}
}

// send submits a prepared request now. after runs once it is recorded.
func (x *vexec) send(cl *call, after func()) { x.sendWith(cl, nil, after) }

// sendWith is send with a reply to keep the answer's text in.
func (x *vexec) sendWith(cl *call, reply *protocol.Reply, after func()) {
	rr := x.rr
	q := &vreq{cl: cl, after: after, reply: reply, release: cl.release}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Request-Id", cl.Rec.ID)
	for k, v := range rr.client.Headers {
		h.Set(k, v)
	}
	var first func(at time.Duration)
	if q.release != nil {
		// The prefill slot goes back at the first token, at its time.
		first = func(at time.Duration) { x.at(at, q.release) }
	}
	vc, err := x.v.Submit(x.path, h, cl.Body, first, func(at time.Duration) {
		x.at(at, func() { x.finish(q) })
	})
	if err != nil {
		if q.release != nil {
			q.release()
		}
		rr.fail(fmt.Errorf("virtual time: %w", err))
		return
	}
	q.call = vc
	x.inflight = append(x.inflight, q)
	rr.live.Begin()
	if d := rr.row.Timeout.D(); d > 0 {
		q.timers = append(q.timers, x.guard(d, func() { x.cut(q, protocol.ErrRequestTimeout) }))
	}
	if c := rr.row.Cancel; c != nil && !cl.Rec.Warmup && cancels(rr.wl.Seed(), cl.Rec.Seq, c.Fraction) {
		q.timers = append(q.timers, x.guard(c.After.D(), func() { x.cut(q, errCanceled) }))
	}
}

// cut ends q now for cause, if it has not ended.
func (x *vexec) cut(q *vreq, cause error) {
	if _, done := q.call.Done(); done {
		return
	}
	q.call.Cut(cause)
	x.finish(q)
}

// finish replays q's response through the row's client and records it.
func (x *vexec) finish(q *vreq) {
	if q.recorded {
		return
	}
	q.recorded = true
	x.rr.live.End()
	for _, t := range q.timers {
		t.Stop()
	}
	for i, o := range x.inflight {
		if o == q {
			x.inflight = append(x.inflight[:i], x.inflight[i+1:]...)
			break
		}
	}
	if q.release != nil {
		q.release() // an end without a first token
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	if q.reply != nil {
		ctx = protocol.WithReply(ctx, q.reply)
	}
	q.call.ReplayStart(cancel)
	x.rr.client.Do(ctx, &q.cl.Call)
	cancel(nil)
	x.rr.record(q.cl.Rec)
	if q.after != nil {
		q.after()
	}
}

// cutAll cuts every request in flight for cause, in the order sent.
func (x *vexec) cutAll(cause error) {
	for len(x.inflight) > 0 {
		x.cut(x.inflight[0], cause)
	}
}

// runVirtual is run on virtual time: priming, then the row's load, then
// the drain, each request recorded as it ends.
func (rr *rowRun) runVirtual(ctx context.Context, vs *virtualServer) (interrupted bool, err error) {
	x := &vexec{rr: rr, v: vs.v}
	rr.vclock = x
	u, perr := url.Parse(virtualBase + protocol.Endpoint(rr.client.API))
	if perr != nil {
		return false, perr
	}
	x.path = u.Path
	rr.start = x.nowTime()
	rr.loadStart = rr.start
	rr.stopped = make(chan struct{})
	rr.client.RowStart = rr.start
	defer func() {
		rr.mu.Lock()
		if rr.durTimer != nil {
			rr.durTimer.Stop()
		}
		rr.mu.Unlock()
	}()
	stopping, interrupted := false, false
	// stopDispatch starts the grace period: after a duration stop or an
	// interrupt, requests in flight may finish for Grace, then are cut.
	stopDispatch := func() {
		if stopping {
			return
		}
		stopping = true
		x.guard(rr.row.Grace.D(), func() { x.cutAll(errGraceOver) })
	}
	rr.stopHook = func(reason string) {
		rr.setPhase(metrics.PhaseDrain)
		if reason == stopDuration {
			stopDispatch()
		}
	}
	onInterrupt := func() {
		interrupted = true
		stopDispatch()
	}
	halted := func() bool { return interrupted || rr.reason() != "" }
	// Telemetry rounds every interval of the virtual clock while the row
	// runs; the scraper took the first and takes the last itself.
	if rr.scrapeNow != nil && rr.scrapeEvery > 0 {
		var tick func()
		tick = func() {
			rr.scrapeNow()
			x.guard(rr.scrapeEvery, tick)
		}
		x.guard(rr.scrapeEvery, tick)
	}

	// Warm prefixes first, one at a time, each waited for.
	if rr.primeCount() > 0 {
		rr.setPhase(metrics.PhasePrime)
	}
	for i := 0; i < rr.primeCount() && ctx.Err() == nil && !halted(); i++ {
		t, _ := rr.take(x.nowTime())
		cl, err := rr.prepare(t, x.since0())
		if err != nil {
			return false, err
		}
		x.send(cl, nil)
		x.loop(ctx, onInterrupt)
	}
	if rr.primeCount() > 0 {
		if rr.scrapeNow != nil {
			rr.scrapeNow()
		}
		rr.loadStart = x.nowTime()
	}
	if ctx.Err() != nil {
		return true, nil
	}
	if rr.row.Warmup > 0 || rr.row.WarmupDuration > 0 {
		rr.setPhase(metrics.PhaseWarmup)
	}

	rr.ramp = newRampClock(rr.row.Load.Ramp)
	rr.openShardRamp()
	if k := rr.row.PrefillConcurrency; k > 0 {
		x.prefill = &vprefill{free: k}
	}
	switch rr.row.Load.Mode {
	case schema.ModeConcurrency:
		if rr.row.Conversation != nil {
			for range rr.shard.split(rr.row.Load.Concurrency) {
				x.at(x.now(), func() { x.converse(halted, nil, nil, nil) })
			}
			break
		}
		users := rr.shard.split(rr.row.Load.Concurrency)
		if rr.ramp != nil {
			users = rr.shard.rampUsers(rr.ramp.plan.Levels)[0]
		}
		for range users {
			x.at(x.now(), func() { x.user(halted) })
		}
	case schema.ModeRate, schema.ModeTrace:
		x.openLoop(halted)
	default:
		return false, fmt.Errorf("load mode %q is not supported on virtual time", rr.row.Load.Mode)
	}
	// A duration timer that fires while users wait on slow responses stops
	// the row there and then, as in real time.
	x.loop(ctx, onInterrupt)
	rr.mu.Lock()
	err = rr.prepareError
	rr.mu.Unlock()
	return ctx.Err() != nil, err
}

// user is one closed-loop user's next request: sent as soon as it is
// ready, the next when it is recorded.
func (x *vexec) user(halted func() bool) {
	rr := x.rr
	if halted() {
		return
	}
	t, ok := rr.take(x.nowTime())
	if !ok {
		return
	}
	x.rampJoins(halted)
	cl, err := rr.prepare(t, 0)
	if err != nil {
		rr.fail(err)
		return
	}
	cl.Rec.ScheduledNS = x.since0().Nanoseconds()
	if x.prefill == nil {
		x.send(cl, func() { x.user(halted) })
		return
	}
	ready := x.now()
	x.prefill.acquire(func() {
		if w := x.now() - ready; w > 0 {
			cl.Rec.QueueNS = w.Nanoseconds()
		}
		cl.release = x.prefill.releaser()
		x.send(cl, func() { x.user(halted) })
	})
}

// rampJoins schedules a ramped closed loop's later users once its clock
// has opened (with the first measured request): the users of step k join
// when step k begins, and keep going into the steps after it.
func (x *vexec) rampJoins(halted func() bool) {
	c := x.rr.ramp
	if c == nil || x.rr.row.Load.Mode != schema.ModeConcurrency || c.plan == nil {
		return
	}
	select {
	case <-c.opened:
	default:
		return
	}
	users := x.rr.shard.rampUsers(c.plan.Levels)
	if x.rampJoined {
		return
	}
	x.rampJoined = true
	origin := x.rr.clockNow().Sub(c.origin)
	for w := users[0]; w < users[len(users)-1]; w++ {
		first := x.rr.rampJoinStep(w)
		at := x.now() - origin + time.Duration(first-1)*c.plan.StepDuration.D()
		x.at(at, func() { x.user(halted) })
	}
}

// converse runs one conversation's next turn (cv nil: a new conversation)
// and, when its reply is in, the turn after it, think_time later. first is
// an open-loop conversation's arrival, done what its end frees (its
// max_concurrency slot); a closed-loop user (first nil) starts its next
// conversation when one ends.
func (x *vexec) converse(halted func() bool, cv *conversation, first *arrival, done func()) {
	rr := x.rr
	end := func() {
		if first != nil {
			// An open-loop conversation ends with its turns: the next
			// one is the next arrival's, not this one's user's.
			if done != nil {
				done()
			}
			return
		}
		x.converse(halted, nil, nil, nil) // the user's next conversation
	}
	if halted() {
		if done != nil {
			done()
		}
		return
	}
	t, ok := rr.take(x.nowTime())
	if !ok {
		if done != nil {
			done()
		}
		return
	}
	if cv == nil {
		cv = rr.openConversation(first)
	}
	cl, err := rr.prepareTurn(t, cv)
	if err != nil {
		rr.fail(err)
		return
	}
	cl.Rec.ScheduledNS = x.since0().Nanoseconds()
	if first != nil && cv.Turn() == 0 {
		cl.Rec.ScheduledNS, cl.Rec.QueueNS = first.scheduled.Nanoseconds(), first.queued.Nanoseconds()
	}
	reply := &protocol.Reply{}
	x.sendWith(cl, reply, func() {
		if cl.Rec.Error != nil || reply.Text() == "" {
			end() // nothing to carry on from
			return
		}
		rr.wl.Replied(cv.Conversation, reply.Text())
		if cv.Over() {
			end()
			return
		}
		next := func() { x.converse(halted, cv, first, done) }
		if d := rr.row.Conversation.ThinkTime.D(); d > 0 {
			x.after(d, next)
			return
		}
		next()
	})
}

// openLoop schedules a rate or trace row's arrivals, one ahead at a time.
// With max_concurrency an arrival that finds every slot taken waits for one,
// first come first served, and its wait is its queue time.
func (x *vexec) openLoop(halted func() bool) {
	rr := x.rr
	l := rr.row.Load
	var next func() (time.Duration, bool)
	switch {
	case l.Mode == schema.ModeTrace:
		next = traceArrivals(rr.wl.Schedule())
	case rr.ramp != nil:
		next = rr.rampArrivals()
	case rr.row.Conversation != nil:
		arr := newArrivals(l.Rate, l.Arrival, l.Burstiness, rr.wl.Seed())
		next = func() (time.Duration, bool) { return arr.next(), true }
	default:
		next = rr.rateArrivals()
	}
	next = rr.kept(next)
	base := x.v.Now() // the load's start on the virtual clock
	offset := x.since0()
	// Slots of max_concurrency: an arrival that finds none free waits,
	// first come first served; a request (or a conversation) gives its
	// slot back when it ends.
	capN := rr.maxConcurrency()
	free := capN
	var queue []func()
	slot := func(f func()) {
		switch {
		case capN == 0:
			f()
		case free > 0:
			free--
			f()
		default:
			queue = append(queue, f)
		}
	}
	var release func()
	if capN > 0 {
		release = func() {
			if len(queue) == 0 {
				free++
				return
			}
			f := queue[0]
			queue = queue[1:]
			f()
		}
	}
	var arrive func(at time.Duration)
	schedule := func() {
		at, ok := next()
		if !ok {
			x.at(x.now(), func() {
				rr.mu.Lock()
				rr.stop(stopTrace)
				rr.mu.Unlock()
			})
			return
		}
		x.at(base+at, func() { arrive(at) })
	}
	arrive = func(at time.Duration) {
		if halted() {
			return
		}
		due := x.v.Time(base + at)
		if _, more := rr.peek(due); !more {
			rr.take(due) // records why the row stopped
			return
		}
		if rr.row.Conversation != nil {
			// A conversation arrives: a user of its own holds it, its
			// first turn sent when a slot is free.
			conv := rr.nextConversation()
			slot(func() {
				a := &arrival{scheduled: offset + at, conv: conv}
				if capN > 0 {
					a.queued = x.now() - (base + at)
				}
				x.converse(halted, nil, a, release)
			})
			schedule()
			return
		}
		t, ok := rr.take(due)
		if !ok {
			return
		}
		cl, err := rr.prepare(t, offset+at)
		if err != nil {
			rr.fail(err)
			return
		}
		cl.Rec.Warmup, cl.Rec.Step = t.warmup, t.step
		slot(func() {
			send := func() {
				if capN > 0 || x.prefill != nil {
					cl.Rec.QueueNS = (x.now() - (base + at)).Nanoseconds()
				}
				x.send(cl, release)
			}
			if x.prefill == nil {
				send()
				return
			}
			x.prefill.acquire(func() {
				cl.release = x.prefill.releaser()
				send()
			})
		})
		schedule()
	}
	schedule()
}

// virtualNonce is a run's nonce on virtual time: the experiment's hash, so
// that the same file draws the same prompts every time.
func virtualNonce(plan *schema.Plan) uint64 {
	h := fnv.New64a()
	h.Write([]byte(plan.SHA256))
	return h.Sum64()
}
