package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// llamaTimingsJSON decodes a timings object, failing unless it has exactly
// llama-server's nine fields.
func llamaTimingsJSON(t *testing.T, raw json.RawMessage) llamaTimings {
	t.Helper()
	var m map[string]*float64
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("timings %s: %v", raw, err)
	}
	for _, k := range []string{"cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second",
		"predicted_n", "predicted_ms", "predicted_per_token_ms", "predicted_per_second"} {
		if _, ok := m[k]; !ok {
			t.Errorf("timings lack %s: %s", k, raw)
		}
	}
	if len(m) != 9 {
		t.Errorf("timings have %d fields: %s", len(m), raw)
	}
	var tm struct {
		CacheN      int     `json:"cache_n"`
		PromptN     int     `json:"prompt_n"`
		PromptMS    float64 `json:"prompt_ms"`
		PredictedN  int     `json:"predicted_n"`
		PredictedMS float64 `json:"predicted_ms"`
	}
	if err := json.Unmarshal(raw, &tm); err != nil {
		t.Fatal(err)
	}
	return llamaTimings{CacheN: tm.CacheN, PromptN: tm.PromptN, PromptMS: jsonFloat(tm.PromptMS), PredictedN: tm.PredictedN, PredictedMS: jsonFloat(tm.PredictedMS)}
}

// checkLlamaTimings checks timings against the request: its counts, and its
// durations against lower bounds the timing model guarantees.
func checkLlamaTimings(t *testing.T, raw json.RawMessage, prompt, n int, ttft, itl time.Duration) {
	t.Helper()
	tm := llamaTimingsJSON(t, raw)
	if tm.PromptN != prompt || tm.PredictedN != n || tm.CacheN != 0 {
		t.Errorf("timings %s: want prompt_n %d, predicted_n %d", raw, prompt, n)
	}
	// The first token is produced no earlier than TTFT after arrival and
	// the last no earlier than its due time; the split between them
	// depends on how late the first wakeup was.
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	last := ttft + time.Duration(n-1)*itl
	if float64(tm.PromptMS) < ms(ttft) || float64(tm.PromptMS+tm.PredictedMS) < ms(last) || tm.PredictedMS < 0 {
		t.Errorf("timings %s: want prompt_ms >= %v and prompt_ms + predicted_ms >= %v", raw, ttft, last)
	}
}

func TestLlamaCppChatStream(t *testing.T) {
	const (
		ttft = 5 * time.Millisecond
		itl  = 500 * time.Microsecond
		n    = 6
	)
	inst := startSim(t, Config{TTFT: ttft, ITL: itl, Personality: PersonalityLlamaCpp})
	tok := builtinTokenizer(t)
	msg := "What does a llama eat?"
	for _, includeUsage := range []bool{false, true} {
		t.Run(fmt.Sprintf("include_usage=%v", includeUsage), func(t *testing.T) {
			body := fmt.Sprintf(`{"model":"whatever-llama-serves","messages":[{"role":"user","content":%q}],"max_tokens":%d,"stream":true,"stream_options":{"include_usage":%v}}`, msg, n, includeUsage)
			resp := request(t, inst.BaseURL+"/chat/completions", body, "")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			h := resp.Header
			if h.Get("Server") != "llama.cpp" || h.Get("Keep-Alive") != "timeout=5, max=100" || h.Get("Content-Type") != "text/event-stream" || h.Get("X-Accel-Buffering") != "no" {
				t.Errorf("headers %v", h)
			}
			if resp.Close || h.Get("Connection") != "" {
				t.Errorf("the close is announced: Connection %q", h.Get("Connection"))
			}
			events := readEvents(t, resp.Body)
			want := 1 + n + 1 + 1 // role, tokens, finish, [DONE]
			if includeUsage {
				want++
			}
			if len(events) != want || events[len(events)-1] != "[DONE]" {
				t.Fatalf("got %d events, want %d: %q", len(events), want, events)
			}
			var content strings.Builder
			for i, ev := range events[:len(events)-1] {
				if !strings.HasPrefix(ev, `{"choices":`) {
					t.Errorf("event %d does not start with choices: %s", i, ev)
				}
				c, fields := decodeChunk(t, ev)
				if c.Object != "chat.completion.chunk" || !strings.HasPrefix(c.ID, "chatcmpl-") || string(fields["system_fingerprint"]) == "" {
					t.Errorf("event %d envelope: %s", i, ev)
				}
				_, hasTimings := fields["timings"]
				_, hasUsage := fields["usage"]
				var choices []map[string]json.RawMessage
				if err := json.Unmarshal(fields["choices"], &choices); err != nil {
					t.Fatal(err)
				}
				switch {
				case i == 0:
					if len(choices) != 1 || string(choices[0]["delta"]) != `{"role":"assistant","content":null}` || choices[0]["logprobs"] != nil || hasTimings || hasUsage {
						t.Errorf("role chunk %s", ev)
					}
				case i <= n:
					if contentOf(c) == "" || string(choices[0]["finish_reason"]) != "null" || choices[0]["logprobs"] != nil || hasTimings {
						t.Errorf("token chunk %d: %s", i, ev)
					}
					content.WriteString(contentOf(c))
				case i == n+1:
					if string(choices[0]["delta"]) != "{}" || string(choices[0]["finish_reason"]) != `"length"` || hasUsage || hasTimings == includeUsage {
						t.Errorf("finish chunk %s", ev)
					}
					if !includeUsage {
						checkLlamaTimings(t, fields["timings"], tok.Count(msg), n, ttft, itl)
					}
				default:
					if len(choices) != 0 || c.Usage == nil || !hasTimings {
						t.Fatalf("usage chunk %s", ev)
					}
					if c.Usage.PromptTokens != tok.Count(msg) || c.Usage.CompletionTokens != n || c.Usage.TotalTokens != c.Usage.PromptTokens+n {
						t.Errorf("usage %+v", *c.Usage)
					}
					if !strings.Contains(ev, `"usage":{"completion_tokens":`) {
						t.Errorf("usage not in llama.cpp's field order: %s", ev)
					}
					checkLlamaTimings(t, fields["timings"], tok.Count(msg), n, ttft, itl)
				}
			}
			if got := tok.Count(content.String()); got != n {
				t.Errorf("content re-tokenizes to %d, want %d", got, n)
			}
		})
	}
}

func TestLlamaCppCompletionStream(t *testing.T) {
	const n = 4
	inst := startSim(t, Config{TTFT: 2 * time.Millisecond, ITL: 500 * time.Microsecond, Personality: PersonalityLlamaCpp})
	tok := builtinTokenizer(t)
	prompt := "Llamas are"
	for _, includeUsage := range []bool{false, true} {
		body := fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"stream":true,"stream_options":{"include_usage":%v}}`, prompt, n, includeUsage)
		resp := request(t, inst.BaseURL+"/completions", body, "")
		events := readEvents(t, resp.Body)
		// No role chunk and never a usage chunk: tokens, the final
		// chunk, [DONE].
		if len(events) != n+2 || events[n+1] != "[DONE]" {
			t.Fatalf("include_usage=%v: got %d events: %q", includeUsage, len(events), events)
		}
		for i, ev := range events[:n+1] {
			c, fields := decodeChunk(t, ev)
			if c.Object != "text_completion" || !strings.HasPrefix(c.ID, "chatcmpl-") || len(c.Choices) != 1 || c.Choices[0].Text == nil {
				t.Fatalf("event %d: %s", i, ev)
			}
			_, hasTimings := fields["timings"]
			if i < n {
				if *c.Choices[0].Text == "" || c.Choices[0].FinishReason != nil || c.Usage != nil || hasTimings {
					t.Errorf("token event %d: %s", i, ev)
				}
				continue
			}
			if *c.Choices[0].Text != "" || c.Choices[0].FinishReason == nil || *c.Choices[0].FinishReason != "length" || c.Usage == nil || !hasTimings {
				t.Fatalf("final event %s", ev)
			}
			if c.Usage.CompletionTokens != n || c.Usage.PromptTokens != tok.Count(prompt) {
				t.Errorf("usage %+v", *c.Usage)
			}
			checkLlamaTimings(t, fields["timings"], tok.Count(prompt), n, 2*time.Millisecond, 500*time.Microsecond)
		}
	}
}

func TestLlamaCppNonStream(t *testing.T) {
	inst := startSim(t, Config{TTFT: time.Millisecond, ITL: 100 * time.Microsecond, Personality: PersonalityLlamaCpp})
	for _, c := range []struct{ path, body, object string }{
		{"/chat/completions", chatPlain(5), "chat.completion"},
		{"/completions", `{"prompt":"hi","max_tokens":5}`, "text_completion"},
	} {
		resp := request(t, inst.BaseURL+c.path, c.body, "")
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Server") != "llama.cpp" {
			t.Fatalf("%s: %d %v", c.path, resp.StatusCode, err)
		}
		m := decodeMap(t, string(b))
		if string(m["object"]) != `"`+c.object+`"` || !strings.HasPrefix(string(m["id"]), `"chatcmpl-`) || !strings.HasPrefix(string(b), `{"choices":`) {
			t.Errorf("%s: body %s", c.path, b)
		}
		var u llamaUsage
		if err := json.Unmarshal(m["usage"], &u); err != nil || u.CompletionTokens != 5 || u.TotalTokens != u.PromptTokens+5 {
			t.Errorf("%s: usage %s", c.path, m["usage"])
		}
		checkLlamaTimings(t, m["timings"], 1, 5, time.Millisecond, 100*time.Microsecond)
	}
}

// TestLlamaCppClosesAfterStream checks the quirk on a raw connection: after
// a streamed response the server closes the connection, although it said
// nothing; after a non-streamed one the connection serves another request.
func TestLlamaCppClosesAfterStream(t *testing.T) {
	inst := startSim(t, Config{TTFT: time.Millisecond, ITL: 100 * time.Microsecond, Personality: PersonalityLlamaCpp})
	send := func(conn net.Conn, br *bufio.Reader, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, inst.BaseURL+"/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if err := req.Write(conn); err != nil {
			t.Fatalf("write request: %v", err)
		}
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			t.Fatalf("read response: %v", err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatalf("read body: %v", err)
		}
		return resp
	}
	dial := func() (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", inst.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		return conn, bufio.NewReader(conn)
	}

	conn, br := dial()
	resp := send(conn, br, chatStream(4))
	if resp.Close || resp.Header.Get("Keep-Alive") == "" {
		t.Errorf("stream announced the close: Close %v, Keep-Alive %q", resp.Close, resp.Header.Get("Keep-Alive"))
	}
	// The chunked body ended cleanly; what follows is the close.
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after a stream, read %v; want EOF from the server's close", err)
	}

	conn, br = dial()
	send(conn, br, chatPlain(3))
	send(conn, br, chatPlain(3)) // the same connection serves again
}

// countingListener wraps a listener to count the connections it accepts and
// those the server closes before the client did.
type countingListener struct {
	net.Listener
	accepted, serverClosed atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.accepted.Add(1)
	return &countingConn{Conn: c, l: l}, nil
}

type countingConn struct {
	net.Conn
	l         *countingListener
	sawEOF    atomic.Bool
	closeOnce sync.Once
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if errors.Is(err, io.EOF) {
		c.sawEOF.Store(true)
	}
	return n, err
}

func (c *countingConn) Close() error {
	c.closeOnce.Do(func() {
		if !c.sawEOF.Load() {
			c.l.serverClosed.Add(1)
		}
	})
	return c.Conn.Close()
}

// TestLlamaCppKeepAliveClient checks that a keep-alive Go client survives the
// unannounced closes when its requests carry an Idempotency-Key, which lets
// the transport retry a request that met a dead connection, and that the
// server really closed every connection after its stream.
func TestLlamaCppKeepAliveClient(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	inst, err := StartOn(cl, Config{TTFT: 100 * time.Microsecond, ITL: 50 * time.Microsecond, Personality: PersonalityLlamaCpp})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	defer inst.Close()
	transport := &http.Transport{MaxIdleConnsPerHost: 4}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}

	const requests = 20
	var reused atomic.Int64 // attempts on a connection the server was closing
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if info.Reused {
			reused.Add(1)
		}
	}}
	for i := range requests {
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace),
			http.MethodPost, inst.BaseURL+"/chat/completions", strings.NewReader(chatStream(3)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", fmt.Sprintf("req-%d", i))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		events, err := rawEvents(resp.Body)
		resp.Body.Close()
		if err != nil || len(events) == 0 || events[len(events)-1] != "[DONE]" {
			t.Fatalf("request %d: %d events, %v", i, len(events), err)
		}
	}
	if got := seriesValue(t, inst.BaseURL, `vllm:request_success_total{model_name="infermatrix-sim",finished_reason="length"}`); got != "20.0" {
		t.Errorf("successes %s, want 20.0", got)
	}
	// Every stream ran on a connection of its own, which the server closed
	// first. The /metrics scrape above used one more connection, and the
	// transport may have dialed a spare while it retried.
	deadline := time.Now().Add(5 * time.Second)
	for cl.serverClosed.Load() < requests && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := cl.serverClosed.Load(); got != requests {
		t.Errorf("server closed %d connections, want %d", got, requests)
	}
	if got := cl.accepted.Load(); got < requests+1 {
		t.Errorf("accepted %d connections, want at least %d (one per stream, one for /metrics)", got, requests+1)
	}
	// How often the client met a dying connection depends on timing; it
	// survived each time.
	t.Logf("%d of %d requests first tried a connection the server was closing", reused.Load(), requests)
}

// TestTGIStream checks TGI's chunks: one token per event, as TGI streams,
// the role on every delta, finish_reason on the last token's event, and
// the request's model field ignored ("tgi" is what TGI's own examples send).
func TestTGIStream(t *testing.T) {
	inst := startSim(t, Config{TTFT: time.Millisecond, ITL: 200 * time.Microsecond, Personality: PersonalityTGI})
	if got := inst.Server.Config().TokensPerEvent; got != 1 {
		t.Fatalf("TokensPerEvent %d, want 1: TGI sends one token per event", got)
	}
	tok := builtinTokenizer(t)
	const n = 3
	for _, c := range []struct {
		path, body string
		object     string
	}{
		{"/chat/completions", fmt.Sprintf(`{"model":"tgi","messages":[{"role":"user","content":"hi"}],"max_tokens":%d,"stream":true,"stream_options":{"include_usage":true}}`, n), "chat.completion.chunk"},
		{"/completions", fmt.Sprintf(`{"model":"tgi","prompt":"hi","max_tokens":%d,"stream":true,"stream_options":{"include_usage":true}}`, n), "text_completion"},
	} {
		resp := request(t, inst.BaseURL+c.path, c.body, "")
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%s: %s, Content-Type %q", c.path, resp.Status, resp.Header.Get("Content-Type"))
		}
		events := readEvents(t, resp.Body)
		if len(events) != n+1+1 || events[n+1] != "[DONE]" {
			t.Fatalf("%s: got %d events, want %d token events, usage, [DONE]: %q", c.path, len(events), n, events)
		}
		var text strings.Builder
		for i, ev := range events[:n] {
			if !strings.HasPrefix(ev, `{"object":"`+c.object+`"`) {
				t.Errorf("event %d not in TGI's key order: %s", i, ev)
			}
			ch, fields := decodeChunk(t, ev)
			if string(fields["system_fingerprint"]) == "" || ch.Object != c.object {
				t.Errorf("event %d envelope: %s", i, ev)
			}
			piece := contentOf(ch)
			if tok.Count(piece) != 1 {
				t.Errorf("event %d carries %q, %d tokens; want 1", i, piece, tok.Count(piece))
			}
			text.WriteString(piece)
			if ch.Choices[0].Delta != nil && (ch.Choices[0].Delta.Role == nil || *ch.Choices[0].Delta.Role != "assistant") {
				t.Errorf("event %d delta lacks the role: %s", i, ev)
			}
			fr := ch.Choices[0].FinishReason
			if last := i == n-1; last == (fr == nil) || (last && *fr != "length") {
				t.Errorf("event %d finish_reason: %s", i, ev)
			}
		}
		if got := tok.Count(text.String()); got != n {
			t.Errorf("%s: text re-tokenizes to %d, want %d", c.path, got, n)
		}
		u, _ := decodeChunk(t, events[n])
		if len(u.Choices) != 0 || u.Usage == nil || u.Usage.CompletionTokens != n {
			t.Errorf("usage event %s", events[n])
		}
	}
}

// TestTokensPerEventFaultBoundary checks that a fault inside an event's
// group still lets exactly After tokens through.
func TestTokensPerEventFaultBoundary(t *testing.T) {
	tok := builtinTokenizer(t)
	inst := startSim(t, Config{TTFT: time.Millisecond, ITL: 100 * time.Microsecond, Personality: PersonalityTGI, TokensPerEvent: 4})
	resp := request(t, inst.BaseURL+"/chat/completions", chatStream(20), "truncate; after=6")
	var text strings.Builder
	events := readEvents(t, resp.Body)
	for _, ev := range events {
		c, _ := decodeChunk(t, ev)
		text.WriteString(contentOf(c))
	}
	if len(events) != 2 || tok.Count(text.String()) != 6 {
		t.Errorf("got %d events with %d tokens, want 2 events (4 + 2) with 6", len(events), tok.Count(text.String()))
	}
}

// TestTokensPerEventVLLM checks that TokensPerEvent applies to any
// personality.
func TestTokensPerEventVLLM(t *testing.T) {
	tok := builtinTokenizer(t)
	inst := startSim(t, Config{TTFT: time.Millisecond, ITL: 100 * time.Microsecond, TokensPerEvent: 3})
	resp := request(t, inst.BaseURL+"/chat/completions", chatStream(7), "")
	events := readEvents(t, resp.Body)
	// role, events of 3, 3 and 1 (the last with finish_reason), usage, [DONE]
	if len(events) != 1+3+2 {
		t.Fatalf("got %d events: %q", len(events), events)
	}
	for i, want := range []int{3, 3, 1} {
		c, _ := decodeChunk(t, events[1+i])
		if got := tok.Count(contentOf(c)); got != want {
			t.Errorf("event %d carries %d tokens, want %d", 1+i, got, want)
		}
	}
}

func TestPersonalityValidated(t *testing.T) {
	_, err := New(Config{Personality: "sglang"})
	if err == nil || !strings.Contains(err.Error(), "vllm, llama.cpp, tgi") {
		t.Errorf("New(Personality: sglang) = %v; want an error listing the valid ones", err)
	}
	if _, err := New(Config{TokensPerEvent: -1}); err == nil {
		t.Error("New(TokensPerEvent: -1) succeeded")
	}
	for p, want := range map[string]int{"": 1, PersonalityVLLM: 1, PersonalityLlamaCpp: 1, PersonalityTGI: 1} {
		if got := (Config{Personality: p}).WithDefaults().TokensPerEvent; got != want {
			t.Errorf("Personality %q: TokensPerEvent %d, want %d", p, got, want)
		}
	}
}
