package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/tokenizer"
	openai "github.com/sashabaranov/go-openai"
)

// ErrRequestTimeout is the cause the runner attaches to a request's
// context with the row's timeout, so that a request ended by it is
// recorded with class timeout. Any other cause (a deliberate cancellation)
// is recorded as class cancelled, with the cause's text.
var ErrRequestTimeout = errors.New("request timeout")

// maxErrorBody bounds how much of an error response is read and kept.
const maxErrorBody = 64 << 10

// Bounds on the response bytes the client holds. A stream is read event
// by event, but what it delivers is kept until the request ends: its text
// (counted into output tokens when the stream is over), its event times,
// and the event being read; a non-streamed body is read whole before it is
// decoded. Without bounds a server could make each of hundreds of
// requests in flight hold gigabytes.
const (
	// maxResponseBody bounds what one request holds: a non-streamed body,
	// or a stream's text and event times with its reader's buffers. Real
	// answers are kilobytes; 64 MiB is a million tokens of text.
	maxResponseBody = 64 << 20
	// MaxBufferedResponses bounds what all requests in flight hold at
	// once, whatever the concurrency: 256 users at the per-request bound
	// would be 16 GiB. Normal responses never come near it (256 answers of
	// 100 KiB are 25 MiB), so it costs their timing nothing; a request
	// that would pass it fails, with class protocol.
	MaxBufferedResponses = 1 << 30
	// budgetStep is how much a request takes from the shared budget at a
	// time, so that the shared counter is touched once per 64 KiB a
	// response grows, not once per event.
	budgetStep = 64 << 10
)

// Errors of a response past the bounds.
var (
	errResponseTooLarge = fmt.Errorf("the response holds more than %d MiB, the most one request keeps", maxResponseBody>>20)
	errResponseBudget   = errors.New("the responses of the requests in flight hold all the memory the client gives them")
)

// Budget is the bytes that the responses of requests in flight may
// still take, shared by a run's requests (Client.Budget), so that a
// server cannot make the client hold more than the run allows.
type Budget struct {
	size int64
	left atomic.Int64
}

// NewBudget is a budget of size bytes: MaxBufferedResponses for a run.
func NewBudget(size int64) *Budget {
	b := &Budget{size: size}
	b.left.Store(size)
	return b
}

// respHold is one response's share of the budget: what it holds now, and
// what it has taken from the shared budget. A nil budget bounds the
// response by maxResponseBody only; a nil *respHold bounds nothing (for
// tests of the readers alone).
type respHold struct {
	budget     *Budget
	used, held int64
}

// grow accounts for n more bytes held, failing past either bound.
func (h *respHold) grow(n int64) error {
	if h == nil {
		return nil
	}
	h.used += n
	if h.used > maxResponseBody {
		return errResponseTooLarge
	}
	if h.used <= h.held || h.budget == nil {
		return nil
	}
	need := max(h.used-h.held, budgetStep)
	if h.budget.left.Add(-need) < 0 {
		h.budget.left.Add(need)
		return fmt.Errorf("%w (%d MiB in all)", errResponseBudget, h.budget.size>>20)
	}
	h.held += need
	return nil
}

// release gives the response's share back, once the request is over.
func (h *respHold) release() {
	if h != nil && h.budget != nil && h.held > 0 {
		h.budget.left.Add(h.held)
		h.held = 0
	}
}

// maxRedirects is how many redirects in a row are followed; Go's client
// stops at 10 too.
const maxRedirects = 10

// NewHTTPClient returns the HTTP client a run sends every request with,
// the discovery GETs and telemetry scrapes included: redirects are held
// to checkRedirect's rules, and no proxy or compression alters the timing.
func NewHTTPClient(maxConns int) *http.Client {
	return &http.Client{Transport: newTransport(maxConns), CheckRedirect: checkRedirect}
}

// RedirectError is a redirect the client did not follow. The runner's
// discovery tells it apart: the server answered, so it is reachable.
type RedirectError struct{ msg string }

func (e *RedirectError) Error() string { return e.msg }

// checkRedirect decides whether to follow a redirect, before anything is
// sent to its target. Go's client strips Authorization only when the
// redirect goes to another host; infermatrix refuses any other origin
// (scheme, host or port), so that the API key and the experiment's
// headers go only where the experiment sends them. It also refuses a 301,
// 302 or 303 that would turn a POST into a GET (the server would answer
// another request than the one measured), and stops after maxRedirects.
// A 307 or 308 to the same origin resends the same request, and is
// followed within the request's measured time.
func checkRedirect(req *http.Request, via []*http.Request) error {
	first := via[0]
	status := "a redirect"
	if req.Response != nil {
		status = req.Response.Status
	}
	to := redactedURL(req.URL)
	if t, ok := req.Context().Value(traceKey{}).(*connTrace); ok {
		t.redirects.Add(1)
	}
	switch {
	case !sameOrigin(req.URL, first.URL):
		return &RedirectError{fmt.Sprintf("%s to %s, another origin: not followed, so the API key and headers are not sent there", status, to)}
	case req.Method != first.Method:
		return &RedirectError{fmt.Sprintf("%s to %s: not followed, as it would turn the %s into a %s (a server may redirect with 307 or 308 to keep the request)", status, to, first.Method, req.Method)}
	case len(via) >= maxRedirects:
		return &RedirectError{fmt.Sprintf("%s to %s: stopped after %d redirects in a row", status, to, len(via))}
	}
	return nil
}

// sameOrigin says whether two URLs have the same scheme, host and port,
// the default port spelled out or not.
func sameOrigin(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if strings.EqualFold(u.Scheme, "https") {
			return "443"
		}
		return "80"
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

// redactedURL is a URL for a message: without user info, query or
// fragment, where credentials and tokens would be.
func redactedURL(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment = nil, "", false, "", ""
	return c.Redacted()
}

// newTransport returns the HTTP transport a run uses. Compression is off
// because a gzip layer would buffer the stream and falsify event times;
// idle connections are kept for every simulated user, so connection setup
// is paid once per user, as a real client pool would.
func newTransport(maxConns int) *http.Transport {
	return &http.Transport{
		Proxy:               nil, // a benchmark measures the server, not a proxy picked up from the environment
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: max(maxConns, 64),
		MaxIdleConns:        max(maxConns, 64),
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		WriteBufferSize:     64 << 10,
		ReadBufferSize:      64 << 10,
	}
}

// Client sends one kind of request (chat, completions, embeddings or
// rerank) and measures it. The runner makes one per row; its fields are
// the row's settings, set before the first request.
type Client struct {
	HTTP    *http.Client // NewHTTPClient's, shared by a run's rows
	API     string       // metrics.APIChat, APICompletions, APIEmbeddings or APIRerank
	APIKey  string       // sent as a Bearer token when set
	Headers map[string]string
	// Tok counts the tokens of what the server answers (Record's client
	// counts).
	Tok tokenizer.Tokenizer
	// RowStart is the row's clock: a record's times are from it.
	RowStart time.Time
	// Budget bounds the responses of all requests in flight; nil bounds
	// each by maxResponseBody alone.
	Budget *Budget
	// Clock, when set, stamps every time the client records instead of
	// the wall clock: a run on the built-in server's virtual clock (run
	// --virtual) replays each response through this same code, and its
	// transport moves the clock to when each byte was sent.
	Clock func() time.Time
}

// now is the client's clock.
func (c *Client) now() time.Time {
	if c.Clock != nil {
		return c.Clock()
	}
	return time.Now()
}

// Endpoint returns the path the API's requests go to, appended to a base
// URL.
func Endpoint(api string) string { return endpoint(api) }

// Call is one request to make.
type Call struct {
	URL  string // the server's base URL; the API's path is appended
	Body []byte
	Rec  *metrics.Record // pre-filled with ids, schedule and requested tokens
	// Cancel, when set, is called CancelAfter after the request starts:
	// the row's deliberate cancellations, timed from the start stamp.
	Cancel      func()
	CancelAfter time.Duration
	// OnConn, when set, is called when the request gets a fresh
	// connection, and again at the response's first byte (from the
	// transport's goroutine): the server is reachable. A kept-alive
	// connection alone does not say so.
	OnConn func()
}

// endpoint returns the path appended to a base URL.
func endpoint(api string) string {
	switch api {
	case metrics.APICompletions:
		return "/completions"
	case metrics.APIEmbeddings:
		return "/embeddings"
	case metrics.APIRerank:
		return "/rerank"
	}
	return "/chat/completions"
}

// Do sends the request and fills in cl.Rec. It never returns an error: every
// failure is recorded in the record, with its class, because a benchmark
// that stops at the first bad response measures nothing.
func (c *Client) Do(ctx context.Context, cl *Call) {
	rec := cl.Rec
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cl.URL+endpoint(c.API), bytes.NewReader(cl.Body))
	if err != nil {
		rec.Error = &metrics.Error{Class: metrics.ErrConnect, Message: err.Error()}
		return
	}
	req.Header.Set("Content-Type", "application/json")
	if rec.Stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	for k, v := range c.Headers {
		req.Header.Set(k, v)
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	// An idempotency key lets Go's transport retry a request whose reused
	// connection turns out to be closed before anything was read, as
	// llama.cpp's server leaves it after every stream. Without it, such a
	// request fails with a spurious EOF. The retry happens before any
	// response byte, inside the measured time, as the user would wait; it is
	// counted in the record (retries), because the same mechanism would also
	// resend a request whose connection the server dropped while working on
	// it.
	req.Header.Set("Idempotency-Key", rec.ID)
	req.Header.Set("X-Request-Id", rec.ID)

	tr := &connTrace{onConn: cl.OnConn}
	req = req.WithContext(httptrace.WithClientTrace(context.WithValue(ctx, traceKey{}, tr), tr.hooks()))
	defer tr.copyTo(rec)

	start := c.now()
	tr.start, tr.now = start, c.now
	rec.StartNS = start.Sub(c.RowStart).Nanoseconds()
	rec.StartUnixNS = start.UnixNano()
	if cl.Cancel != nil {
		t := time.AfterFunc(cl.CancelAfter, cl.Cancel)
		defer t.Stop()
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		rec.EndNS = c.now().Sub(start).Nanoseconds()
		rec.Error = classify(ctx, err, false)
		return
	}
	defer resp.Body.Close()
	rec.Status = resp.StatusCode
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		rec.EndNS = c.now().Sub(start).Nanoseconds()
		rec.Error = &metrics.Error{Class: metrics.ErrHTTP, Message: httpErrorMessage(resp, body)}
		return
	}
	if rec.Stream {
		c.readStream(ctx, resp, rec, start)
	} else {
		c.readBody(ctx, resp, rec, start)
	}
}

// connTrace collects the httptrace callbacks of one request. The transport
// calls them on its own goroutines, sometimes after Do has returned (for a
// cancelled request), so they write atomics, which are copied into the
// record once the request is over; a callback after that changes nothing
// the record holds.
type connTrace struct {
	start     time.Time // set before Do; read only by callbacks Do triggers
	now       func() time.Time
	conns     atomic.Int32
	connNS    atomic.Int64
	firstByte atomic.Int64
	reused    atomic.Bool
	redirects atomic.Int32 // redirects followed or refused: connections that are not retries
	onConn    func()
}

// traceKey is the context key of a request's connTrace, for checkRedirect.
type traceKey struct{}

func (t *connTrace) hooks() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			t.conns.Add(1)
			t.connNS.Store(t.now().Sub(t.start).Nanoseconds())
			t.reused.Store(info.Reused)
			// A kept-alive connection proves nothing: when the server
			// dies, its idle connections are handed out before anyone
			// learns they are closed. A fresh one does.
			if t.onConn != nil && !info.Reused {
				t.onConn()
			}
		},
		GotFirstResponseByte: func() {
			t.firstByte.CompareAndSwap(0, t.now().Sub(t.start).Nanoseconds())
			if t.onConn != nil {
				t.onConn()
			}
		},
	}
}

func (t *connTrace) copyTo(rec *metrics.Record) {
	rec.ConnNS = t.connNS.Load()
	rec.ConnReused = t.reused.Load()
	rec.FirstByteNS = t.firstByte.Load()
	if n := t.conns.Load() - t.redirects.Load(); n > 1 {
		rec.Retries = int(n - 1)
	}
}

var doneMarker = []byte("[DONE]")

// preallocEvents is the most text events a stream's record makes room for
// before they arrive, from the tokens the request asked for: a record's
// unused room is at most 4 KiB of event times.
const preallocEvents = 512

func (c *Client) readStream(ctx context.Context, resp *http.Response, rec *metrics.Record, start time.Time) {
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		rec.EndNS = c.now().Sub(start).Nanoseconds()
		rec.Error = &metrics.Error{Class: metrics.ErrProtocol,
			Message: fmt.Sprintf("asked for a stream, got Content-Type %q: %s", resp.Header.Get("Content-Type"), snippet(body))}
		return
	}
	if c.readEvents(ctx, resp.Body, rec, start) {
		drain(resp.Body)
	}
}

// Bounds on reading what follows [DONE].
const (
	drainWait  = 100 * time.Millisecond
	drainBytes = 64 << 10
)

// drain reads what is left of a body after [DONE], normally just the
// chunked encoding's final empty chunk. Go's transport reuses a connection
// only when its body was read to the end; without this, every streamed
// request would pay a new TCP (and TLS) setup inside its TTFT. The wait is
// bounded, for servers that keep a stream open after [DONE], and happens
// after the end of the response is stamped.
func drain(body io.ReadCloser) {
	t := time.AfterFunc(drainWait, func() { body.Close() })
	defer t.Stop()
	io.CopyN(io.Discard, body, drainBytes)
}

// readEvents reads a stream's events into rec: their arrival times, the
// text they carry, usage, and how the stream ended. It reports whether the
// stream ended with [DONE].
func (c *Client) readEvents(ctx context.Context, body io.Reader, rec *metrics.Record, start time.Time) (done bool) {
	h := &respHold{budget: c.Budget}
	defer h.release()
	sr := newSSEReader(body, c.now)
	defer sr.release()
	sr.hold = h
	var text []byte
	var held int       // the capacity of text, Events and bounds, as accounted in h
	var bounds []int32 // len(text) after each text event, for EventTokens
	if n := min(rec.OutputTokens.Requested, preallocEvents); n > 0 && rec.Events == nil {
		// Room for the answer asked for: growing the three slices
		// event by event cost a 256-token request two dozen allocations.
		rec.Events, bounds, text = make([]int64, 0, n), make([]int32, 0, n), make([]byte, 0, 6*n)
	}
	var usage *openai.Usage
	usageAt := -1 // how many text events preceded the usage
	var cacheN int
	var hasCacheN bool
	var ch chunkFields
	reply := replyOf(ctx) // a conversation's turn keeps its answer
	for !done {
		ev, err := sr.next()
		if err != nil {
			rec.EndNS = c.now().Sub(start).Nanoseconds()
			if errors.Is(err, io.EOF) {
				rec.Error = &metrics.Error{Class: metrics.ErrTruncated, Message: "the stream ended without data: [DONE]", Detail: metrics.DetailCleanEOF}
			} else {
				rec.Error = classify(ctx, err, true)
			}
			break
		}
		off := ev.At.Sub(start).Nanoseconds()
		data := bytes.TrimSpace(ev.Data)
		if bytes.Equal(data, doneMarker) {
			rec.EndNS = off
			done = true
			break
		}
		if ev.Type == "error" {
			rec.EndNS = off
			rec.Error = &metrics.Error{Class: metrics.ErrStream, Message: snippet(data), Detail: metrics.DetailErrorEvent}
			break
		}
		if err := ch.decode(data); err != nil {
			rec.EndNS = off
			rec.Error = &metrics.Error{Class: metrics.ErrProtocol, Message: fmt.Sprintf("bad JSON in stream: %v: %s", err, snippet(data))}
			break
		}
		if ch.hasError || string(ch.object) == "error" {
			rec.EndNS = off
			rec.Error = &metrics.Error{Class: metrics.ErrStream, Message: errorText(data), Detail: metrics.DetailErrorData}
			break
		}
		if rec.ResponseID == "" && len(ch.id) > 0 {
			rec.ResponseID = string(ch.id)
		}
		// Stamps vLLM's benchmark times by, for semantics: vllm.
		if len(ch.choices) > 0 {
			if rec.FirstChoiceNS == 0 {
				rec.FirstChoiceNS = off
			}
			rec.LastChoiceNS = off
		} else if ch.usage != nil {
			rec.UsageNS = off
		}
		carried := false
		for i := range ch.choices {
			choice := &ch.choices[i]
			hasContent := len(choice.deltaContent)+len(choice.text) > 0
			if hasContent || len(choice.reasoningContent)+len(choice.reasoning) > 0 {
				carried = true
				text = append(text, choice.reasoningContent...)
				text = append(text, choice.reasoning...)
				text = append(text, choice.deltaContent...)
				text = append(text, choice.text...)
			}
			if reply != nil {
				reply.add(choice.deltaContent, choice.text)
			}
			if hasContent && rec.FirstOutputNS == 0 {
				rec.FirstOutputNS = off
			}
			if choice.hasFinish && len(choice.finish) > 0 {
				rec.FinishReason = string(choice.finish)
			}
		}
		if carried {
			if rec.FirstTokenNS == 0 {
				rec.FirstTokenNS = off
				firstToken(ctx)
			}
			rec.LastTokenNS = off
			rec.Events = append(rec.Events, off)
			bounds = append(bounds, int32(len(text)))
			if now := cap(text) + 12*cap(bounds); now != held {
				err := h.grow(int64(now - held))
				held = now
				if err != nil {
					rec.EndNS = off
					rec.Error = classify(ctx, err, true)
					break
				}
			}
		}
		if ch.usage != nil {
			u := *ch.usage
			usage, usageAt = &u, len(rec.Events)
		}
		if ch.hasCacheN {
			cacheN = ch.cacheN
			hasCacheN = true
		}
	}
	if hasCacheN {
		rec.CachedTokens = &cacheN
	}
	if usage != nil && usageAt < len(rec.Events) {
		// Usage sent before the last text (a running count, or a server
		// bug) does not count the whole answer: fall back to the client's
		// count rather than report a short one.
		usage = nil
	}
	if done && len(rec.Events) == 0 && usage == nil {
		rec.Error = &metrics.Error{Class: metrics.ErrProtocol, Message: "the stream carried no generated text and no usage"}
	}
	server := setUsage(rec, usage)
	c.countText(ctx, rec, string(text), bounds, server)
	return done
}

func (c *Client) readBody(ctx context.Context, resp *http.Response, rec *metrics.Record, start time.Time) {
	h := &respHold{budget: c.Budget}
	defer h.release()
	body, last, err := readAllTimed(resp.Body, h, c.now)
	if err != nil {
		rec.EndNS = c.now().Sub(start).Nanoseconds()
		rec.Error = classify(ctx, err, true)
		return
	}
	// The response ended when its last byte was read, not when the read
	// that found the end of the body returned: with chunked encoding that
	// read waits for the terminating chunk, and nothing after it is the
	// answer.
	rec.EndNS = last.Sub(start).Nanoseconds()
	if last.IsZero() {
		rec.EndNS = c.now().Sub(start).Nanoseconds()
	}
	if metrics.IsPooling(c.API) {
		c.readPooled(body, rec) // embeddings.go
		return
	}
	// Fields go-openai's types lack: whether usage was sent at all, and
	// the "reasoning" field newer vLLM builds use.
	var extra struct {
		Usage   *openai.Usage `json:"usage"`
		Timings *llamaTimings `json:"timings"`
		Choices []struct {
			Message struct {
				Reasoning string `json:"reasoning"`
			} `json:"message"`
		} `json:"choices"`
	}
	var text string
	choices := 0
	if c.API == "completions" {
		var r openai.CompletionResponse
		err = json.Unmarshal(body, &r)
		choices = len(r.Choices)
		for _, ch := range r.Choices {
			text += ch.Text
			rec.FinishReason = ch.FinishReason
		}
	} else {
		var r openai.ChatCompletionResponse
		err = json.Unmarshal(body, &r)
		choices = len(r.Choices)
		for _, ch := range r.Choices {
			text += ch.Message.ReasoningContent + ch.Message.Content
			rec.FinishReason = string(ch.FinishReason)
			if reply := replyOf(ctx); reply != nil {
				reply.add([]byte(ch.Message.Content))
			}
		}
	}
	if err == nil {
		err = json.Unmarshal(body, &extra)
	}
	if err != nil {
		rec.Error = &metrics.Error{Class: metrics.ErrProtocol, Message: fmt.Sprintf("bad JSON response: %v: %s", err, snippet(body))}
		return
	}
	if choices == 0 {
		// {} or {"choices": null} from a proxy would otherwise count as a
		// fast, successful, empty answer.
		rec.Error = &metrics.Error{Class: metrics.ErrProtocol, Message: "response has no choices: " + snippet(body)}
		return
	}
	for _, ch := range extra.Choices {
		text += ch.Message.Reasoning
	}
	if t := extra.Timings; t != nil && t.CacheN != nil {
		n := *t.CacheN
		rec.CachedTokens = &n
	}
	c.countText(ctx, rec, text, nil, setUsage(rec, extra.Usage))
}

// readAllTimed reads r to its end and returns what it read and when the
// last byte arrived: the return of the last read that gave data, zero if
// none did. It is io.ReadAll with a clock, and with h accounting for its
// buffer as it grows.
func readAllTimed(r io.Reader, h *respHold, now func() time.Time) ([]byte, time.Time, error) {
	b := make([]byte, 0, 4096)
	var last time.Time
	for {
		if len(b) == cap(b) {
			was := cap(b)
			b = append(b, 0)[:len(b)]
			if err := h.grow(int64(cap(b) - was)); err != nil {
				return b, last, err
			}
		}
		n, err := r.Read(b[len(b):cap(b)])
		if n > 0 {
			last = now()
			b = b[:len(b)+n]
		}
		if err == io.EOF {
			return b, last, nil
		}
		if err != nil {
			return b, last, err
		}
	}
}

// setUsage fills in the server's counts of each side of the request, and
// returns its output count, nil when it sent none; countText
// (outcount.go) fills in the client's. Reasoning tokens are output tokens:
// the server generated them and the user waited for them.
func setUsage(rec *metrics.Record, usage *openai.Usage) *int {
	if usage != nil {
		p, o := usage.PromptTokens, usage.CompletionTokens
		rec.InputTokens.Server = &p
		rec.OutputTokens.Server = &o
		if d := usage.PromptTokensDetails; d != nil {
			// OpenAI's field, which vLLM (--enable-prompt-tokens-details),
			// SGLang and llama.cpp fill; it wins over llama.cpp's
			// timings, which say the same.
			c := d.CachedTokens
			rec.CachedTokens = &c
		}
	}
	return rec.OutputTokens.Server
}

// classify maps a transport error to an error class. The request's context
// is consulted first: a deadline or cancellation surfaces as many different
// errors from deep in the stack.
func classify(ctx context.Context, err error, reading bool) *metrics.Error {
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		if errors.Is(cause, ErrRequestTimeout) {
			return &metrics.Error{Class: metrics.ErrTimeout, Message: "no complete response within the request timeout"}
		}
		msg := "cancelled"
		if cause != nil {
			msg = cause.Error()
		}
		return &metrics.Error{Class: metrics.ErrCanceled, Message: msg}
	}
	var opErr *net.OpError
	var dnsErr *net.DNSError
	var redir *RedirectError
	switch {
	case errors.As(err, &redir):
		return &metrics.Error{Class: metrics.ErrRedirect, Message: redir.msg}
	case errors.Is(err, errResponseTooLarge), errors.Is(err, errResponseBudget):
		return &metrics.Error{Class: metrics.ErrProtocol, Message: err.Error()}
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return &metrics.Error{Class: metrics.ErrConnect, Detail: metrics.DetailClientFiles,
			Message: "the client is out of file descriptors, so it could not open a connection (lower the requests in flight with max_concurrency, or raise the limit: ulimit -n): " + err.Error()}
	case errors.As(err, &dnsErr), errors.As(err, &opErr) && opErr.Op == "dial":
		// Before the reset case: a dial the server resets (its listener
		// closed with the connection still in its backlog, as when it
		// dies) got no connection, and the run's gate must hear of it
		// as a refusal, or it keeps sending into a dead server.
		return &metrics.Error{Class: metrics.ErrConnect, Message: err.Error()}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return &metrics.Error{Class: metrics.ErrReset, Message: err.Error()}
	case errors.Is(err, errEventTooLarge), strings.Contains(err.Error(), "chunk"):
		// A malformed chunked encoding is the server's protocol error,
		// not a network one.
		return &metrics.Error{Class: metrics.ErrProtocol, Message: err.Error()}
	case reading && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)):
		return &metrics.Error{Class: metrics.ErrTruncated, Message: "the connection closed mid-response: " + err.Error()}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &metrics.Error{Class: metrics.ErrReset, Message: "the server closed the connection before responding: " + err.Error()}
	case reading:
		return &metrics.Error{Class: metrics.ErrReset, Message: err.Error()}
	default:
		return &metrics.Error{Class: metrics.ErrConnect, Message: err.Error()}
	}
}

// httpErrorMessage extracts the server's message from an OpenAI-style error
// body, falling back to the raw text.
func httpErrorMessage(resp *http.Response, body []byte) string {
	msg := errorText(body)
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		msg += " (Retry-After: " + ra + ")"
	}
	return fmt.Sprintf("%s: %s", resp.Status, msg)
}

// errorText finds the message in {"error": {"message": ...}},
// {"error": "..."} or {"object": "error", "message": ...}.
func errorText(body []byte) string {
	var e struct {
		Message string          `json:"message"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil {
		if len(e.Error) > 0 {
			var inner struct {
				Message string `json:"message"`
			}
			if json.Unmarshal(e.Error, &inner) == nil && inner.Message != "" {
				return inner.Message
			}
			var s string
			if json.Unmarshal(e.Error, &s) == nil && s != "" {
				return s
			}
		}
		if e.Message != "" {
			return e.Message
		}
	}
	return snippet(body)
}

// snippet shortens a body for an error message.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}
