package protocol

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
)

// BenchmarkSSEReader measures framing alone: splitting a vLLM-shaped stream
// into events and stamping them, without JSON decoding. One op is one event.
func BenchmarkSSEReader(b *testing.B) {
	var buf bytes.Buffer
	const events = 1024
	for i := 0; i < events; i++ {
		buf.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	}
	buf.WriteString("data: [DONE]\n\n")
	data := buf.Bytes()
	b.SetBytes(int64(len(data) / events))
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; {
		s := newSSEReader(bytes.NewReader(data), time.Now)
		for ; n < b.N; n++ {
			if _, err := s.next(); err == io.EOF {
				break
			}
		}
	}
}

// BenchmarkReadStream measures the whole per-event path of the client:
// framing, stamping and decoding the fields the metrics need. One op is
// one event.
func BenchmarkReadStream(b *testing.B) {
	var sb strings.Builder
	const events = 1024
	for i := 0; i < events; i++ {
		sb.WriteString(chatDelta(" word"))
	}
	sb.WriteString(sse(usage3) + "data: [DONE]\n\n")
	body := sb.String()
	c := testClient(b, "chat")
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += events {
		rec := &metrics.Record{Stream: true}
		c.readEvents(context.Background(), strings.NewReader(body), rec, time.Now())
		if rec.Error != nil || len(rec.Events) != events {
			b.Fatalf("%+v, %d events", rec.Error, len(rec.Events))
		}
	}
}

// BenchmarkStreamRequest measures what one streamed request of 256 text
// events costs the client besides the network: framing, decoding, the
// record's event times and the output count. One op is one request, so
// allocs/op is what a request allocates (issue 16 item 2).
func BenchmarkStreamRequest(b *testing.B) {
	var sb strings.Builder
	const events = 256
	for i := 0; i < events; i++ {
		sb.WriteString(chatDelta(" word"))
	}
	// The server's count is the events', as vLLM's is: no event is
	// counted alone.
	sb.WriteString(sse(`{"choices":[],"usage":{"prompt_tokens":16,"completion_tokens":256,"total_tokens":272}}`) + "data: [DONE]\n\n")
	body := sb.String()
	c := testClient(b, "chat")
	b.ReportAllocs()
	for b.Loop() {
		rec := &metrics.Record{Stream: true, OutputTokens: metrics.Tokens{Requested: events}}
		c.readEvents(context.Background(), strings.NewReader(body), rec, time.Now())
		if rec.Error != nil || len(rec.Events) != events {
			b.Fatalf("%+v, %d events", rec.Error, len(rec.Events))
		}
	}
}

// BenchmarkHugeEventStall shows what counting a 1 MiB output does to the
// other goroutines of the client (issue 16 item 6): while one request's
// output is counted, another goroutine sleeps 100 µs at a time, as a
// request waiting for its next event does; late-ms is how late its latest
// wake-up during a count was, the median over the counts (the machine's
// own stalls make the largest noise). On one processor (GOMAXPROCS 1: the other core busy
// with the rest of the run) a count on the request's goroutine runs until
// the scheduler preempts it, every 10 ms; the off-path count yields every
// 1,024 tokens. One op is one count.
func BenchmarkHugeEventStall(b *testing.B) {
	c := testClient(b, "chat")
	var sb strings.Builder
	for sb.Len() < 1<<20 {
		sb.WriteString(" The quick brown fox jumps over the lazy dog, 1,234 times; naïve café.\n")
	}
	text := sb.String()
	c.Tok.Count(text) // warm the word cache for both
	// "idle" sleeps as long as a count takes instead: the machine's own
	// lateness, the floor.
	took := time.Now()
	c.Tok.Count(text)
	idle := time.Since(took)
	for _, way := range []string{"idle", "inline", "off-path"} {
		b.Run(way, func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			var worst []time.Duration
			for b.Loop() {
				stop := make(chan struct{})
				late := make(chan time.Duration)
				go func() {
					var most time.Duration
					for {
						select {
						case <-stop:
							late <- most
							return
						default:
						}
						t0 := time.Now()
						time.Sleep(100 * time.Microsecond)
						if d := time.Since(t0) - 100*time.Microsecond; d > most {
							most = d
						}
					}
				}()
				time.Sleep(time.Millisecond) // the sleeper is asleep
				switch way {
				case "idle":
					time.Sleep(idle)
				case "inline":
					c.Tok.Count(text)
				default:
					c.countText(context.Background(), &metrics.Record{}, text, nil, nil)
				}
				close(stop)
				worst = append(worst, <-late)
			}
			slices.Sort(worst)
			b.ReportMetric(float64(worst[len(worst)/2])/1e6, "late-ms")
		})
	}
}
