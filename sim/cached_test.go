package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The prompt-cache reports: usage.prompt_tokens_details.cached_tokens
// (vllm, llama.cpp) and timings.cache_n (llama.cpp) carry the prompt tokens
// the engine found in its prefix cache.

// cachedPrompt is a prompt long enough to span several KV blocks.
var cachedPrompt = strings.Repeat("The whale surfaced beside the ship at dawn. ", 20)

// wholeBlocks is what a repeat of an n-token prompt hits: its whole blocks,
// never the one holding its last token, which must be computed to sample
// from.
func wholeBlocks(n, blockSize int) int { return (n - 1) / blockSize * blockSize }

// genCase is one way of asking for a generation.
type genCase struct {
	name   string
	path   string // under the base URL
	stream bool
}

var genCases = []genCase{
	{"chat/stream", "/chat/completions", true},
	{"chat", "/chat/completions", false},
	{"completions/stream", "/completions", true},
	{"completions", "/completions", false},
}

// body returns the request body for c with the given prompt; a stream asks
// for usage.
func (c genCase) body(prompt string, maxTokens int) string {
	var b string
	if c.path == "/chat/completions" {
		b = fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"max_tokens":%d`, prompt, maxTokens)
	} else {
		b = fmt.Sprintf(`{"prompt":%q,"max_tokens":%d`, prompt, maxTokens)
	}
	if c.stream {
		b += `,"stream":true,"stream_options":{"include_usage":true}`
	}
	return b + "}"
}

// final is the object of a response that carries its usage (and, on
// llama.cpp, its timings): the non-streamed body, or the stream's last
// event before [DONE]. raw is its JSON.
type final struct {
	raw    string
	fields map[string]json.RawMessage
}

// send makes one request and returns its final object.
func send(t *testing.T, baseURL, path, body string, stream bool) final {
	t.Helper()
	resp := request(t, baseURL+path, body, "")
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %s: %s", path, resp.Status, b)
	}
	raw := ""
	if stream {
		events := readEvents(t, resp.Body)
		if len(events) < 2 || events[len(events)-1] != "[DONE]" {
			t.Fatalf("stream ends %q", events)
		}
		raw = events[len(events)-2]
	} else {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		raw = string(b)
	}
	return final{raw: raw, fields: decodeMap(t, raw)}
}

// usageCached returns usage.prompt_tokens and
// usage.prompt_tokens_details.cached_tokens, failing when either is absent.
func (f final) usageCached(t *testing.T) (prompt, cached int) {
	t.Helper()
	var u struct {
		PromptTokens        *int `json:"prompt_tokens"`
		PromptTokensDetails *struct {
			CachedTokens *int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	}
	if err := json.Unmarshal(f.fields["usage"], &u); err != nil || u.PromptTokens == nil {
		t.Fatalf("no usage in %s", f.raw)
	}
	if u.PromptTokensDetails == nil || u.PromptTokensDetails.CachedTokens == nil {
		t.Fatalf("usage lacks prompt_tokens_details.cached_tokens: %s", f.raw)
	}
	return *u.PromptTokens, *u.PromptTokensDetails.CachedTokens
}

// timings returns llama.cpp's timings.cache_n and timings.prompt_n.
func (f final) timings(t *testing.T) (cacheN, promptN int) {
	t.Helper()
	tm := llamaTimingsJSON(t, f.fields["timings"])
	return tm.CacheN, tm.PromptN
}

// TestCachedTokensVLLM sends the same long prompt twice, each way a client
// can ask: the first response reports no cached tokens, the second the
// prompt's whole blocks, in vLLM's usage shape.
func TestCachedTokensVLLM(t *testing.T) {
	for _, c := range genCases {
		t.Run(c.name, func(t *testing.T) {
			cfg := engineConfig(t)
			bs := cfg.Engine.BlockSize
			inst := startSim(t, cfg)
			first := send(t, inst.BaseURL, c.path, c.body(cachedPrompt, 3), c.stream)
			second := send(t, inst.BaseURL, c.path, c.body(cachedPrompt, 3), c.stream)
			n, got := first.usageCached(t)
			if n < 8*bs {
				t.Fatalf("prompt of %d tokens is shorter than 8 blocks", n)
			}
			if got != 0 {
				t.Errorf("first request reports %d cached tokens, want 0: %s", got, first.raw)
			}
			want := wholeBlocks(n, bs)
			if _, got := second.usageCached(t); got != want {
				t.Errorf("repeat reports %d cached tokens, want %d (the whole blocks of %d): %s", got, want, n, second.raw)
			}
			// vLLM's field order, the details last; usage is the last
			// field of the usage chunk and of the body alike.
			shape := fmt.Sprintf(`"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":%d}}}`, n, n+3, want)
			if !strings.HasSuffix(second.raw, shape) {
				t.Errorf("usage not in vLLM's shape %s:\n%s", shape, second.raw)
			}
		})
	}
}

// TestCachedTokensLlamaCpp is the same through the llama.cpp personality:
// timings.cache_n counts the cached tokens and prompt_n the rest, as
// llama-server reports them, and usage carries prompt_tokens_details.
func TestCachedTokensLlamaCpp(t *testing.T) {
	for _, c := range genCases {
		t.Run(c.name, func(t *testing.T) {
			cfg := engineConfig(t)
			cfg.Personality = PersonalityLlamaCpp
			bs := cfg.Engine.BlockSize
			inst := startSim(t, cfg)
			for i, want := range []int{0, -1} {
				f := send(t, inst.BaseURL, c.path, c.body(cachedPrompt, 3), c.stream)
				n, got := f.usageCached(t)
				if want < 0 {
					want = wholeBlocks(n, bs)
				}
				if got != want {
					t.Errorf("request %d: usage reports %d cached tokens, want %d: %s", i+1, got, want, f.raw)
				}
				cacheN, promptN := f.timings(t)
				if cacheN != want || promptN != n-want {
					t.Errorf("request %d: timings cache_n %d, prompt_n %d; want %d and %d: %s", i+1, cacheN, promptN, want, n-want, f.raw)
				}
				if !strings.Contains(f.raw, fmt.Sprintf(`"usage":{"completion_tokens":3,"prompt_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}`, n, n+3, want)) {
					t.Errorf("request %d: usage not in llama.cpp's shape: %s", i+1, f.raw)
				}
			}
		})
	}
	// Without include_usage a chat stream has no usage, and its finish
	// chunk carries the timings alone.
	cfg := engineConfig(t)
	cfg.Personality = PersonalityLlamaCpp
	inst := startSim(t, cfg)
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"max_tokens":2,"stream":true}`, cachedPrompt)
	send(t, inst.BaseURL, "/chat/completions", body, true)
	f := send(t, inst.BaseURL, "/chat/completions", body, true)
	n := builtinTokenizer(t).Count(cachedPrompt)
	if cacheN, promptN := f.timings(t); cacheN != wholeBlocks(n, cfg.Engine.BlockSize) || cacheN+promptN != n {
		t.Errorf("finish chunk's timings cache_n %d, prompt_n %d for a repeated %d-token prompt: %s", cacheN, promptN, n, f.raw)
	}
}

// TestCachedTokensFixedAndTGI checks the servers without a prefix cache
// report: the fixed preset reports 0 cached tokens, and tgi, whose usage has
// no cached count, adds none.
func TestCachedTokensFixedAndTGI(t *testing.T) {
	for _, pers := range []string{PersonalityVLLM, PersonalityLlamaCpp} {
		inst := startSim(t, Config{TTFT: time.Millisecond, ITL: 100 * time.Microsecond, Personality: pers})
		for _, c := range genCases {
			for range 2 {
				f := send(t, inst.BaseURL, c.path, c.body(cachedPrompt, 2), c.stream)
				if _, got := f.usageCached(t); got != 0 {
					t.Errorf("%s %s: fixed preset reports %d cached tokens", pers, c.name, got)
				}
				if pers == PersonalityLlamaCpp {
					if cacheN, _ := f.timings(t); cacheN != 0 {
						t.Errorf("%s: fixed preset reports cache_n %d", c.name, cacheN)
					}
				}
			}
		}
	}
	cfg := engineConfig(t)
	cfg.Personality = PersonalityTGI
	inst := startSim(t, cfg)
	for _, c := range genCases {
		for range 2 {
			f := send(t, inst.BaseURL, c.path, c.body(cachedPrompt, 2), c.stream)
			if strings.Contains(f.raw, "cached") || strings.Contains(f.raw, "prompt_tokens_details") {
				t.Errorf("tgi %s reports a cached count: %s", c.name, f.raw)
			}
		}
	}
}

// TestCachedTokensAgreeWithMetrics sends prompts that share prefixes in
// several ways and checks each reported count, and that
// vllm:prefix_cache_hits_total is their sum.
func TestCachedTokensAgreeWithMetrics(t *testing.T) {
	cfg := engineConfig(t)
	bs := cfg.Engine.BlockSize
	inst := startSim(t, cfg)
	ids := func(from, n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = from + i
		}
		return out
	}
	a := ids(1000, 200)
	b := append(ids(1000, 100), ids(5000, 60)...) // shares a's first 100 tokens
	c := ids(9000, 50)
	reported := 0
	for i, tc := range []struct {
		prompt []int
		stream bool
		want   int
	}{
		{a, false, 0},
		{a, true, wholeBlocks(len(a), bs)},
		{b, false, 100 / bs * bs}, // a's whole blocks, up to where b leaves it
		{c, true, 0},
		{b, true, wholeBlocks(len(b), bs)},
		{c[:2*bs+1], false, 2 * bs}, // a prefix of c: its whole blocks
		{c[:2*bs], true, bs},        // all of it cached, but never the last token
	} {
		body, err := json.Marshal(map[string]any{"prompt": tc.prompt, "max_tokens": 2, "stream": tc.stream})
		if err != nil {
			t.Fatal(err)
		}
		if tc.stream {
			body = append(body[:len(body)-1], `,"stream_options":{"include_usage":true}}`...)
		}
		f := send(t, inst.BaseURL, "/completions", string(body), tc.stream)
		_, got := f.usageCached(t)
		if got != tc.want {
			t.Errorf("request %d: %d cached tokens, want %d", i+1, got, tc.want)
		}
		reported += got
	}
	if got, want := metricValue(t, inst.BaseURL, "vllm:prefix_cache_hits_total"), strconv.Itoa(reported)+".0"; got != want {
		t.Errorf("vllm:prefix_cache_hits_total %s, want %s, the sum of the cached_tokens reported", got, want)
	}
}

// TestCachedTokensAfterPreemption checks that a request preempted and
// admitted again reports the cached count of its first admission, as vLLM
// V1 does: prompts are distinct, so every first admission hits nothing and
// every request reports 0, even when a readmission found the request's own
// blocks (which would otherwise read as cache contamination to the client).
func TestCachedTokensAfterPreemption(t *testing.T) {
	cfg := *presetConfig(t, "qwen3-0.6b-h200")
	kv := cfg.Model.KVBytesPerToken(cfg.Precision)
	cfg.ReserveBytes = cfg.GPUMemoryUtilization*cfg.GPU.MemoryBytes - cfg.Model.WeightBytes(cfg.Precision) - 1024*kv
	cfg.MaxModelLen = 1024
	et, err := newEngineTiming(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer et.close()
	const requests, prompt, output = 6, 300, 120
	clocks := make([]*engineClock, requests)
	for i := range clocks {
		ids := make([]int, prompt)
		for j := range ids {
			ids[j] = i*10_000 + j
		}
		clocks[i] = et.admit(admission{arrival: time.Now(), prompt: ids, output: output}).(*engineClock)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	got := make([]int, requests)
	for i, c := range clocks {
		wg.Go(func() {
			if _, err := c.wait(ctx, output-1); err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			got[i] = c.cached()
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	et.mu.Lock()
	defer et.mu.Unlock()
	if et.cluster.Stats().Preemptions == 0 {
		t.Fatal("no request was preempted")
	}
	rehit := 0
	for i, c := range clocks {
		info := c.req.Info()
		if got[i] != 0 || info.CachedTokens != 0 {
			t.Errorf("request %d (preempted %d times): reported %d cached tokens (engine %d); its first admission hit none",
				i, info.Preemptions, got[i], info.CachedTokens)
		}
		if info.Preemptions > 0 && info.RecachedTokens > 0 {
			rehit++
		}
	}
	// Some readmission did find its own blocks: the test would not tell
	// the first admission from the last otherwise.
	if rehit == 0 {
		t.Errorf("%d preemptions, and no readmission hit its own blocks: nothing tells the last admission from the first", et.cluster.Stats().Preemptions)
	}
}
