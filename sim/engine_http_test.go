//lint:file-ignore SA1019 max_tokens is what most clients still send, so the simulator is tested with it

package sim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// engineConfig is a fast engine preset for HTTP tests: Qwen3-0.6B's step of
// about 3 ms keeps streams short in wall time.
func engineConfig(t *testing.T) Config {
	t.Helper()
	return Config{Engine: presetConfig(t, "qwen3-0.6b-h200"), Seed: 3}
}

// TestEngineServesStreams checks the engine behind the protocol: a stream
// from the engine has every token, usage agrees, the served context limit is
// the engine's, and the scheduler's gauges appear in /metrics.
func TestEngineServesStreams(t *testing.T) {
	inst := startSim(t, engineConfig(t))
	if got := inst.Server.Config().MaxModelLen; got != 40960 {
		t.Errorf("max_model_len %d, want the preset's 40960", got)
	}
	resp := post(t, inst.BaseURL+"/chat/completions", map[string]any{
		"messages":   []map[string]string{{"role": "user", "content": "Tell me about whales."}},
		"max_tokens": 30, "stream": true, "stream_options": map[string]bool{"include_usage": true},
	})
	events := readEvents(t, resp.Body)
	tokens := 0
	var u *usage
	for _, e := range events[:len(events)-1] {
		c, _ := decodeChunk(t, e)
		for _, ch := range c.Choices {
			if ch.Delta != nil && ch.Delta.Content != nil && *ch.Delta.Content != "" {
				tokens++
			}
		}
		if c.Usage != nil {
			u = c.Usage
		}
	}
	if tokens != 30 || u == nil || u.CompletionTokens != 30 || u.PromptTokens != builtinTokenizer(t).Count("Tell me about whales.") {
		t.Fatalf("%d tokens, usage %+v", tokens, u)
	}
	for _, name := range []string{"vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:num_preemptions_total"} {
		metricValue(t, inst.BaseURL, name)
	}
	if got := metricValue(t, inst.BaseURL, "vllm:generation_tokens_total"); got != "30.0" {
		t.Errorf("generation tokens %s, want 30.0", got)
	}
	// An empty prompt gets vLLM's 400: an engine has nothing to sample
	// from.
	empty := post(t, inst.BaseURL+"/completions", map[string]any{"prompt": "", "max_tokens": 1})
	checkError(t, empty, http.StatusBadRequest, "BadRequestError", "The decoder prompt cannot be empty")
	// A prompt beyond the engine's limit gets vLLM's 400, not a panic.
	long := post(t, inst.BaseURL+"/completions", map[string]any{"prompt": make([]int, 40960), "max_tokens": 1})
	if long.StatusCode != http.StatusBadRequest {
		t.Errorf("a prompt of max_model_len tokens got %s", long.Status)
	}
}

// TestEnginePrefixCacheOverHTTP sends the same long prompt twice: the
// second request hits the blocks the first computed, whole blocks only, and
// the hit counter shows it. The prompt's token ids come from the server's
// tokenizer, so equal text means equal blocks.
func TestEnginePrefixCacheOverHTTP(t *testing.T) {
	inst := startSim(t, engineConfig(t))
	prompt := strings.Repeat("The whale surfaced beside the ship at dawn. ", 20)
	n := builtinTokenizer(t).Count(prompt)
	if n < 8*16 {
		t.Fatalf("prompt of %d tokens is shorter than 8 blocks", n)
	}
	send := func() {
		resp := post(t, inst.BaseURL+"/completions", map[string]any{"prompt": prompt, "max_tokens": 2})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %s", resp.Status)
		}
		var body textResponse
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
	}
	send()
	if got := metricValue(t, inst.BaseURL, "vllm:prefix_cache_hits_total"); got != "0.0" {
		t.Fatalf("first request hit %s tokens", got)
	}
	send()
	want := strconv.Itoa((n-1)/16*16) + ".0"
	if got := metricValue(t, inst.BaseURL, "vllm:prefix_cache_hits_total"); got != want {
		t.Errorf("prefix_cache_hits_total %s after a repeat of %d tokens, want %s", got, n, want)
	}
	if got := metricValue(t, inst.BaseURL, "vllm:prefix_cache_queries_total"); got != strconv.Itoa(2*n)+".0" {
		t.Errorf("prefix_cache_queries_total %s, want %d", got, 2*n)
	}
}

// TestEngineQueues checks continuous batching's limit over HTTP: with
// max_num_seqs 1 a second request waits for the first to finish, so its
// first token comes after the first's last. The preset's request path
// (a quarter second, fitted at eight replicas) would let the first finish
// before the second reaches the engine, so it is taken out: this is about
// the scheduler.
func TestEngineQueues(t *testing.T) {
	cfg := engineConfig(t)
	cfg.Engine.MaxNumSeqs = 1
	cfg.Engine.FrontEnd.RequestLatency, cfg.Engine.FrontEnd.RequestLatencyPerStream = 0, 0
	inst := startSim(t, cfg)
	type result struct{ first, last time.Time }
	run := func(out chan<- result) {
		resp := post(t, inst.BaseURL+"/chat/completions", map[string]any{
			"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 40, "stream": true,
		})
		buf := make([]byte, 4096)
		var r result
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 && strings.Contains(string(buf[:n]), `"content":" `) && r.first.IsZero() {
				r.first = time.Now()
			}
			if err != nil {
				break
			}
		}
		r.last = time.Now()
		out <- r
	}
	a, b := make(chan result, 1), make(chan result, 1)
	go run(a)
	waitForMetric(t, inst.BaseURL, "vllm:num_requests_running", "1.0")
	go run(b)
	waitForMetric(t, inst.BaseURL, "vllm:num_requests_waiting", "1.0")
	ra, rb := <-a, <-b
	if !rb.first.After(ra.last.Add(-5 * time.Millisecond)) {
		t.Errorf("second request's first token at %v, before the first's last at %v", rb.first, ra.last)
	}
}

// TestEngineCancelFrees checks that a client hanging up frees its sequence
// and KV blocks in the engine.
func TestEngineCancelFrees(t *testing.T) {
	inst := startSim(t, engineConfig(t))
	ctx, cancel := context.WithCancel(context.Background())
	resp := openLongStream(t, ctx, inst.BaseURL)
	waitForMetric(t, inst.BaseURL, "vllm:num_requests_running", "1.0")
	if metricValue(t, inst.BaseURL, "vllm:kv_cache_usage_perc") == "0.0" {
		t.Error("a running request holds no KV blocks")
	}
	cancel()
	resp.Body.Close()
	waitForMetric(t, inst.BaseURL, "vllm:num_requests_running", "0.0")
	waitForMetric(t, inst.BaseURL, "vllm:kv_cache_usage_perc", "0.0")
}

// TestEngineOpenAIClient reads an engine-timed stream with go-openai, the
// interop check for the engine path.
func TestEngineOpenAIClient(t *testing.T) {
	inst := startSim(t, engineConfig(t))
	stream, err := openaiClient(inst).CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
		Model:         inst.Server.Config().Model,
		Messages:      []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "Name three whales."}},
		MaxTokens:     16,
		Stream:        true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var usage *openai.Usage
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		if resp.Usage != nil {
			usage = resp.Usage
		}
	}
	if usage == nil || usage.CompletionTokens != 16 {
		t.Errorf("usage %+v", usage)
	}
}
