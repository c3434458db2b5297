package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/tokenizer"
)

// fastConfig keeps the tests quick while leaving timing visible.
func fastConfig() Config {
	return Config{TTFT: 5 * time.Millisecond, ITL: 500 * time.Microsecond, Seed: 7}
}

func startSim(t *testing.T, cfg Config) *Instance {
	t.Helper()
	inst, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := inst.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return inst
}

func builtinTokenizer(t testing.TB) tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.New(tokenizer.Builtin)
	if err != nil {
		t.Fatalf("tokenizer: %v", err)
	}
	return tok
}

func post(t *testing.T, url string, body any) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// readEvents reads a whole SSE body and returns the data payloads, failing
// unless every event is exactly "data: <payload>\n\n".
func readEvents(t *testing.T, body io.Reader) []string {
	t.Helper()
	raw, err := io.ReadAll(body)
	if err != nil {
		t.Fatalf("read stream: %v", err)
	}
	s := string(raw)
	if !strings.HasSuffix(s, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", tail(s))
	}
	var events []string
	for _, ev := range strings.Split(strings.TrimSuffix(s, "\n\n"), "\n\n") {
		payload, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(payload, "\n") {
			t.Fatalf("malformed event %q", ev)
		}
		events = append(events, payload)
	}
	return events
}

func tail(s string) string {
	if len(s) > 200 {
		return s[len(s)-200:]
	}
	return s
}

type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta *struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Text         *string         `json:"text"`
		Logprobs     json.RawMessage `json:"logprobs"`
		FinishReason *string         `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

func decodeChunk(t *testing.T, payload string) (chunk, map[string]json.RawMessage) {
	t.Helper()
	var c chunk
	if err := json.Unmarshal([]byte(payload), &c); err != nil {
		t.Fatalf("chunk %q: %v", payload, err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(payload), &fields); err != nil {
		t.Fatal(err)
	}
	return c, fields
}

func TestStreamChat(t *testing.T) {
	for _, includeUsage := range []bool{true, false} {
		t.Run(fmt.Sprintf("include_usage=%v", includeUsage), func(t *testing.T) {
			inst := startSim(t, fastConfig())
			tok := builtinTokenizer(t)
			const n = 40
			msg := "Tell me about the weather in Lisbon, please."
			sys := "You are terse."
			resp := post(t, inst.BaseURL+"/chat/completions", map[string]any{
				"model":          "infermatrix-sim",
				"messages":       []map[string]any{{"role": "system", "content": sys}, {"role": "user", "content": []map[string]string{{"type": "text", "text": msg}}}},
				"max_tokens":     n,
				"stream":         true,
				"stream_options": map[string]bool{"include_usage": includeUsage},
				"temperature":    0.7, // unknown to the simulator, must be accepted
			})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type %q", ct)
			}
			if cc := resp.Header.Get("Cache-Control"); cc != "no-cache" {
				t.Errorf("Cache-Control %q", cc)
			}
			events := readEvents(t, resp.Body)
			// vLLM puts finish_reason on the last token's chunk:
			// there is no separate finish chunk.
			want := 1 + n + 1 // role, tokens, [DONE]
			if includeUsage {
				want++
			}
			if len(events) != want {
				t.Fatalf("got %d events, want %d", len(events), want)
			}
			if events[len(events)-1] != "[DONE]" {
				t.Fatalf("last event %q, want [DONE]", events[len(events)-1])
			}

			var id string
			var content strings.Builder
			for i, ev := range events[:len(events)-1] {
				c, fields := decodeChunk(t, ev)
				if i == 0 {
					id = c.ID
					if !strings.HasPrefix(id, "chatcmpl-") {
						t.Errorf("id %q", id)
					}
				}
				if c.ID != id || c.Object != "chat.completion.chunk" || c.Model != "infermatrix-sim" || c.Created == 0 {
					t.Errorf("event %d: bad envelope %s", i, ev)
				}
				_, hasUsage := fields["usage"]
				isUsageChunk := includeUsage && i == len(events)-2
				switch {
				case isUsageChunk:
					if len(c.Choices) != 0 || c.Usage == nil {
						t.Fatalf("usage chunk %s", ev)
					}
				case includeUsage && (!hasUsage || string(fields["usage"]) != "null"):
					t.Errorf("event %d lacks \"usage\":null: %s", i, ev)
				case !includeUsage && hasUsage:
					t.Errorf("event %d has usage without include_usage: %s", i, ev)
				}
				if isUsageChunk {
					continue
				}
				if len(c.Choices) != 1 || c.Choices[0].Delta == nil || string(c.Choices[0].Logprobs) != "null" {
					t.Fatalf("event %d: %s", i, ev)
				}
				ch := c.Choices[0]
				switch {
				case i == 0:
					if ch.Delta.Role == nil || *ch.Delta.Role != "assistant" || ch.Delta.Content == nil || *ch.Delta.Content != "" || ch.FinishReason != nil {
						t.Errorf("role chunk %s", ev)
					}
				case i < n:
					if ch.Delta.Role != nil || ch.Delta.Content == nil || *ch.Delta.Content == "" || ch.FinishReason != nil || fields["choices"] == nil || strings.Contains(ev, "stop_reason") {
						t.Errorf("content chunk %d: %s", i, ev)
					}
					content.WriteString(*ch.Delta.Content)
				default:
					if ch.Delta.Content == nil || *ch.Delta.Content == "" || ch.FinishReason == nil || *ch.FinishReason != "length" || !strings.Contains(ev, `"finish_reason":"length","stop_reason":null`) {
						t.Errorf("last token chunk %s: want its token, finish_reason and stop_reason", ev)
					}
					content.WriteString(*ch.Delta.Content)
				}
			}
			if got := tok.Count(content.String()); got != n {
				t.Errorf("content re-tokenizes to %d tokens, want %d: %q", got, n, content.String())
			}
			if includeUsage {
				c, _ := decodeChunk(t, events[len(events)-2])
				wantPrompt := tok.Count(sys) + tok.Count(msg)
				if *c.Usage != (usage{PromptTokens: wantPrompt, CompletionTokens: n, TotalTokens: wantPrompt + n}) {
					t.Errorf("usage %+v, want prompt %d completion %d", *c.Usage, wantPrompt, n)
				}
			}
		})
	}
}

func TestStreamCompletion(t *testing.T) {
	inst := startSim(t, fastConfig())
	tok := builtinTokenizer(t)
	const n = 25
	prompt := "Once upon a time, in a land far away,"
	resp := post(t, inst.BaseURL+"/completions", map[string]any{
		"prompt":         prompt,
		"max_tokens":     n,
		"stream":         true,
		"stream_options": map[string]bool{"include_usage": true},
		"ignore_eos":     true,
		"min_tokens":     n,
	})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	events := readEvents(t, resp.Body)
	if len(events) != n+2 || events[n+1] != "[DONE]" {
		t.Fatalf("got %d events, want %d tokens + usage + [DONE]", len(events), n)
	}
	var text strings.Builder
	for i, ev := range events[:n] {
		c, _ := decodeChunk(t, ev)
		last := i == n-1
		if c.Object != "text_completion" || !strings.HasPrefix(c.ID, "cmpl-") || len(c.Choices) != 1 || c.Choices[0].Text == nil || *c.Choices[0].Text == "" || (c.Choices[0].FinishReason != nil) != last || !strings.Contains(ev, `"stop_reason":null`) {
			t.Fatalf("token chunk %d: %s", i, ev)
		}
		if last && *c.Choices[0].FinishReason != "length" {
			t.Errorf("last token chunk %s: want finish_reason length", ev)
		}
		text.WriteString(*c.Choices[0].Text)
	}
	u, _ := decodeChunk(t, events[n])
	wantPrompt := tok.Count(prompt)
	if u.Usage == nil || *u.Usage != (usage{PromptTokens: wantPrompt, CompletionTokens: n, TotalTokens: wantPrompt + n}) {
		t.Errorf("usage chunk %s, want prompt_tokens %d", events[n], wantPrompt)
	}
	if got := tok.Count(text.String()); got != n {
		t.Errorf("text re-tokenizes to %d tokens, want %d", got, n)
	}
}

func TestCompletionPromptForms(t *testing.T) {
	inst := startSim(t, fastConfig())
	tok := builtinTokenizer(t)
	a, b := "The quick brown fox", "jumps over the lazy dog."
	cases := []struct {
		prompt any
		want   int
	}{
		{a, tok.Count(a)},
		{[]string{a, b}, tok.Count(a) + tok.Count(b)},
		{[]int{1, 2, 3, 4, 5}, 5},
		{[][]int{{1, 2, 3}}, 3},
	}
	for _, c := range cases {
		resp := post(t, inst.BaseURL+"/completions", map[string]any{"prompt": c.prompt, "max_tokens": 2})
		var body textResponse
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("prompt %v: status %d, %v", c.prompt, resp.StatusCode, err)
		}
		if body.Usage.PromptTokens != c.want {
			t.Errorf("prompt %v: prompt_tokens %d, want %d", c.prompt, body.Usage.PromptTokens, c.want)
		}
	}
}

// vllmError is vLLM 0.11's ErrorResponse: {"error": ErrorInfo}.
type vllmError struct {
	Error struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Param   json.RawMessage `json:"param"`
		Code    int             `json:"code"`
	} `json:"error"`
}

func TestErrors(t *testing.T) {
	inst := startSim(t, Config{MaxModelLen: 100, TTFT: time.Millisecond, ITL: time.Microsecond})
	tok := builtinTokenizer(t)
	long := strings.Repeat("word ", 90)
	p := tok.Count(long)
	cases := []struct {
		name, path, body string
		status           int
		kind, message    string
	}{
		{"too long", "/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"max_tokens":50}`, long), 400, "BadRequestError",
			fmt.Sprintf("This model's maximum context length is 100 tokens. However, you requested %d tokens (%d in the messages, 50 in the completion). Please reduce the length of the messages or completion.", p+50, p)},
		{"prompt alone too long", "/completions", fmt.Sprintf(`{"prompt":%q}`, strings.Repeat("word ", 200)), 400, "BadRequestError", "maximum context length is 100 tokens"},
		// FastAPI's validation refuses these before vLLM's code runs,
		// with the status phrase as the type.
		{"bad json", "/chat/completions", `{"messages": [`, 400, "Bad Request", "json_invalid"},
		{"wrong type", "/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":"ten"}`, 400, "Bad Request", "max_tokens"},
		{"no messages", "/chat/completions", `{"model":"infermatrix-sim"}`, 400, "Bad Request", "messages"},
		{"no prompt", "/completions", `{"max_tokens":3}`, 400, "Bad Request", "prompt"},
		{"image part", "/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "Bad Request", "text-only"},
		{"zero max_tokens", "/completions", `{"prompt":"hi","max_tokens":0}`, 400, "BadRequestError", "max_tokens must be at least 1"},
		{"min over max", "/completions", `{"prompt":"hi","max_tokens":2,"min_tokens":3}`, 400, "BadRequestError", "min_tokens"},
		{"n above one", "/completions", `{"prompt":"hi","n":2}`, 400, "BadRequestError", "n=2"},
		// What the simulator cannot honour it refuses, never ignores.
		{"stop", "/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stop":["\n"]}`, 400, "BadRequestError", "stop is not supported"},
		{"chat logprobs", "/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":2}`, 400, "BadRequestError", "logprobs is not supported"},
		{"completion logprobs", "/completions", `{"prompt":"hi","logprobs":0}`, 400, "BadRequestError", "logprobs is not supported"},
		{"echo", "/completions", `{"prompt":"hi","echo":true}`, 400, "BadRequestError", "echo is not supported"},
		{"tools", "/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}`, 400, "BadRequestError", `"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`},
		{"required tool", "/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}`, 400, "BadRequestError", "cannot call tools"},
		{"json output", "/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`, 400, "BadRequestError", "json_object"},
		{"stream options without stream", "/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}`, 400, "BadRequestError", "Stream options"},
		{"unknown model", "/chat/completions", `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, 404, "NotFoundError", "The model `gpt-9` does not exist."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := http.Post(inst.BaseURL+c.path, "application/json", strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			checkError(t, resp, c.status, c.kind, c.message)
		})
	}

	// Starlette answers a path or method no route serves before vLLM's
	// handlers can: {"detail": ...}, not vLLM's ErrorResponse.
	routing := func(t *testing.T, resp *http.Response, status int, detail string) {
		t.Helper()
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != status || string(b) != `{"detail":"`+detail+`"}` {
			t.Errorf("%d %s, want %d {\"detail\":%q}", resp.StatusCode, b, status, detail)
		}
	}
	t.Run("unknown path", func(t *testing.T) {
		resp, err := http.Post(inst.BaseURL+"/audio/transcriptions", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		routing(t, resp, 404, "Not Found")
	})
	t.Run("wrong method", func(t *testing.T) {
		resp, err := http.Get(inst.BaseURL + "/chat/completions")
		if err != nil {
			t.Fatal(err)
		}
		if resp.Header.Get("Allow") != "POST" {
			t.Errorf("Allow %q", resp.Header.Get("Allow"))
		}
		routing(t, resp, 405, "Method Not Allowed")
	})
	t.Run("content type", func(t *testing.T) {
		for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded"} {
			req, _ := http.NewRequest(http.MethodPost, inst.BaseURL+"/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":1}`))
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			checkError(t, resp, 400, "Bad Request", "Unsupported Media Type: Only 'application/json' is allowed")
			resp.Body.Close()
		}
		resp, err := http.Post(inst.BaseURL+"/chat/completions", "Application/JSON; charset=utf-8", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":1}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("application/json with a charset: %s, want 200", resp.Status)
		}
	})

	// vLLM's completions default to max_tokens 16, so a prompt that
	// leaves less room is refused; its chat generates until the context
	// is full.
	t.Run("default max tokens", func(t *testing.T) {
		resp := post(t, inst.BaseURL+"/completions", map[string]any{"prompt": strings.Repeat("word ", 90)})
		checkError(t, resp, 400, "BadRequestError", fmt.Sprintf("you requested %d tokens (%d in the messages, 16 in the completion)", p+16, p))
		resp = post(t, inst.BaseURL+"/completions", map[string]any{"prompt": strings.Repeat("word ", 40)})
		var body textResponse
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		if body.Usage.CompletionTokens != 16 {
			t.Errorf("completions usage %+v: want vLLM's default of 16 tokens", body.Usage)
		}
		resp = post(t, inst.BaseURL+"/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": strings.Repeat("word ", 40)}}})
		var chat chatResponse
		if err := json.NewDecoder(resp.Body).Decode(&chat); err != nil {
			t.Fatal(err)
		}
		if chat.Usage.TotalTokens != 100 {
			t.Errorf("chat usage %+v: want generation until the 100-token context is full", chat.Usage)
		}
	})
}

func checkError(t *testing.T, resp *http.Response, status int, kind, message string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("status %d, want %d", resp.StatusCode, status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var e vllmError
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("decode error body: %v", err)
	}
	if e.Error.Type != kind || e.Error.Code != status || string(e.Error.Param) != "null" {
		t.Errorf("error body %+v, want type %s code %d", e, kind, status)
	}
	if !strings.Contains(e.Error.Message, message) {
		t.Errorf("message %q, want it to contain %q", e.Error.Message, message)
	}
}

// TestTiming checks the timing model as a correctness property: no token
// arrives before it is due. The upper bounds are loose on purpose, so that a
// loaded machine cannot make the test flaky.
func TestTiming(t *testing.T) {
	const (
		ttft = 150 * time.Millisecond
		itl  = 20 * time.Millisecond
		n    = 8
	)
	inst := startSim(t, Config{TTFT: ttft, ITL: itl})
	body := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":8,"stream":true}`
	sent := time.Now()
	resp, err := http.Post(inst.BaseURL+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()

	r := bufio.NewReader(resp.Body)
	var tokenTimes []time.Duration
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"content":"`) && !strings.Contains(line, `"role"`) {
			tokenTimes = append(tokenTimes, time.Since(sent))
		}
	}
	if len(tokenTimes) != n {
		t.Fatalf("got %d tokens, want %d", len(tokenTimes), n)
	}
	for k, at := range tokenTimes {
		due := ttft + time.Duration(k)*itl
		if at < due {
			t.Errorf("token %d arrived %v after sending, before it was due at %v", k, at, due)
		}
	}
	if last := tokenTimes[n-1]; last > 30*time.Second {
		t.Errorf("last token after %v", last)
	}
}

// TestNonStreamingTiming checks that a non-streaming response waits for its
// last token.
func TestNonStreamingTiming(t *testing.T) {
	inst := startSim(t, Config{TTFT: 50 * time.Millisecond, ITL: 10 * time.Millisecond})
	sent := time.Now()
	resp := post(t, inst.BaseURL+"/completions", map[string]any{"prompt": "hi", "max_tokens": 11})
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	if took, due := time.Since(sent), 50*time.Millisecond+10*10*time.Millisecond; took < due {
		t.Errorf("response after %v, before its last token was due at %v", took, due)
	}
}

// gateTiming is a timing model the test controls: token 0 is emitted when
// the test closes first, later tokens at once.
type gateTiming struct{ first chan struct{} }

func (g gateTiming) admit(admission) tokenClock { return gateClock(g) }
func (gateTiming) stats() modelStats            { return modelStats{} }
func (gateTiming) close()                       {}

type gateClock gateTiming

func (g gateClock) wait(ctx context.Context, k int) (time.Time, error) {
	if k == 0 {
		select {
		case <-g.first:
		case <-ctx.Done():
			return time.Now(), ctx.Err()
		}
	}
	return time.Now(), ctx.Err()
}

func (gateClock) cached() int { return 0 }
func (gateClock) release()    {}

// TestHeadersBeforeFirstToken checks that a stream's headers are flushed on
// arrival, before any token is due, without relying on wall-clock timing.
func TestHeadersBeforeFirstToken(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	gate := gateTiming{first: make(chan struct{})}
	s.timing = gate
	ts := httptest.NewServer(s)
	defer ts.Close()

	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true}`))
	if err != nil {
		t.Fatal(err) // http.Post returns once headers arrive, with the gate still shut
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	close(gate.first)
	events := readEvents(t, resp.Body)
	if len(events) != 1+3+1 {
		t.Errorf("got %d events after opening the gate", len(events))
	}
}

// metricValue scrapes one sample's value from /metrics.
func metricValue(t *testing.T, baseURL, name string) string {
	t.Helper()
	b := scrape(t, baseURL)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+"{") {
			return line[strings.LastIndexByte(line, ' ')+1:]
		}
	}
	t.Fatalf("metric %s missing from:\n%s", name, b)
	return ""
}

// waitForMetric polls until a metric takes a value: the server finishes a
// cancelled stream asynchronously from the client's point of view.
func waitForMetric(t *testing.T, baseURL, name, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := metricValue(t, baseURL, name)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %s, want %s", name, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// openLongStream starts a stream that would run for minutes and returns once
// its first token has arrived.
func openLongStream(t *testing.T, ctx context.Context, baseURL string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/chat/completions",
		strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":20000,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatalf("first event: %v", err)
	}
	return resp
}

func TestClientDisconnectStopsStream(t *testing.T) {
	inst := startSim(t, Config{TTFT: time.Millisecond, ITL: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	resp := openLongStream(t, ctx, inst.BaseURL)
	defer resp.Body.Close()
	if got := metricValue(t, inst.BaseURL, "vllm:num_requests_running"); got != "1.0" {
		t.Errorf("num_requests_running %s during the stream, want 1.0", got)
	}
	cancel()
	waitForMetric(t, inst.BaseURL, "vllm:num_requests_running", "0.0")
	if got := metricValue(t, inst.BaseURL, "vllm:request_success_total"); got != "0.0" {
		t.Errorf("request_success_total %s after an abandoned stream", got)
	}
}

func TestCloseCancelsStreams(t *testing.T) {
	inst, err := Start(Config{TTFT: time.Millisecond, ITL: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	resp := openLongStream(t, context.Background(), inst.BaseURL)
	defer resp.Body.Close()
	start := time.Now()
	if err := inst.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// A stream that ran to its end would take 200s; the grace period
	// after which Close forces connections shut is 5s.
	if took := time.Since(start); took >= closeGrace {
		t.Errorf("Close took %v: in-flight stream was not cancelled", took)
	}
	if err := inst.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	rest, _ := io.ReadAll(resp.Body)
	if bytes.Contains(rest, []byte("[DONE]")) {
		t.Errorf("stream completed despite Close")
	}
	if _, err := http.Get(inst.BaseURL + "/models"); err == nil {
		t.Errorf("server still accepting after Close")
	}
}

func TestModelsHealthMetrics(t *testing.T) {
	inst := startSim(t, Config{Model: "sim-a", MaxModelLen: 4096, TTFT: time.Millisecond, ITL: time.Microsecond})
	root := strings.TrimSuffix(inst.BaseURL, "/v1")

	resp, err := http.Get(inst.BaseURL + "/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID          string `json:"id"`
			Object      string `json:"object"`
			Created     int64  `json:"created"`
			OwnedBy     string `json:"owned_by"`
			Root        string `json:"root"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if models.Object != "list" || len(models.Data) != 1 {
		t.Fatalf("models %+v", models)
	}
	if m := models.Data[0]; m.ID != "sim-a" || m.Object != "model" || m.Created == 0 || m.OwnedBy != "infermatrix" || m.Root != "sim-a" || m.MaxModelLen != 4096 {
		t.Errorf("model %+v", m)
	}

	resp, err = http.Get(root + "/health")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(b) != 0 {
		t.Errorf("health: %d %q", resp.StatusCode, b)
	}

	// Two requests, one streaming, one not, with 3+4 prompt tokens by the
	// tokenizer's count.
	tok := builtinTokenizer(t)
	p1, p2 := "alpha beta gamma", "one two three four five"
	resp = post(t, inst.BaseURL+"/completions", map[string]any{"model": "sim-a", "prompt": p1, "max_tokens": 5})
	io.Copy(io.Discard, resp.Body)
	resp = post(t, inst.BaseURL+"/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": p2}}, "max_tokens": 6, "stream": true})
	io.Copy(io.Discard, resp.Body)

	resp, err = http.Get(root + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("metrics Content-Type %q", ct)
	}
	text := string(b)
	for _, want := range []string{
		"# TYPE vllm:num_requests_running gauge\n",
		"# TYPE vllm:num_requests_waiting gauge\n",
		"# TYPE vllm:prompt_tokens_total counter\n",
		"# TYPE vllm:generation_tokens_total counter\n",
		"# TYPE vllm:request_success_total counter\n",
		`vllm:num_requests_running{model_name="sim-a"} 0.0` + "\n",
		`vllm:num_requests_waiting{model_name="sim-a"} 0.0` + "\n",
		fmt.Sprintf(`vllm:prompt_tokens_total{model_name="sim-a"} %d.0`+"\n", tok.Count(p1)+tok.Count(p2)),
		`vllm:generation_tokens_total{model_name="sim-a"} 11.0` + "\n",
		`vllm:request_success_total{model_name="sim-a",finished_reason="length"} 2.0` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
}

func TestListen(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "example.com:0"} {
		ln, err := Listen(addr, false)
		if err == nil {
			ln.Close()
			t.Errorf("Listen(%q, false) succeeded", addr)
		} else if !errors.Is(err, ErrNotLoopback) {
			t.Errorf("Listen(%q, false): %v, want ErrNotLoopback", addr, err)
		}
	}
	ln, err := Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatalf("Listen loopback: %v", err)
	}
	ln.Close()
	ln, err = Listen("0.0.0.0:0", true)
	if err != nil {
		t.Fatalf("Listen(0.0.0.0:0, true): %v", err)
	}
	ln.Close()
}

func TestStartBaseURL(t *testing.T) {
	inst := startSim(t, Config{})
	if !strings.HasPrefix(inst.BaseURL, "http://127.0.0.1:") || !strings.HasSuffix(inst.BaseURL, "/v1") || inst.BaseURL != "http://"+inst.Addr+"/v1" {
		t.Errorf("BaseURL %q, Addr %q", inst.BaseURL, inst.Addr)
	}
	c := inst.Server.Config()
	if c.Model != "infermatrix-sim" || c.MaxModelLen != 32768 || c.TTFT != 20*time.Millisecond || c.ITL != 5*time.Millisecond || c.DefaultMaxTokens != 0 || c.Tokenizer == nil {
		t.Errorf("resolved config %+v", c)
	}
}

func TestNewRejectsNegative(t *testing.T) {
	for _, cfg := range []Config{{TTFT: -1}, {ITL: -1}, {MaxModelLen: -1}, {DefaultMaxTokens: -1}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}

// TestSeededText checks that text depends only on the seeds when the request
// has one, and differs between unseeded requests.
func TestSeededText(t *testing.T) {
	cfg := Config{TTFT: time.Millisecond, ITL: time.Microsecond, Seed: 42}
	a, b := startSim(t, cfg), startSim(t, cfg)
	get := func(inst *Instance, seed any) string {
		body := map[string]any{"prompt": "x", "max_tokens": 30}
		if seed != nil {
			body["seed"] = seed
		}
		resp := post(t, inst.BaseURL+"/completions", body)
		var r textResponse
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			t.Fatal(err)
		}
		return r.Choices[0].Text
	}
	if x, y := get(a, 3), get(b, 3); x != y {
		t.Errorf("same seeds, different text:\n%q\n%q", x, y)
	}
	if x, y := get(a, 3), get(a, 4); x == y {
		t.Errorf("different request seeds, same text %q", x)
	}
	if x, y := get(a, nil), get(a, nil); x == y {
		t.Errorf("two unseeded requests, same text %q", x)
	}
}

// TestPoolRetokenizes checks the property streaming relies on over a long
// text: any sequence of pool tokens re-tokenizes to itself.
func TestPoolRetokenizes(t *testing.T) {
	tok := builtinTokenizer(t)
	pool, err := poolFor(tok)
	if err != nil {
		t.Fatal(err)
	}
	if len(pool.texts) < 1000 {
		t.Errorf("pool has only %d tokens", len(pool.texts))
	}
	var seed int64 = 1
	src := newTextSource(pool, 0, &seed, 0)
	var sb strings.Builder
	const n = 5000
	for range n {
		sb.WriteString(src.next())
	}
	if got := tok.Count(sb.String()); got != n {
		t.Errorf("%d pool tokens re-tokenize to %d", n, got)
	}
}

func TestConcurrentStreams(t *testing.T) {
	inst := startSim(t, fastConfig())
	tok := builtinTokenizer(t)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 10 + i
			resp, err := http.Post(inst.BaseURL+"/completions", "application/json",
				strings.NewReader(fmt.Sprintf(`{"prompt":"hello","max_tokens":%d,"stream":true}`, n)))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Error(err)
				return
			}
			var text strings.Builder
			for _, ev := range strings.Split(string(b), "\n\n") {
				var c chunk
				if json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &c) == nil && len(c.Choices) == 1 && c.Choices[0].Text != nil {
					text.WriteString(*c.Choices[0].Text)
				}
			}
			if got := tok.Count(text.String()); got != n {
				t.Errorf("stream %d: %d tokens, want %d", i, got, n)
			}
		}()
	}
	wg.Wait()
}
