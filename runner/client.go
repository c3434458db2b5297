package runner

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
	"strings"
	"syscall"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/tokenizer"
	openai "github.com/sashabaranov/go-openai"
)

// Causes attached to a request's context, so that when it ends early the
// record can say why: its own timeout, or a deliberate cancellation.
var (
	errRequestTimeout = errors.New("request timeout")
	errCanceled       = errors.New("cancelled by the client")
)

// maxErrorBody bounds how much of an error response is read and kept.
const maxErrorBody = 64 << 10

// maxResponseBody bounds a non-streamed response body.
const maxResponseBody = 64 << 20

// newTransport returns the HTTP transport a run uses. Compression is off
// because a gzip layer would buffer the stream and falsify event times;
// idle connections are kept for every simulated user, so connection setup
// is paid once per user, as a real client pool would.
func newTransport(maxConns int) *http.Transport {
	return &http.Transport{
		Proxy:               nil, // a benchmark measures the server, not a proxy picked up from the environment
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: max(maxConns, 64),
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		WriteBufferSize:     64 << 10,
		ReadBufferSize:      64 << 10,
	}
}

// client sends one kind of request (chat or completions) and measures it.
type client struct {
	http     *http.Client
	api      string
	apiKey   string
	headers  map[string]string
	tok      tokenizer.Tokenizer
	rowStart time.Time
}

// call is one request to make.
type call struct {
	url  string
	body []byte
	rec  *metrics.Record // pre-filled with ids, schedule and requested tokens
	// cancel, when set, is called cancelAfter after the request starts:
	// the row's deliberate cancellations, timed from the start stamp.
	cancel      func()
	cancelAfter time.Duration
}

// endpoint returns the path appended to a base URL.
func endpoint(api string) string {
	if api == "completions" {
		return "/completions"
	}
	return "/chat/completions"
}

// do sends the request and fills in c.rec. It never returns an error: every
// failure is recorded in the record, with its class, because a benchmark
// that stops at the first bad response measures nothing.
func (c *client) do(ctx context.Context, cl *call) {
	rec := cl.rec
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cl.url+endpoint(c.api), bytes.NewReader(cl.body))
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
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	// An idempotency key lets Go's transport retry a request whose reused
	// connection turns out to be closed before anything was read, as
	// llama.cpp's server leaves it after every stream. Without it, such a
	// request fails with a spurious EOF. The retry happens before any
	// response byte, inside the measured time, as the user would wait.
	req.Header.Set("Idempotency-Key", rec.ID)
	req.Header.Set("X-Request-Id", rec.ID)

	var start time.Time
	since := func(t time.Time) int64 { return t.Sub(start).Nanoseconds() }
	trace := &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			rec.ConnNS = since(time.Now())
			rec.ConnReused = info.Reused
		},
		GotFirstResponseByte: func() { rec.FirstByteNS = since(time.Now()) },
	}
	req = req.WithContext(httptrace.WithClientTrace(ctx, trace))

	start = time.Now()
	rec.StartNS = start.Sub(c.rowStart).Nanoseconds()
	rec.StartUnixNS = start.UnixNano()
	if cl.cancel != nil {
		t := time.AfterFunc(cl.cancelAfter, cl.cancel)
		defer t.Stop()
	}
	resp, err := c.http.Do(req)
	if err != nil {
		rec.EndNS = since(time.Now())
		rec.Error = classify(ctx, err, false)
		return
	}
	defer resp.Body.Close()
	rec.Status = resp.StatusCode
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		rec.EndNS = since(time.Now())
		rec.Error = &metrics.Error{Class: metrics.ErrHTTP, Message: httpErrorMessage(resp, body)}
		return
	}
	if rec.Stream {
		c.readStream(ctx, resp, rec, start)
	} else {
		c.readBody(ctx, resp, rec, start)
	}
}

// streamChunk holds the fields of a streamed chunk that the metrics use,
// and both error shapes servers send mid-stream: OpenAI's {"error": {...}}
// and vLLM's {"object": "error", "message": ...}.
type streamChunk struct {
	Object  string `json:"object"`
	Message string `json:"message"`
	Choices []struct {
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			Reasoning        string `json:"reasoning"`
		} `json:"delta"`
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *openai.Usage   `json:"usage"`
	Error json.RawMessage `json:"error"`
}

var doneMarker = []byte("[DONE]")

func (c *client) readStream(ctx context.Context, resp *http.Response, rec *metrics.Record, start time.Time) {
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		rec.EndNS = time.Since(start).Nanoseconds()
		rec.Error = &metrics.Error{Class: metrics.ErrProtocol,
			Message: fmt.Sprintf("asked for a stream, got Content-Type %q: %s", resp.Header.Get("Content-Type"), snippet(body))}
		return
	}
	c.readEvents(ctx, resp.Body, rec, start)
}

// readEvents reads a stream's events into rec: their arrival times, the
// text they carry, usage, and how the stream ended.
func (c *client) readEvents(ctx context.Context, body io.Reader, rec *metrics.Record, start time.Time) {
	sr := newSSEReader(body, time.Now)
	var text strings.Builder
	var usage *openai.Usage
	done := false
	for !done {
		ev, err := sr.next()
		if err != nil {
			rec.EndNS = time.Since(start).Nanoseconds()
			if errors.Is(err, io.EOF) {
				rec.Error = &metrics.Error{Class: metrics.ErrTruncated, Message: "the stream ended without data: [DONE]"}
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
			rec.Error = &metrics.Error{Class: metrics.ErrStream, Message: snippet(data)}
			break
		}
		var ch streamChunk
		if err := json.Unmarshal(data, &ch); err != nil {
			rec.EndNS = off
			rec.Error = &metrics.Error{Class: metrics.ErrProtocol, Message: fmt.Sprintf("bad JSON in stream: %v: %s", err, snippet(data))}
			break
		}
		if len(ch.Error) > 0 && !bytes.Equal(ch.Error, []byte("null")) || ch.Object == "error" {
			rec.EndNS = off
			rec.Error = &metrics.Error{Class: metrics.ErrStream, Message: errorText(data)}
			break
		}
		if ch.Usage != nil {
			usage = ch.Usage
		}
		carried := false
		for _, choice := range ch.Choices {
			content := choice.Delta.Content + choice.Text
			reasoning := choice.Delta.ReasoningContent + choice.Delta.Reasoning
			if content != "" || reasoning != "" {
				carried = true
				text.WriteString(reasoning)
				text.WriteString(content)
			}
			if content != "" && rec.FirstOutputNS == 0 {
				rec.FirstOutputNS = off
			}
			if choice.FinishReason != nil && *choice.FinishReason != "" {
				rec.FinishReason = *choice.FinishReason
			}
		}
		if carried {
			if rec.FirstTokenNS == 0 {
				rec.FirstTokenNS = off
			}
			rec.LastTokenNS = off
			rec.Events = append(rec.Events, off)
		}
	}
	c.countOutput(rec, text.String(), usage)
}

func (c *client) readBody(ctx context.Context, resp *http.Response, rec *metrics.Record, start time.Time) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	rec.EndNS = time.Since(start).Nanoseconds()
	if err != nil {
		rec.Error = classify(ctx, err, true)
		return
	}
	var usage struct {
		Usage *openai.Usage `json:"usage"`
	}
	var text string
	if c.api == "completions" {
		var r openai.CompletionResponse
		err = json.Unmarshal(body, &r)
		for _, ch := range r.Choices {
			text += ch.Text
			rec.FinishReason = ch.FinishReason
		}
	} else {
		var r openai.ChatCompletionResponse
		err = json.Unmarshal(body, &r)
		for _, ch := range r.Choices {
			text += ch.Message.ReasoningContent + ch.Message.Content
			rec.FinishReason = string(ch.FinishReason)
		}
	}
	if err == nil {
		err = json.Unmarshal(body, &usage)
	}
	if err != nil {
		rec.Error = &metrics.Error{Class: metrics.ErrProtocol, Message: fmt.Sprintf("bad JSON response: %v: %s", err, snippet(body))}
		return
	}
	c.countOutput(rec, text, usage.Usage)
}

// countOutput fills in both counts of each side of the request. Reasoning
// tokens are output tokens: the server generated them and the user waited
// for them.
func (c *client) countOutput(rec *metrics.Record, text string, usage *openai.Usage) {
	if text != "" {
		rec.OutputTokens.Client = c.tok.Count(text)
	}
	if usage != nil {
		p, o := usage.PromptTokens, usage.CompletionTokens
		rec.InputTokens.Server = &p
		rec.OutputTokens.Server = &o
	}
}

// classify maps a transport error to an error class. The request's context
// is consulted first: a deadline or cancellation surfaces as many different
// errors from deep in the stack.
func classify(ctx context.Context, err error, reading bool) *metrics.Error {
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		if errors.Is(cause, errRequestTimeout) {
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
	switch {
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return &metrics.Error{Class: metrics.ErrReset, Message: err.Error()}
	case errors.Is(err, errEventTooLarge):
		return &metrics.Error{Class: metrics.ErrProtocol, Message: err.Error()}
	case reading && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)):
		return &metrics.Error{Class: metrics.ErrTruncated, Message: "the connection closed mid-response: " + err.Error()}
	case errors.As(err, &dnsErr), errors.As(err, &opErr) && opErr.Op == "dial":
		return &metrics.Error{Class: metrics.ErrConnect, Message: err.Error()}
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
