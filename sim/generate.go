package sim

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// The outcomes of a request, as ground truth reports them.
const (
	statusOK       = "ok"       // finished, possibly after a stall or slow headers
	statusCanceled = "canceled" // the client went away or the server closed first
	statusFault    = "fault"    // an injected fault ended it
)

// serveGeneration serves one chat or completion request: it validates the
// request, decides its fault, admits it to the timing model, and writes the
// tokens as they come due, as a stream or as one body at the end.
func (s *Server) serveGeneration(w http.ResponseWriter, r *http.Request, ep endpoint) {
	g := s.prepareGeneration(w, r, ep)
	if g == nil {
		return
	}
	if g.truth != nil {
		defer s.truth.write(g)
	}
	if g.status == statusFault {
		return
	}
	g.clock = s.timing.admit(g.admission(s))
	s.serveAdmitted(w, r, g)
}

// prepareGeneration is what the server does when a request arrives: it
// parses and validates it and decides its fault. It returns nil when it
// answered an invalid request with its error, and a generation whose
// status is statusFault when it answered it with an injected HTTP error;
// otherwise the request is ready to admit.
func (s *Server) prepareGeneration(w http.ResponseWriter, r *http.Request, ep endpoint) *generation {
	// The clock starts before parsing, as it would on a real server: the
	// client measures time to first token from when it sent the request.
	arrival := s.now()
	headerFault, headerSet, ferr := parseFaultHeader(r.Header.Values(FaultHeader))
	if ferr != nil {
		s.writeError(w, ferr)
		return nil
	}
	req, apiErr := s.parseRequest(w, r, ep)
	if apiErr != nil {
		s.writeError(w, apiErr)
		return nil
	}
	fault := headerFault
	if !headerSet {
		fault = s.chooseFault(req.counter)
	}
	g := &generation{
		ep:      ep,
		req:     req,
		id:      s.responseID(s.responseIDPrefix(ep), req.counter),
		created: arrival.Unix(),
		arrival: arrival,
		fault:   fault,
		status:  statusOK,
	}
	if s.truth != nil {
		g.truth = &truth{
			due:   make([]int64, 0, req.maxTokens),
			write: make([]int64, 0, req.maxTokens),
			flush: make([]int64, 0, req.maxTokens),
		}
	}
	if fault != nil && fault.Kind.status() != 0 {
		// A rejected request never reaches the model, as a rate
		// limiter or an overloaded frontend turns it away first.
		s.countFault(g)
		g.status = statusFault
		writeFaultStatus(w, fault)
	}
	return g
}

// admission is what the timing model learns of g: its prompt, its length,
// and the ids of the tokens it will generate, drawn as its text will be, so
// that the engine caches its reply's blocks.
func (g *generation) admission(s *Server) admission {
	ids := newTextSource(s.pool, s.cfg.Seed, g.req.seed, g.req.counter).ids(g.req.maxTokens)
	return admission{arrival: g.arrival, prompt: g.req.promptIDs, output: g.req.maxTokens, generated: ids}
}

// serveAdmitted writes an admitted request's answer as its clock releases
// its tokens, and releases the clock.
func (s *Server) serveAdmitted(w http.ResponseWriter, r *http.Request, g *generation) {
	s.metrics.running.Add(1)
	defer s.metrics.running.Add(-1)
	defer g.clock.release()
	g.text = newTextSource(s.pool, s.cfg.Seed, g.req.seed, g.req.counter)
	if g.req.stream {
		s.stream(w, r, g)
	} else {
		s.respond(w, r, g)
	}
}

// generation is an admitted request on its way out, and what became of it.
type generation struct {
	ep      endpoint
	req     parsedRequest
	clock   tokenClock  // when each token is due
	text    *textSource // what each token says
	id      string
	created int64 // arrival, in Unix seconds
	arrival time.Time
	fault   *FaultRule // nil when the request has none

	struck   bool      // the fault has struck and been counted
	hijacked bool      // the connection was taken from net/http
	status   string    // statusOK, statusCanceled or statusFault
	sent     int       // tokens delivered to the client
	firstAt  time.Time // when token 0 was produced
	// lateFrom excludes from the flush-lateness histogram the tokens due
	// before it (an offset from arrival): tokens an injected stall or
	// slow_headers held back are late by design, not because the host
	// fell behind.
	lateFrom time.Duration
	// Per-event observations, merged into the server's histograms in
	// batches (see histBatch).
	lateness, itl histBatch
	truth         *truth // per-token times for ground truth; nil when off
}

// responseID is the id of the request numbered counter: random, as a real
// server's, except on virtual time, where a run must be the same every
// time and the id is drawn from the server's seed and the counter.
func (s *Server) responseID(prefix string, counter uint64) string {
	if s.clock == nil {
		return newResponseID(prefix)
	}
	r := rand.New(rand.NewPCG(uint64(s.cfg.Seed), counter))
	return fmt.Sprintf("%s%016x%016x", prefix, r.Uint64(), r.Uint64())
}

// newResponseID returns an id shaped like vLLM's: a prefix and 32 hex digits.
func newResponseID(prefix string) string {
	return fmt.Sprintf("%s%016x%016x", prefix, rand.Uint64(), rand.Uint64())
}

// stream writes a request's tokens as server-sent events, each flushed when
// its last token comes due. The role chunk goes out with the first token, as
// on vLLM and llama.cpp, so that a client's time to first byte of the body is
// its time to first token. The finish, usage and [DONE] events follow the
// last token at once, so they share its write.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, g *generation) {
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	ctx := r.Context()
	g.lateness = histBatch{h: s.metrics.flushLateness}
	g.itl = histBatch{h: s.metrics.itl}
	defer g.lateness.flush()
	defer g.itl.flush()
	if s.pers == personaLlama {
		// llama-server closes the connection after every stream,
		// however it ended, without saying so in the headers.
		defer func() {
			if !g.hijacked && g.status != statusCanceled {
				g.hijacked = closeAfterResponse(w, r)
			}
		}()
	}
	if f := g.fault; f != nil && f.Kind == FaultSlowHeaders {
		// The model runs meanwhile: its clock counts from arrival, so
		// tokens due while the headers are held go out in a burst.
		s.countFault(g)
		if sleepCtx(ctx, g.arrival.Add(f.For).Sub(s.now())) != nil {
			g.status = statusCanceled
			return
		}
		g.lateFrom = s.now().Sub(g.arrival)
	}
	// Headers go out on arrival, before the first token, as a real server
	// accepts the stream before it finishes prefill.
	s.setStreamHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	flush()

	req := g.req
	n := req.maxTokens
	f := s.buildFrames(g)
	per := s.cfg.TokensPerEvent
	strike := -1 // the token a positioned fault replaces; n: the finish
	if g.fault != nil && g.fault.Kind.positioned() {
		strike = min(g.fault.After, n)
	}
	buf := make([]byte, 0, 1024)
	var lastFlush time.Duration // offset from arrival
	for k := 0; k < n; {
		if k == strike && s.strikeStream(ctx, w, g, k, flush) {
			return
		}
		// An event carries up to per tokens, and stops short of the
		// token a fault strikes at so that exactly After are sent.
		end := min(k+per, n)
		if k < strike && strike < end {
			end = strike
		}
		due, err := s.waitEvent(ctx, g, k, end)
		if err != nil {
			g.status = statusCanceled
			return // the client went away or the server is closing
		}
		buf = buf[:0]
		if k == 0 {
			g.firstAt = s.now()
			s.metrics.promptTokens.Add(uint64(req.promptTokens))
			buf = append(buf, f.role...)
		}
		buf = append(buf, f.tokenPre...)
		for range end - k {
			buf = append(buf, g.text.next()...)
		}
		final := end == n && strike != n
		if final && f.lastPost != nil {
			buf = append(buf, f.lastPost...)
		} else {
			buf = append(buf, f.tokenPost...)
		}
		if final {
			buf = s.appendEnd(buf, g, &f, n, s.now())
		}
		// Ground truth records when the write began as well as when
		// the flush returned: a client may read the bytes in between.
		var wrote time.Duration
		if g.truth != nil {
			wrote = s.now().Sub(g.arrival)
		}
		if _, err := w.Write(buf); err != nil {
			g.status = statusCanceled
			return
		}
		flush()
		// Offsets from arrival read only the monotonic clock, which
		// costs half of what time.Now does on the per-event path.
		at := s.now().Sub(g.arrival)
		s.flushed(g, k, end, due.Sub(g.arrival), wrote, at, lastFlush)
		lastFlush = at
		k = end
	}
	if strike == n {
		if s.strikeStream(ctx, w, g, n, flush) {
			return
		}
		// A stall held the finish back; it goes out now, closing the
		// last event where the personality puts finish_reason on it.
		buf = buf[:0]
		if f.lastPost != nil {
			buf = append(buf, f.tokenPre...)
			buf = append(buf, f.lastPost...)
		}
		buf = s.appendEnd(buf, g, &f, n, s.now())
		if _, err := w.Write(buf); err != nil {
			g.status = statusCanceled
			return
		}
		flush()
		lastFlush = s.now().Sub(g.arrival)
	}
	s.finished(g, lastFlush)
}

// waitEvent waits until the tokens k to end-1 of an event are due and
// returns the due time of the last, which is when the model lets the event
// go. With ground truth on it waits for each token in turn, to learn each
// one's due time; that ends at the same moment.
func (s *Server) waitEvent(ctx context.Context, g *generation, k, end int) (time.Time, error) {
	if g.truth == nil {
		return g.clock.wait(ctx, end-1)
	}
	var due time.Time
	for j := k; j < end; j++ {
		var err error
		if due, err = g.clock.wait(ctx, j); err != nil {
			return due, err
		}
		g.truth.due = append(g.truth.due, due.Sub(g.arrival).Nanoseconds())
	}
	return due, nil
}

// flushed accounts for an event of tokens k to end-1, due at due, whose
// write began at wrote (read only with ground truth on) and whose write and
// flush returned at at; prev is the previous event's flush. All four are
// offsets from arrival.
func (s *Server) flushed(g *generation, k, end int, due, wrote, at, prev time.Duration) {
	count := end - k
	if due >= g.lateFrom {
		g.lateness.observeN(at-due, uint64(count))
	}
	if k == 0 {
		s.metrics.ttft.observe(at)
	} else {
		g.itl.observeN(at-prev, 1)
	}
	s.metrics.generationTokens.Add(uint64(count))
	g.sent = end
	if g.truth != nil {
		for range count {
			g.truth.write = append(g.truth.write, wrote.Nanoseconds())
			g.truth.flush = append(g.truth.flush, at.Nanoseconds())
		}
	}
}

// strikeStream injects g's positioned fault in place of token k, or of the
// finish when k is the output length. It reports whether the stream is over;
// a stall returns false once it has passed.
func (s *Server) strikeStream(ctx context.Context, w http.ResponseWriter, g *generation, k int, flush func()) bool {
	if k < g.req.maxTokens {
		// The fault strikes when the token it replaces comes due, as
		// an engine fails during the step that would produce it.
		if _, err := g.clock.wait(ctx, k); err != nil {
			g.status = statusCanceled
			return true
		}
	}
	s.countFault(g)
	switch g.fault.Kind {
	case FaultErrorEvent:
		g.status = statusFault
		if _, err := io.WriteString(w, errorEvent); err == nil {
			flush()
		}
		return true
	case FaultTruncate:
		g.status = statusFault
		return true // returning ends the chunked body cleanly
	case FaultReset:
		g.status = statusFault
		// Without a connection to reset, a clean truncation is the
		// nearest thing.
		g.hijacked = resetConnection(w)
		return true
	case FaultStall:
		if err := stall(ctx, g.fault.For); err != nil {
			g.status = statusCanceled
			return true
		}
		g.lateFrom = s.now().Sub(g.arrival)
	}
	return false
}

// finished accounts for a request that ran to its finish, its last bytes
// flushed at last, an offset from arrival.
func (s *Server) finished(g *generation, last time.Duration) {
	g.status = statusOK
	s.metrics.e2e.observe(last)
	if q, ok := g.clock.(queueTimer); ok {
		if d, ok := q.queued(); ok {
			s.metrics.queue.observe(d)
		}
	}
	if n := g.req.maxTokens; n > 1 && !g.firstAt.IsZero() {
		s.metrics.tpot.observe((last - g.firstAt.Sub(g.arrival)) / time.Duration(n-1))
	}
	if g.req.finishReason == "stop" {
		s.metrics.successStop.Add(1)
	} else {
		s.metrics.successLength.Add(1)
	}
}

// respond waits until the last token is due and writes the whole response
// as one JSON body, as a non-streaming server does when generation ends.
// Positioned faults strike when their token comes due: error_event answers
// 500, truncate sends half the body, reset resets the connection, and a
// stall holds the finished body back.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, g *generation) {
	ctx, req, n := r.Context(), g.req, g.req.maxTokens
	f := g.fault
	last := n - 1 // the token whose time the response waits for
	if f != nil && f.Kind.positioned() && f.Kind != FaultStall {
		last = min(f.After, n-1)
	}
	// Waiting for the first token before the last keeps the prompt-token
	// counter in step with prefill, as for streams.
	due, err := g.clock.wait(ctx, 0)
	if err != nil {
		g.status = statusCanceled
		return
	}
	g.firstAt = s.now()
	s.metrics.promptTokens.Add(uint64(req.promptTokens))
	s.metrics.ttft.observe(g.firstAt.Sub(g.arrival))
	var dues []int64
	if g.truth != nil {
		dues = append(g.truth.due, due.Sub(g.arrival).Nanoseconds())
		for j := 1; j <= last; j++ {
			if due, err = g.clock.wait(ctx, j); err != nil {
				break
			}
			dues = append(dues, due.Sub(g.arrival).Nanoseconds())
		}
	} else if last > 0 {
		_, err = g.clock.wait(ctx, last)
	}
	if err != nil {
		g.status = statusCanceled
		return
	}
	lastAt := s.now()

	var sb strings.Builder
	sb.Grow(n * 8)
	for range n {
		sb.WriteString(g.text.next())
	}
	g.sent = n // what the body reports; reset below unless delivered
	body, err := s.responseBody(g, sb.String(), lastAt)
	g.sent = 0
	if err != nil {
		s.writeError(w, internalError(err))
		return
	}

	if f != nil {
		s.countFault(g)
		switch f.Kind {
		case FaultErrorEvent:
			g.status = statusFault
			s.writeError(w, &apiError{status: http.StatusInternalServerError, kind: "InternalServerError", message: "simulated fault: generation failed"})
			return
		case FaultReset:
			g.status = statusFault
			if g.hijacked = resetConnection(w); g.hijacked {
				return
			}
			writeTruncated(w, body)
			return
		case FaultTruncate:
			g.status = statusFault
			writeTruncated(w, body)
			return
		case FaultStall:
			if stall(ctx, f.For) != nil {
				g.status = statusCanceled
				return
			}
		case FaultSlowHeaders:
			if sleepCtx(ctx, g.arrival.Add(f.For).Sub(s.now())) != nil {
				g.status = statusCanceled
				return
			}
		}
	}
	wrote := s.now().Sub(g.arrival)
	writeJSON(w, http.StatusOK, body)
	done := s.now().Sub(g.arrival)
	g.sent = n
	s.metrics.generationTokens.Add(uint64(n))
	if n > 1 {
		// Without flushes between tokens, the handler sees only the
		// mean gap, which stands for each of the n-1 gaps.
		s.metrics.itl.observeN(lastAt.Sub(g.firstAt)/time.Duration(n-1), uint64(n-1))
	}
	if g.truth != nil {
		g.truth.due = dues
		for range n {
			g.truth.write = append(g.truth.write, wrote.Nanoseconds())
			g.truth.flush = append(g.truth.flush, done.Nanoseconds())
		}
	}
	s.finished(g, done)
}

// writeTruncated sends a 200 whose JSON body stops halfway. The response is
// well-formed HTTP, as from a proxy that lost its upstream and closed the
// body; only a JSON parser notices.
func writeTruncated(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body[:len(body)/2])
}
