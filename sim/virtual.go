package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"time"

	"github.com/infermatrix/infermatrix/sim/engine"
)

// Virtual is the built-in server on its virtual clock, for `infermatrix run
// --virtual`: the same request parsing, engine, text, wire format and
// /metrics as the HTTP server, with no socket and no waiting. Time moves
// only when the caller moves it (RunUntil), so a run takes as long as the
// CPU needs to simulate it, whatever the host's load, and two runs with the
// same inputs and seeds are identical.
//
// A request goes through in two halves. Submit hands it to the server at
// the current virtual time: it is parsed, its fault decided and, if valid,
// admitted to the engine, which then emits its tokens as the caller moves
// time on. When the request is over (its last token, an immediate answer,
// or the caller's Cut), the caller replays it through an ordinary HTTP
// client whose transport is Transport: the server writes its response as it
// does on a socket, each write stamped with the virtual time its tokens
// were released, and the response body hands the bytes to the client one
// write at a time, moving the client's clock (ClientClock) to each write's
// time before the client stamps it. The client therefore parses, stamps and
// counts the very bytes a real stream would carry.
//
// A Virtual is not safe for concurrent use: one goroutine drives the clock,
// submits and replays.
type Virtual struct {
	srv     *Server
	timing  *virtualTiming
	cluster *engine.Cluster
	epoch   time.Time
	// server is the server's time while it writes a response; client is
	// the client's while it reads one (ClientClock).
	server, client time.Duration
	calls          map[string]*VirtualCall
}

// ImmediateLatency is how long an answer that never reaches the engine
// takes on the virtual clock (a 400 for a malformed request, an injected
// 429): a real server takes about a millisecond, and an answer in no time
// would let a closed loop of failing requests spin forever at one instant.
const ImmediateLatency = time.Millisecond

// NewVirtual returns the server cfg describes on a virtual clock whose zero
// is epoch. It needs an engine (a preset other than fixed): the fixed
// model's constant latencies have no virtual clock.
func NewVirtual(cfg Config, epoch time.Time) (*Virtual, error) {
	if cfg.Engine == nil {
		return nil, errors.New("sim: virtual time needs an engine preset (not fixed)")
	}
	if len(cfg.Faults) > 0 {
		for _, f := range cfg.Faults {
			if f.Kind == FaultStall || f.Kind == FaultSlowHeaders {
				return nil, fmt.Errorf("sim: fault %s waits on the wall clock and cannot run on virtual time", f.Kind)
			}
		}
	}
	if cfg.GroundTruth != nil {
		return nil, errors.New("sim: ground truth compares the client's stamps with the server's on the wall clock; on virtual time they are the same clock")
	}
	v := &Virtual{epoch: epoch, calls: map[string]*VirtualCall{}}
	srv, err := build(cfg, func(ec engine.Config) (timingModel, error) {
		c, err := engine.New(ec)
		if err != nil {
			return nil, err
		}
		v.cluster = c
		v.timing = &virtualTiming{v: v, gpu: newGPUMonitor(c.Config(), c.Config().Replicas)}
		return v.timing, nil
	})
	if err != nil {
		return nil, err
	}
	srv.clock = func() time.Time { return v.epoch.Add(v.server) }
	srv.created = epoch.Unix()
	v.srv = srv
	return v, nil
}

// Config is the configuration the server runs with, defaults applied.
func (v *Virtual) Config() Config { return v.srv.cfg }

// Now is the virtual time the server has reached.
func (v *Virtual) Now() time.Duration { return v.cluster.Now() }

// Time is virtual time d as a time.Time on the virtual clock's epoch.
func (v *Virtual) Time(d time.Duration) time.Time { return v.epoch.Add(d) }

// Next reports when the engine's next event is due, if it has one.
func (v *Virtual) Next() (time.Duration, bool) { return v.cluster.Next() }

// RunUntil moves the server to virtual time t, processing every engine
// event due by then; the requests' callbacks run on the way.
func (v *Virtual) RunUntil(t time.Duration) {
	advanceCluster(v.cluster, v.timing.gpu, t, nil)
}

// ClientClock is the clock a client replaying responses must stamp with
// (protocol.Client.Clock): the time of the bytes it last read.
func (v *Virtual) ClientClock() time.Time { return v.epoch.Add(v.client) }

// VirtualCall is one request submitted to a Virtual server.
type VirtualCall struct {
	v  *Virtual
	id string
	at time.Duration // when it was submitted
	// g is the admitted generation; nil when the server answered at once
	// (answer), which then holds that answer.
	g      *generation
	answer *virtualWriter
	req    *engine.Request
	// pool is an embeddings or rerank request: its sequences run as subs,
	// each prefill-only, and it ends when the last is prefilled.
	pool    *pooling
	subs    []*engine.Request
	subDue  []time.Duration // when each sub's prefill ended; -1 until then
	subLeft int
	due     []time.Duration // virtual release time of each delivered token
	cached  int
	queue   time.Duration
	queued  bool

	done  bool
	endAt time.Duration // when it ended: its last token, its answer, or the cut
	// cut is why the client gave up on it (Cut), nil when it did not.
	cut     error
	cancel  context.CancelCauseFunc // the replay's, called with cut
	onFirst func(at time.Duration)
	onDone  func(at time.Duration)
}

// Submit hands a POST of body to path (with header, whose X-Request-Id names
// the request for its replay) to the server at the current virtual time.
// first, when set, is called when the request's first token is released,
// and done when the request is over (its last token, or an answer that
// never reached the engine, ImmediateLatency after it was sent): either
// from within RunUntil, so done may run while the caller moves the clock,
// never from within Submit itself.
func (v *Virtual) Submit(path string, header http.Header, body []byte, first, done func(at time.Duration)) (*VirtualCall, error) {
	id := header.Get("X-Request-Id")
	if id == "" {
		return nil, errors.New("sim: a virtual request needs an X-Request-Id header")
	}
	if _, dup := v.calls[id]; dup {
		return nil, fmt.Errorf("sim: request %s submitted twice", id)
	}
	now := v.cluster.Now()
	v.server = now
	r, err := http.NewRequest(http.MethodPost, "http://virtual.invalid"+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	r.Header = header.Clone()
	c := &VirtualCall{v: v, id: id, at: now, onFirst: first, onDone: done}
	w := newVirtualWriter(v)
	var ep endpoint
	switch path {
	case "/v1/chat/completions":
		ep = chatEndpoint
	case "/v1/completions":
		ep = completionEndpoint
	case "/v1/embeddings", "/v1/rerank", "/rerank":
		return c, v.submitPooling(c, w, r, path != "/v1/embeddings")
	default:
		return nil, fmt.Errorf("sim: %s is not served on virtual time", path)
	}
	var g *generation
	if v.srv.allowJSON(w, r) {
		g = v.srv.prepareGeneration(w, r, ep)
	}
	if g == nil || g.status == statusFault {
		// Answered at once: a refusal, or an injected HTTP error.
		c.answer = w
		c.finish(now + ImmediateLatency)
		v.calls[id] = c
		return c, nil
	}
	c.g = g
	a := g.admission(v.srv)
	c.req = &engine.Request{Prompt: a.prompt, Output: a.output, Generated: a.generated, Deliver: c.deliver}
	v.cluster.Submit(c.req)
	v.calls[id] = c
	return c, nil
}

// submitPooling admits an embeddings or rerank request's sequences, each a
// prefill-only engine request, or keeps the answer to an invalid one.
func (v *Virtual) submitPooling(c *VirtualCall, w *virtualWriter, r *http.Request, rerank bool) error {
	var p *pooling
	if v.srv.allowJSON(w, r) {
		p = v.srv.preparePooling(w, r, rerank)
	}
	v.calls[c.id] = c
	if p == nil {
		c.answer = w
		c.finish(c.at + ImmediateLatency)
		return nil
	}
	c.pool = p
	c.subLeft = len(p.seqs)
	for i, a := range p.admissions() {
		c.subDue = append(c.subDue, -1)
		sub := &engine.Request{Prompt: a.prompt, Output: 1}
		sub.Deliver = func(_ int, at time.Duration) {
			c.subDue[i] = at
			if i == 0 {
				if info := sub.Info(); info.Scheduled {
					c.queue, c.queued = info.QueueTime, true
				}
			}
			c.subLeft--
			if c.subLeft == 0 {
				if c.onFirst != nil {
					c.onFirst(at)
				}
				c.finish(at)
			}
		}
		c.subs = append(c.subs, sub)
		v.cluster.Submit(sub)
	}
	return nil
}

// finish marks the call over at t; its done callback runs when the clock
// reaches t (at once when it already has, as for a delivery).
func (c *VirtualCall) finish(t time.Duration) {
	if c.done {
		return
	}
	c.done, c.endAt = true, t
	if c.onDone == nil {
		return
	}
	if t <= c.v.cluster.Now() && (c.req != nil || c.pool != nil) {
		c.onDone(t)
		return
	}
	c.v.timing.later = append(c.v.timing.later, pendingDone{at: t, call: c})
}

// deliver is the engine's callback for each released token.
func (c *VirtualCall) deliver(k int, at time.Duration) {
	info := c.req.Info()
	c.due = append(c.due, at)
	c.cached = info.CachedTokens
	if k == 0 {
		if info.Scheduled {
			c.queue, c.queued = info.QueueTime, true
		}
		if c.onFirst != nil {
			c.onFirst(at)
		}
	}
	if k == c.req.Output-1 {
		c.finish(at)
	}
}

// Done reports whether the request is over, and when it ended.
func (c *VirtualCall) Done() (time.Duration, bool) { return c.endAt, c.done }

// Submitted is when the request was sent.
func (c *VirtualCall) Submitted() time.Duration { return c.at }

// Cut ends the request now for cause (a timeout, a cancellation): the
// engine drops it, and its replay ends with the bytes released before now,
// its context cancelled with cause.
func (c *VirtualCall) Cut(cause error) {
	if c.done {
		return
	}
	c.cut = cause
	if c.req != nil {
		c.v.cluster.Cancel(c.req)
	}
	for _, sub := range c.subs {
		c.v.cluster.Cancel(sub)
	}
	c.done, c.endAt = true, c.v.cluster.Now()
}

// Forget drops a call that will not be replayed.
func (c *VirtualCall) Forget() { delete(c.v.calls, c.id) }

// ReplayStart sets the client's clock to when c was sent, for the replay's
// client to stamp its start with. cancel is the replay's context's: a cut
// call's response ends by calling it with the cause given to Cut, where a
// real client's context would have ended.
func (c *VirtualCall) ReplayStart(cancel context.CancelCauseFunc) {
	c.v.client = c.at
	c.cancel = cancel
}

// pendingDone is an immediate answer's end, waiting for the clock.
type pendingDone struct {
	at   time.Duration
	call *VirtualCall
}

// NextDone reports when the earliest immediate answer is due to end.
func (v *Virtual) NextDone() (time.Duration, bool) {
	if len(v.timing.later) == 0 {
		return 0, false
	}
	best := v.timing.later[0].at
	for _, p := range v.timing.later[1:] {
		best = min(best, p.at)
	}
	return best, true
}

// EndDue runs the done callbacks of immediate answers due by t, in the
// order they were sent.
func (v *Virtual) EndDue(t time.Duration) {
	var keep []pendingDone
	var run []pendingDone
	for _, p := range v.timing.later {
		if p.at <= t {
			run = append(run, p)
		} else {
			keep = append(keep, p)
		}
	}
	v.timing.later = keep
	for _, p := range run {
		p.call.onDone(p.at)
	}
}

// Transport is the replaying client's transport. A POST whose X-Request-Id
// names a submitted, finished call gets that call's response; any other
// request (GET /v1/models, /metrics, /version) is served at once at the
// current virtual time. Nothing is dialled.
func (v *Virtual) Transport() http.RoundTripper { return virtualTransport{v} }

type virtualTransport struct{ v *Virtual }

func (t virtualTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	v := t.v
	if r.Body != nil {
		_ = r.Body.Close()
	}
	trace := httptrace.ContextClientTrace(r.Context())
	if r.Method == http.MethodPost {
		id := r.Header.Get("X-Request-Id")
		c := v.calls[id]
		if c == nil {
			return nil, fmt.Errorf("sim: virtual request %q was not submitted", id)
		}
		if !c.done {
			return nil, fmt.Errorf("sim: virtual request %s replayed before it ended", id)
		}
		delete(v.calls, id)
		return c.replay(r, trace)
	}
	v.server = v.cluster.Now()
	v.client = v.server
	if trace != nil && trace.GotConn != nil {
		trace.GotConn(httptrace.GotConnInfo{Reused: true})
	}
	w := newVirtualWriter(v)
	v.srv.ServeHTTP(w, r)
	return w.response(r, nil), nil
}

// replay writes the call's response as the server would have, each write
// stamped with the virtual time its tokens were released.
func (c *VirtualCall) replay(r *http.Request, trace *httptrace.ClientTrace) (*http.Response, error) {
	v := c.v
	v.client = c.at
	if trace != nil && trace.GotConn != nil {
		trace.GotConn(httptrace.GotConnInfo{Reused: true})
	}
	w := c.answer
	switch {
	case w == nil && c.pool != nil:
		v.server = c.at
		w = newVirtualWriter(v)
		clocks := make([]tokenClock, len(c.subs))
		for i := range clocks {
			clocks[i] = &virtualSubClock{c: c, i: i}
		}
		v.srv.answerPooling(w, r, c.pool, clocks)
	case w == nil:
		v.server = c.at
		w = newVirtualWriter(v)
		c.g.clock = &virtualClock{c: c}
		v.srv.serveAdmitted(w, r, c.g)
	default:
		// An immediate answer leaves when it ends.
		w.headerAt = c.endAt
		for i := range w.writes {
			w.writes[i].at = c.endAt
		}
	}
	if w.status == 0 && c.cut != nil {
		// Cut before the server sent its headers (a response not
		// streamed): the request fails where the client gave up.
		return nil, c.end()
	}
	if trace != nil && trace.GotFirstResponseByte != nil {
		v.client = w.headerAt
		trace.GotFirstResponseByte()
	}
	return w.response(r, c), nil
}

// end is a cut call's end as its client meets it: the clock at the cut,
// the replay's context cancelled with the cause, and the cause as the
// error of the read or round trip that was waiting.
func (c *VirtualCall) end() error {
	c.v.client = c.endAt
	if c.cancel != nil {
		c.cancel(c.cut)
	}
	return c.cut
}

// virtualClock is a finished call's tokenClock for its replay: every token
// it will release is known.
type virtualClock struct{ c *VirtualCall }

// errCut ends a replay at a cut call's last released token.
var errCut = errors.New("sim: the client gave up on the request")

func (k *virtualClock) wait(_ context.Context, i int) (time.Time, error) {
	c := k.c
	if i < len(c.due) {
		c.v.server = c.due[i]
		return c.v.epoch.Add(c.due[i]), nil
	}
	c.v.server = c.endAt
	return c.v.epoch.Add(c.endAt), errCut
}

func (k *virtualClock) cached() int { return k.c.cached }

func (k *virtualClock) queued() (time.Duration, bool) { return k.c.queue, k.c.queued }

func (k *virtualClock) release() {}

// virtualSubClock is one sequence of a finished pooling call, for its
// replay: the answer goes out when the last prefill ended, whatever the
// order they are waited for in.
type virtualSubClock struct {
	c *VirtualCall
	i int
}

func (k *virtualSubClock) wait(context.Context, int) (time.Time, error) {
	c := k.c
	if d := c.subDue[k.i]; d >= 0 {
		c.v.server = max(c.v.server, d)
		return c.v.epoch.Add(d), nil
	}
	c.v.server = c.endAt
	return c.v.epoch.Add(c.endAt), errCut
}

func (k *virtualSubClock) cached() int { return 0 }

func (k *virtualSubClock) queued() (time.Duration, bool) { return k.c.queue, k.c.queued }

func (k *virtualSubClock) release() {}

// virtualTiming is the timing model of a Virtual server's Server: the
// engine is driven by the caller, not by a goroutine, and requests are
// admitted by Submit, not by the handler.
type virtualTiming struct {
	v     *Virtual
	gpu   *gpuMonitor
	later []pendingDone
}

func (t *virtualTiming) admit(admission) tokenClock { return closedClock{} }

func (t *virtualTiming) stats() modelStats {
	s := t.v.cluster.Stats()
	st := modelStats{
		running: s.Running, waiting: s.Waiting, kvUsage: s.KVUsage,
		prefixQueries: s.PrefixQueries, prefixHits: s.PrefixHits, preemptions: s.Preemptions,
		queueTimeSupported: true,
	}
	if t.gpu != nil {
		st.gpus = t.gpu.read(t.v.cluster)
	}
	return st
}

func (t *virtualTiming) close() {}

// closedClock answers every wait with an error: a generation that reached
// the handler without Submit, which virtual time cannot serve.
type closedClock struct{}

func (closedClock) wait(context.Context, int) (time.Time, error) {
	return time.Time{}, errors.New("sim: on virtual time, generation requests go through Virtual.Submit")
}
func (closedClock) cached() int { return 0 }
func (closedClock) release()    {}

// virtualWriter is a ResponseWriter that keeps what the server wrote and
// when, on the virtual clock.
type virtualWriter struct {
	v        *Virtual
	header   http.Header
	status   int
	headerAt time.Duration
	writes   []virtualWrite
}

type virtualWrite struct {
	at time.Duration
	b  []byte
}

func newVirtualWriter(v *Virtual) *virtualWriter {
	return &virtualWriter{v: v, header: http.Header{}}
}

func (w *virtualWriter) Header() http.Header { return w.header }

func (w *virtualWriter) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	w.status, w.headerAt = code, w.v.server
}

func (w *virtualWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if n := len(w.writes); n > 0 && w.writes[n-1].at == w.v.server {
		w.writes[n-1].b = append(w.writes[n-1].b, b...)
	} else {
		w.writes = append(w.writes, virtualWrite{at: w.v.server, b: append([]byte(nil), b...)})
	}
	return len(b), nil
}

// Flush is a no-op: every write is delivered at its own time.
func (w *virtualWriter) Flush() {}

// response is what the client receives. The body of a cut call (c set
// and cut) ends, after its last write, as its client met the cut.
func (w *virtualWriter) response(r *http.Request, c *VirtualCall) *http.Response {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	body := &virtualBody{v: w.v, writes: w.writes}
	if c != nil && c.cut != nil {
		body.cut = c
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.header, Body: body, ContentLength: -1, Request: r,
	}
}

// virtualBody hands the client one write at a time, moving the client's
// clock to the write's time first.
type virtualBody struct {
	v      *Virtual
	writes []virtualWrite
	off    int
	cut    *VirtualCall // set when the body ends at a cut
}

func (b *virtualBody) Read(p []byte) (int, error) {
	for len(b.writes) > 0 && b.off >= len(b.writes[0].b) {
		b.writes, b.off = b.writes[1:], 0
	}
	if len(b.writes) == 0 {
		if b.cut != nil {
			return 0, b.cut.end()
		}
		return 0, io.EOF
	}
	w := b.writes[0]
	b.v.client = w.at
	n := copy(p, w.b[b.off:])
	b.off += n
	return n, nil
}

func (b *virtualBody) Close() error { return nil }
