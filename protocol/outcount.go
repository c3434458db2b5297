package protocol

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/tokenizer"
)

// Counting a huge output off the requests' path (issue 16, item 6).
//
// The client counts every answer with its own tokenizer (OutputTokens.
// Client) even when the server reports usage: report.semantics vllm and
// aiperf define output tokens by the client's count, and the record keeps
// both so that a reviewer can compare them. An answer of a few hundred
// tokens costs tens of microseconds to count, and is counted on the
// request's goroutine as it ends. A 1 MiB answer costs tens of
// milliseconds (about 15 to 120 ms here, by tokenizer), and on a two-core
// client that burst, on a request goroutine at the same priority as every
// other, held a core while the other requests' events waited to be read
// and stamped.
//
// Such an output is counted on a goroutine of its own, one at a time
// (counting, so that however many huge answers end together they take at
// most one core), and in steps of countStep tokens with a yield between
// steps (tokenizer.CountPaced), so that the goroutines stamping other
// requests' events, made runnable by the network meanwhile, run first:
// the count has the lowest priority Go's scheduler can give. The steps
// are pauses of one pass of the tokenizer, not slices of the text counted
// apart, so the count is exactly the one taken whole.
//
// The request's goroutine waits for the count without holding a core, and
// writes the record once counted, so the record, and the row's figures,
// are what they were. The alternatives were worse: counting incrementally
// as events arrive still counts a 1 MiB event in one burst on the request's
// goroutine, right when the next events are due; counting lazily at the
// row's end would hold every huge text until then and delay the row's
// records past live progress and a second Ctrl-C. If the request is
// cancelled, before or while its count waits (the run interrupted past its
// grace period, or the row's deliberate cancellations), the count is
// abandoned, so that an interrupted run does not wait on counts one after
// another, and the record says so (Tokens.Uncounted): its client count is
// absent, never a silent 0. A request's timeout ends the request, not the
// run, and its count is waited for.
const (
	// offPathCount is the output size from which counting leaves the
	// request's goroutine: below it a count takes under about 2 ms, less
	// than handing it over would save.
	offPathCount = 16 << 10
	// countStep is how many tokens the off-path count takes between
	// yields: well under a millisecond of work.
	countStep = 1024
)

// counting lets one off-path count run at a time.
var counting sync.Mutex

// outputCount is what counting a response's text gives: the whole text's
// count and, where needed, each event's.
type outputCount struct {
	client   int
	events   []int32
	complete bool
}

// countText counts text, the output of a response with the given event
// bounds (len(text) after each event; nil for a response that is not
// streamed), and fills in rec's client counts, OutputTokens.Client and
// EventTokens. It runs after the response has ended, off its timing. server is the server's output count, nil when it sent
// none; it decides whether each event needs counting alone.
func (c *Client) countText(ctx context.Context, rec *metrics.Record, text string, bounds []int32, server *int) {
	if len(text) < offPathCount {
		o := countAll(text, bounds, server, func(s string) (int, bool) { return c.Tok.Count(s), true })
		rec.OutputTokens.Client, rec.EventTokens = o.client, o.events
		return
	}
	if server != nil {
		v := *server // the counting goroutine reads its own copy
		server = &v
	}
	var stop atomic.Bool
	done := make(chan outputCount, 1)
	go func() {
		counting.Lock()
		defer counting.Unlock()
		done <- countAll(text, bounds, server, func(s string) (int, bool) {
			if len(s) < offPathCount {
				return c.Tok.Count(s), !stop.Load()
			}
			return tokenizer.CountPaced(c.Tok, s, countStep, func() bool {
				runtime.Gosched()
				return !stop.Load()
			})
		})
	}()
	var o outputCount
	select {
	case o = <-done:
	case <-ctx.Done():
		select {
		case o = <-done: // finished as the context ended
		default:
			if errors.Is(context.Cause(ctx), ErrRequestTimeout) {
				// A timeout ends the request, not the run: the count
				// is still worth its wait.
				o = <-done
				break
			}
			stop.Store(true)
		}
	}
	if !o.complete {
		rec.OutputTokens.Uncounted = true
		return
	}
	rec.OutputTokens.Client, rec.EventTokens = o.client, o.events
}

// countAll counts text and, where needed, each of its events with count;
// a count that reports false abandons the whole.
func countAll(text string, bounds []int32, server *int, count func(string) (int, bool)) outputCount {
	var o outputCount
	if text != "" {
		n, ok := count(text)
		if !ok {
			return o
		}
		o.client = n
	}
	o.complete = true
	// Each event's own count, unless the output count says every event
	// carried one token (events without text are not events here); a
	// single event's own count is the whole text's.
	out := o.client
	if server != nil {
		out = *server
	}
	switch {
	case len(bounds) == 0 || out == len(bounds):
	case len(bounds) == 1:
		o.events = []int32{int32(o.client)}
	default:
		o.events = make([]int32, len(bounds))
		prev := int32(0)
		for i, b := range bounds {
			n, ok := count(text[prev:b])
			if !ok {
				return outputCount{}
			}
			o.events[i] = int32(n)
			prev = b
		}
	}
	return o
}
