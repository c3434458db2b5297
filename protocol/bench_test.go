package protocol

import (
	"bytes"
	"context"
	"io"
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
