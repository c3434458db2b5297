package protocol

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/tokenizer"
)

// goroutineID is the running goroutine's number, from its stack header
// ("goroutine 7 [running]:"), for tests only.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := bytes.Fields(buf)
	return string(f[1])
}

// spyTok is a tokenizer that notes which goroutines count, and can hold a
// count until released.
type spyTok struct {
	tokenizer.Tokenizer
	mu      sync.Mutex
	on      map[string]int // goroutine: bytes counted there
	started chan struct{}  // when hold is set, closed as a count begins
	hold    chan struct{}  // when set, a count waits for it
}

func (s *spyTok) Count(text string) int {
	s.mu.Lock()
	s.on[goroutineID()] += len(text)
	s.mu.Unlock()
	if s.hold != nil && len(text) >= offPathCount {
		close(s.started)
		<-s.hold
	}
	return s.Tokenizer.Count(text)
}

// hugeText is about n bytes of varied prose.
func hugeText(n int) string {
	words := strings.Fields("The quick brown fox jumps over the lazy dog; 1,234 naïve cafés — 東京 ok? {\"k\": [1, 2]}\n")
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		sb.WriteString(words[(i*7)%len(words)])
		sb.WriteByte(" \n"[i%13/12])
	}
	return sb.String()
}

// TestHugeOutputIsCountedOffTheRequestGoroutine: a 1 MiB output event is
// not counted on the goroutine that reads the request's stream (the
// burst that held a core from other requests' stamps, issue 16 item 6),
// and its counts are the ones the request's goroutine took before:
// Tok.Count of the whole text and of each event, whether the server sent
// usage or not. A normal answer is still counted where it ends.
func TestHugeOutputIsCountedOffTheRequestGoroutine(t *testing.T) {
	huge := hugeText(1 << 20)
	some := huge[:64<<10]
	parts := []string{some[:10<<10], some[10<<10 : 30<<10], some[30<<10 : 50<<10], some[50<<10:]}
	cases := []struct {
		name   string
		events []string
		usage  bool
		// spy: count through spyTok, to see on which goroutines; it
		// hides the tokenizer's type, so CountPaced counts it whole.
		spy bool
	}{
		{"one 1 MiB event with usage", []string{huge}, true, false},
		{"one 1 MiB event with usage, seen", []string{huge}, true, true},
		{"one 64 KiB event without usage", []string{some}, false, true},
		{"four events with usage", parts, true, true},
		{"four events without usage", parts, false, false},
		{"a normal answer", []string{" a", " short", " answer"}, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testClient(t, "chat")
			tok := c.Tok
			spy := &spyTok{Tokenizer: c.Tok, on: map[string]int{}}
			if tc.spy {
				c.Tok = spy
			}
			var body strings.Builder
			for _, e := range tc.events {
				body.WriteString(chatDelta(e))
			}
			if tc.usage {
				body.WriteString(sse(usage3))
			}
			body.WriteString("data: [DONE]\n\n")
			rec := &metrics.Record{Stream: true}
			if !c.readEvents(context.Background(), strings.NewReader(body.String()), rec, time.Now()) || rec.Error != nil {
				t.Fatalf("stream not read: %+v", rec.Error)
			}

			text := strings.Join(tc.events, "")
			if want := tok.Count(text); rec.OutputTokens.Client != want || rec.OutputTokens.Uncounted {
				t.Errorf("client count %d (uncounted %v), want Count's %d", rec.OutputTokens.Client, rec.OutputTokens.Uncounted, want)
			}
			// Each event counted alone, unless there are as many
			// tokens as events (the server's count of 3 when sent).
			var want []int32
			if out := tok.Count(text); out != len(tc.events) && (!tc.usage || len(tc.events) != 3) {
				for _, e := range tc.events {
					want = append(want, int32(tok.Count(e)))
				}
			}
			if !slicesEqual(rec.EventTokens, want) {
				t.Errorf("event tokens %v, want %v", rec.EventTokens, want)
			}

			me := goroutineID()
			huge := len(text) >= offPathCount
			for g, n := range spy.on {
				if huge && g == me {
					t.Errorf("%d bytes counted on the request's goroutine", n)
				}
				if !huge && g != me {
					t.Errorf("a %d-byte answer counted on another goroutine", n)
				}
			}
			if tc.spy && len(spy.on) == 0 {
				t.Error("nothing counted")
			}
		})
	}
}

func slicesEqual(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestHugeOutputCountAbandonedWhenTheRequestEnds: when the request is
// cancelled (the run interrupted past its grace period) while its output
// is being counted, the record is given back without waiting, its client
// count marked absent rather than a silent 0. A timeout ends only the
// request, and its count is waited for.
func TestHugeOutputCountAbandonedWhenTheRequestEnds(t *testing.T) {
	for _, tc := range []struct {
		cause     error
		uncounted bool
	}{{context.Canceled, true}, {ErrRequestTimeout, false}} {
		t.Run(tc.cause.Error(), func(t *testing.T) {
			c := testClient(t, "chat")
			spy := &spyTok{Tokenizer: c.Tok, on: map[string]int{}, started: make(chan struct{}), hold: make(chan struct{})}
			c.Tok = spy
			ctx, cancel := context.WithCancelCause(context.Background())
			go func() {
				<-spy.started
				cancel(tc.cause)
				if !tc.uncounted {
					time.Sleep(10 * time.Millisecond) // the request waits on
					close(spy.hold)
				}
			}()
			if tc.uncounted {
				defer close(spy.hold)
			}
			text := hugeText(64 << 10)
			body := chatDelta(text) + sse(usage3) + "data: [DONE]\n\n"
			rec := &metrics.Record{Stream: true}
			c.readEvents(ctx, strings.NewReader(body), rec, time.Now())
			if rec.Error != nil {
				t.Fatalf("the response itself was whole: %+v", rec.Error)
			}
			if tc.uncounted {
				if !rec.OutputTokens.Uncounted || rec.OutputTokens.Client != 0 || rec.EventTokens != nil {
					t.Errorf("output tokens %+v, event tokens %v: want the client count marked absent", rec.OutputTokens, rec.EventTokens)
				}
			} else if want := spy.Tokenizer.Count(text); rec.OutputTokens.Uncounted || rec.OutputTokens.Client != want {
				t.Errorf("output tokens %+v: want the client's count %d", rec.OutputTokens, want)
			}
			if rec.OutputTokens.Count() != 3 {
				t.Errorf("Count() = %d, want the server's 3", rec.OutputTokens.Count())
			}
		})
	}
}
