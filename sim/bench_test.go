package sim

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// discardWriter is a flushing ResponseWriter that keeps nothing, so that the
// benchmark measures the server's own work per token, not a client's.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Flush()                      {}

// BenchmarkStreamTokens measures the streaming hot path with no waiting: the
// cost of producing and writing one token's event. Later issues want 200k
// tokens/s on one core.
func BenchmarkStreamTokens(b *testing.B) {
	s, err := New(Config{TTFT: time.Nanosecond, ITL: time.Nanosecond})
	if err != nil {
		b.Fatal(err)
	}
	const n = 4096
	body := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":4096,"stream":true,"stream_options":{"include_usage":true}}`
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		s.ServeHTTP(w, r)
	}
	b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds(), "tokens/s")
}
