package sim

import (
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
)

// metrics are the server-side counters a benchmark scrapes to cross-check
// its own client-side measurements. They are atomics, not a lock, because
// they are updated once per token on the hot path.
type metrics struct {
	running          atomic.Int64  // requests admitted and not yet finished
	promptTokens     atomic.Uint64 // prompt tokens of requests whose prefill finished
	generationTokens atomic.Uint64 // output tokens emitted
	success          atomic.Uint64 // requests that ran to their finish
}

// serveMetrics writes the Prometheus text exposition format 0.0.4 with
// vLLM's metric names and model_name label, so that tooling pointed at a
// vLLM server reads the simulator unchanged.
func (s *Server) serveMetrics(w http.ResponseWriter) {
	model := `model_name="` + escapeLabel(s.cfg.Model) + `"`
	var b []byte
	write := func(name, kind, help, labels string, v float64) {
		b = append(b, "# HELP "...)
		b = append(b, name...)
		b = append(b, ' ')
		b = append(b, help...)
		b = append(b, "\n# TYPE "...)
		b = append(b, name...)
		b = append(b, ' ')
		b = append(b, kind...)
		b = append(b, '\n')
		b = append(b, name...)
		b = append(b, '{')
		b = append(b, labels...)
		b = append(b, "} "...)
		b = appendPromFloat(b, v)
		b = append(b, '\n')
	}
	write("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", model, float64(s.metrics.running.Load()))
	write("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", model, 0)
	write("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", model, float64(s.metrics.promptTokens.Load()))
	write("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", model, float64(s.metrics.generationTokens.Load()))
	write("vllm:request_success_total", "counter", "Count of successfully processed requests.", model+`,finished_reason="length"`, float64(s.metrics.success.Load()))

	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// appendPromFloat writes v as Python's prometheus_client does ("3.0"), so
// that the exposition matches vLLM's byte for byte where it can.
func appendPromFloat(b []byte, v float64) []byte {
	start := len(b)
	b = strconv.AppendFloat(b, v, 'f', -1, 64)
	if !strings.ContainsAny(string(b[start:]), ".eEnN") {
		b = append(b, ".0"...)
	}
	return b
}

// escapeLabel escapes a label value for the text exposition format.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
