package protocol

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/tokenizer"
	"github.com/infermatrix/infermatrix/workload"
)

// step is one write of a scripted response, after a delay.
type step struct {
	delay time.Duration
	data  string
}

func sse(s string) string { return "data: " + s + "\n\n" }

func chatDelta(text string) string {
	b, _ := json.Marshal(text)
	return sse(`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":` + string(b) + `},"finish_reason":null}]}`)
}

// scripted serves one scripted response to every request.
func scripted(t *testing.T, status int, contentType string, steps ...step) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		w.(http.Flusher).Flush()
		for _, s := range steps {
			if s.delay > 0 {
				select {
				case <-time.After(s.delay):
				case <-r.Context().Done():
					return
				}
			}
			io.WriteString(w, s.data)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func testClient(t testing.TB, api string) *Client {
	t.Helper()
	tok, err := tokenizer.New("builtin")
	if err != nil {
		t.Fatal(err)
	}
	hc := NewHTTPClient(8)
	t.Cleanup(hc.CloseIdleConnections)
	return &Client{HTTP: hc, API: api, Tok: tok, RowStart: time.Now(), Budget: NewBudget(MaxBufferedResponses)}
}

func doOne(t *testing.T, c *Client, url string, stream bool, timeout time.Duration) *metrics.Record {
	t.Helper()
	ctx, cancel := context.WithTimeoutCause(context.Background(), timeout, ErrRequestTimeout)
	defer cancel()
	rec := &metrics.Record{ID: "t-0-0", Stream: stream}
	c.Do(ctx, &Call{URL: url, Body: []byte(`{"model":"m"}`), Rec: rec})
	return rec
}

const usage3 = `{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`

func TestStreamShapes(t *testing.T) {
	tests := []struct {
		name       string
		steps      []step
		events     int
		outServer  int // -1: no usage
		outClient  int
		firstIsOut bool
	}{
		{
			// vLLM: an empty role chunk first (not a token), finish_reason
			// on the last token, then a usage-only chunk.
			name: "vllm",
			steps: []step{
				{0, sse(`{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}`)},
				{20 * time.Millisecond, chatDelta(" one")},
				{5 * time.Millisecond, chatDelta(" two")},
				{5 * time.Millisecond, sse(`{"choices":[{"index":0,"delta":{"content":" three"},"finish_reason":"length"}],"usage":null}`)},
				{0, sse(usage3)},
				{0, "data: [DONE]\n\n"},
			},
			events: 3, outServer: 3, outClient: 3, firstIsOut: true,
		},
		{
			// llama.cpp: role chunk with content null in the same read as
			// the first token, a separate finish chunk, usage with timings.
			name: "llama.cpp",
			steps: []step{
				{20 * time.Millisecond, sse(`{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}]}`) + chatDelta(" one")},
				{5 * time.Millisecond, chatDelta(" two")},
				{5 * time.Millisecond, chatDelta(" three")},
				{0, sse(`{"choices":[{"finish_reason":"length","index":0,"delta":{}}]}`)},
				{0, sse(`{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10},"timings":{"prompt_n":7,"predicted_n":3}}`)},
				{0, "data: [DONE]\n\n"},
			},
			events: 3, outServer: 3, outClient: 3, firstIsOut: true,
		},
		{
			// TGI-like: several tokens per event; CRLF line endings.
			name: "several tokens per event",
			steps: []step{
				{20 * time.Millisecond, strings.ReplaceAll(chatDelta(" one two three"), "\n", "\r\n")},
				{5 * time.Millisecond, strings.ReplaceAll(chatDelta(" four five six"), "\n", "\r\n")},
				{0, "data: [DONE]\r\n\r\n"},
			},
			events: 2, outServer: -1, outClient: 6, firstIsOut: true,
		},
		{
			// A reasoning model: reasoning first, then the answer.
			name: "reasoning",
			steps: []step{
				{20 * time.Millisecond, sse(`{"choices":[{"delta":{"reasoning_content":" think"}}]}`)},
				{10 * time.Millisecond, sse(`{"choices":[{"delta":{"reasoning_content":" more"}}]}`)},
				{10 * time.Millisecond, chatDelta(" answer")},
				{0, sse(usage3)},
				{0, "data: [DONE]\n\n"},
			},
			events: 3, outServer: 3, outClient: 3, firstIsOut: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := scripted(t, 200, "text/event-stream; charset=utf-8", tt.steps...)
			rec := doOne(t, testClient(t, "chat"), srv.URL, true, 10*time.Second)
			if rec.Error != nil {
				t.Fatalf("error %+v", rec.Error)
			}
			if len(rec.Events) != tt.events {
				t.Errorf("events = %d; want %d", len(rec.Events), tt.events)
			}
			if tt.outServer >= 0 && (rec.OutputTokens.Server == nil || *rec.OutputTokens.Server != tt.outServer) {
				t.Errorf("server output tokens = %v; want %d", rec.OutputTokens.Server, tt.outServer)
			}
			if tt.outServer < 0 && rec.OutputTokens.Server != nil {
				t.Errorf("server output tokens = %d; want none (no usage sent)", *rec.OutputTokens.Server)
			}
			if rec.OutputTokens.Client != tt.outClient {
				t.Errorf("client output tokens = %d; want %d", rec.OutputTokens.Client, tt.outClient)
			}
			// TTFT fires on the first text, never on the role chunk sent
			// at time zero: it is at least the scripted 20 ms.
			if rec.FirstTokenNS < (20 * time.Millisecond).Nanoseconds() {
				t.Errorf("first token at %v; the first text was sent after 20ms", time.Duration(rec.FirstTokenNS))
			}
			if (rec.FirstOutputNS == rec.FirstTokenNS) != tt.firstIsOut {
				t.Errorf("first output %v, first token %v", time.Duration(rec.FirstOutputNS), time.Duration(rec.FirstTokenNS))
			}
			if tt.name == "reasoning" && rec.FirstOutputNS-rec.FirstTokenNS < (20*time.Millisecond).Nanoseconds() {
				t.Errorf("first output only %v after first token; the answer came 20ms after the reasoning", time.Duration(rec.FirstOutputNS-rec.FirstTokenNS))
			}
			if rec.LastTokenNS != rec.Events[len(rec.Events)-1] || rec.EndNS < rec.LastTokenNS || rec.Status != 200 {
				t.Errorf("last %d end %d status %d", rec.LastTokenNS, rec.EndNS, rec.Status)
			}
			if rec.FirstByteNS == 0 || rec.FirstByteNS > rec.FirstTokenNS || rec.ConnNS == 0 {
				t.Errorf("first byte %d conn %d; want both stamped, first byte before first token", rec.FirstByteNS, rec.ConnNS)
			}
		})
	}
}

func TestStreamFaults(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		ctype   string
		steps   []step
		timeout time.Duration
		class   string
		message string
	}{
		{"cut off without [DONE]", 200, "text/event-stream", []step{{0, chatDelta(" a")}}, 5 * time.Second, metrics.ErrTruncated, "without data: [DONE]"},
		{"OpenAI error event", 200, "text/event-stream", []step{{0, chatDelta(" a")}, {0, sse(`{"error":{"message":"out of memory","type":"server_error"}}`)}}, 5 * time.Second, metrics.ErrStream, "out of memory"},
		{"vLLM error event", 200, "text/event-stream", []step{{0, sse(`{"object":"error","message":"engine dead","code":500}`)}}, 5 * time.Second, metrics.ErrStream, "engine dead"},
		{"event: error", 200, "text/event-stream", []step{{0, "event: error\ndata: overloaded\n\n"}}, 5 * time.Second, metrics.ErrStream, "overloaded"},
		{"429 with Retry-After", 429, "application/json", []step{{0, `{"error":{"message":"rate limited","type":"rate_limit"}}`}}, 5 * time.Second, metrics.ErrHTTP, "rate limited"},
		{"vLLM 400", 400, "application/json", []step{{0, `{"object":"error","message":"maximum context length is 8192 tokens","type":"BadRequestError","code":400}`}}, 5 * time.Second, metrics.ErrHTTP, "maximum context length"},
		{"JSON instead of a stream", 200, "application/json", []step{{0, `{"choices":[]}`}}, 5 * time.Second, metrics.ErrProtocol, "application/json"},
		{"bad JSON in the stream", 200, "text/event-stream", []step{{0, sse(`{"choices":[`)}}, 5 * time.Second, metrics.ErrProtocol, "bad JSON"},
		{"stall", 200, "text/event-stream", []step{{0, chatDelta(" a")}, {time.Hour, ""}}, 300 * time.Millisecond, metrics.ErrTimeout, "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := scripted(t, tt.status, tt.ctype, tt.steps...)
			rec := doOne(t, testClient(t, "chat"), srv.URL, true, tt.timeout)
			if rec.Error == nil || rec.Error.Class != tt.class || !strings.Contains(rec.Error.Message, tt.message) {
				t.Fatalf("error = %+v; want class %s with %q", rec.Error, tt.class, tt.message)
			}
			if tt.status != 200 && rec.Status != tt.status {
				t.Errorf("status = %d; want %d", rec.Status, tt.status)
			}
			if rec.EndNS <= 0 {
				t.Errorf("EndNS = %d; want the time the failure was seen", rec.EndNS)
			}
		})
	}
}

func TestRetryAfterIsRecorded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(429)
		io.WriteString(w, `{"error":{"message":"slow down"}}`)
	}))
	defer srv.Close()
	rec := doOne(t, testClient(t, "chat"), srv.URL, true, 5*time.Second)
	if rec.Error == nil || !strings.Contains(rec.Error.Message, "Retry-After: 2") {
		t.Errorf("error = %+v; want the Retry-After value", rec.Error)
	}
}

func TestConnectionErrors(t *testing.T) {
	// A port nothing listens on.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	rec := doOne(t, testClient(t, "chat"), "http://"+addr, true, 5*time.Second)
	if rec.Error == nil || rec.Error.Class != metrics.ErrConnect {
		t.Errorf("refused: error = %+v; want class connect", rec.Error)
	}

	// A server that resets the connection mid-stream.
	rst := rawServer(t, func(conn net.Conn, req *http.Request) bool {
		fmt.Fprint(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		writeChunk(conn, chatDelta(" a"))
		time.Sleep(20 * time.Millisecond)
		conn.(*net.TCPConn).SetLinger(0) // close with RST
		return false
	})
	rec = doOne(t, testClient(t, "chat"), rst, true, 5*time.Second)
	if rec.Error == nil || (rec.Error.Class != metrics.ErrReset && rec.Error.Class != metrics.ErrTruncated) {
		t.Errorf("reset: error = %+v; want class reset (or truncated where the OS reports a plain close)", rec.Error)
	}
	if len(rec.Events) != 1 {
		t.Errorf("reset: %d events; want the one that arrived before the reset", len(rec.Events))
	}
}

// rawServer serves HTTP/1.1 by hand, so a test can do what net/http's
// server will not: close the connection after a complete response while
// advertising keep-alive, or reset it. handle returns whether to keep the
// connection for another request.
func rawServer(t *testing.T, handle func(net.Conn, *http.Request) bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				br := bufio.NewReader(conn)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if !handle(conn, req) {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

func writeChunk(w io.Writer, s string) {
	fmt.Fprintf(w, "%x\r\n%s\r\n", len(s), s)
}

// TestServerClosingAfterEachStream reproduces llama.cpp's server, which
// closes the TCP connection after every streamed response although it
// advertises keep-alive. Requests sent back to back must all succeed: none
// may fail with a spurious EOF on the dying connection.
func TestServerClosingAfterEachStream(t *testing.T) {
	url := rawServer(t, func(conn net.Conn, req *http.Request) bool {
		fmt.Fprint(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nKeep-Alive: timeout=5, max=100\r\nTransfer-Encoding: chunked\r\n\r\n")
		writeChunk(conn, chatDelta(" a")+chatDelta(" b"))
		writeChunk(conn, sse(`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)+"data: [DONE]\n\n")
		fmt.Fprint(conn, "0\r\n\r\n")
		// Close a moment later, as llama.cpp does: by then the client has
		// taken the connection back and sent its next request on it.
		time.Sleep(3 * time.Millisecond)
		return false
	})
	c := testClient(t, "chat")
	for i := 0; i < 30; i++ {
		rec := doOne(t, c, url, true, 5*time.Second)
		if rec.Error != nil {
			t.Fatalf("request %d: %+v; want no spurious error", i, rec.Error)
		}
	}
}

func TestNonStreamed(t *testing.T) {
	tests := []struct {
		api, body string
		server    int // -1: none
		client    int
	}{
		{"chat", `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":" one two"},"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`, 2, 2},
		{"completions", `{"object":"text_completion","choices":[{"index":0,"text":" one two three","finish_reason":"stop"}]}`, -1, 3},
	}
	for _, tt := range tests {
		t.Run(tt.api, func(t *testing.T) {
			srv := scripted(t, 200, "application/json", step{30 * time.Millisecond, tt.body})
			rec := doOne(t, testClient(t, tt.api), srv.URL, false, 5*time.Second)
			if rec.Error != nil {
				t.Fatal(rec.Error)
			}
			if (tt.server < 0) != (rec.OutputTokens.Server == nil) || (tt.server >= 0 && *rec.OutputTokens.Server != tt.server) {
				t.Errorf("server tokens = %v; want %d", rec.OutputTokens.Server, tt.server)
			}
			if rec.OutputTokens.Client != tt.client || rec.FinishReason == "" {
				t.Errorf("client tokens %d finish %q", rec.OutputTokens.Client, rec.FinishReason)
			}
			if rec.EndNS < (30 * time.Millisecond).Nanoseconds() {
				t.Errorf("EndNS = %v; the body was sent after 30ms", time.Duration(rec.EndNS))
			}
			if rec.FirstTokenNS != 0 || len(rec.Events) != 0 {
				t.Error("a non-streamed response has no token events")
			}
		})
	}
}

// TestRequestCarriesExtras checks what reaches the server: the endpoint,
// the key from the environment as a Bearer token, extra headers, the
// request id, and body fields spliced into the request.
func TestRequestCarriesExtras(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chatDelta(" x")+"data: [DONE]\n\n")
	}))
	defer srv.Close()
	c := testClient(t, "completions")
	c.APIKey = "sk-test"
	c.Headers = map[string]string{"X-Team": "capacity"}
	row := &schema.PlannedRow{ID: "r", Seed: 1, Input: schema.Length{Mean: 8}, Output: schema.Length{Mean: 4},
		Body: map[string]any{"ignore_eos": true, "min_tokens": 4}}
	w, err := workload.New(row, "completions", "m", c.Tok, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.Body(w.Prompt(0), true)
	if err != nil {
		t.Fatal(err)
	}
	rec := &metrics.Record{ID: "abc-1-2", Stream: true}
	c.Do(context.Background(), &Call{URL: srv.URL + "/v1", Body: b, Rec: rec})
	if rec.Error != nil {
		t.Fatal(rec.Error)
	}
	if got.URL.Path != "/v1/completions" || got.Header.Get("Authorization") != "Bearer sk-test" ||
		got.Header.Get("X-Team") != "capacity" || got.Header.Get("X-Request-Id") != "abc-1-2" {
		t.Errorf("request: path %s headers %v", got.URL.Path, got.Header)
	}
	var sent map[string]any
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	if prompt, _ := sent["prompt"].(string); c.Tok.Count(prompt) != 8 || sent["max_tokens"] != 4.0 || sent["ignore_eos"] != true || sent["min_tokens"] != 4.0 ||
		sent["stream"] != true || sent["stream_options"].(map[string]any)["include_usage"] != true {
		t.Errorf("body = %s", body)
	}
}

// TestConnectionsReusedAfterDone checks that streamed requests keep their
// connection: the reader must consume the chunked encoding's final chunk,
// which real servers send a moment after [DONE], or every request pays a
// new connection inside its TTFT.
func TestConnectionsReusedAfterDone(t *testing.T) {
	url := rawServer(t, func(conn net.Conn, req *http.Request) bool {
		fmt.Fprint(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		writeChunk(conn, chatDelta(" a")+sse(usage3)+"data: [DONE]\n\n")
		time.Sleep(2 * time.Millisecond)
		fmt.Fprint(conn, "0\r\n\r\n")
		return true
	})
	c := testClient(t, "chat")
	for i := 0; i < 10; i++ {
		rec := doOne(t, c, url, true, 5*time.Second)
		if rec.Error != nil {
			t.Fatal(rec.Error)
		}
		if i > 0 && !rec.ConnReused {
			t.Errorf("request %d opened a new connection; want the previous one reused", i)
		}
	}
}

func TestEmptyAnswersAreErrors(t *testing.T) {
	tests := []struct {
		name   string
		stream bool
		ctype  string
		body   string
	}{
		{"stream with only [DONE]", true, "text/event-stream", "data: [DONE]\n\n"},
		{"stream with a role chunk only", true, "text/event-stream", sse(`{"choices":[{"delta":{"role":"assistant","content":""}}]}`) + "data: [DONE]\n\n"},
		{"empty object", false, "application/json", `{}`},
		{"null choices", false, "application/json", `{"choices":null,"usage":{"prompt_tokens":1,"completion_tokens":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := scripted(t, 200, tt.ctype, step{0, tt.body})
			rec := doOne(t, testClient(t, "chat"), srv.URL, tt.stream, 5*time.Second)
			if rec.Error == nil || rec.Error.Class != metrics.ErrProtocol {
				t.Errorf("error = %+v; want a protocol error, not a fast empty success", rec.Error)
			}
		})
	}
}

// TestEarlyUsageIsNotTrusted checks that usage sent before the last text
// (a running count) does not replace the count of the whole answer.
func TestEarlyUsageIsNotTrusted(t *testing.T) {
	srv := scripted(t, 200, "text/event-stream",
		step{0, sse(`{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":0}}`)},
		step{0, chatDelta(" one") + chatDelta(" two") + chatDelta(" three")},
		step{0, "data: [DONE]\n\n"})
	rec := doOne(t, testClient(t, "chat"), srv.URL, true, 5*time.Second)
	if rec.Error != nil || rec.OutputTokens.Server != nil || rec.OutputTokens.Client != 3 || rec.OutputTokens.Count() != 3 {
		t.Errorf("error %+v, server %v, client %d; want the client's 3", rec.Error, rec.OutputTokens.Server, rec.OutputTokens.Client)
	}
}

// TestRetriesAreCounted: a server that drops a reused connection while
// working on a request makes Go's transport resend it; the record must
// say so rather than pass it off as a plain success.
func TestRetriesAreCounted(t *testing.T) {
	var mu sync.Mutex
	n := 0
	url := rawServer(t, func(conn net.Conn, req *http.Request) bool {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		if k == 2 {
			time.Sleep(50 * time.Millisecond)
			return false // drop the connection without answering
		}
		fmt.Fprint(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		writeChunk(conn, chatDelta(" a")+"data: [DONE]\n\n")
		fmt.Fprint(conn, "0\r\n\r\n")
		return true
	})
	c := testClient(t, "chat")
	first := doOne(t, c, url, true, 5*time.Second)
	second := doOne(t, c, url, true, 5*time.Second)
	if first.Error != nil || first.Retries != 0 {
		t.Fatalf("first: %+v retries %d", first.Error, first.Retries)
	}
	if second.Error != nil || second.Retries != 1 || second.EndNS < (50*time.Millisecond).Nanoseconds() {
		t.Errorf("second: error %+v, retries %d, end %v; want a success marked retried, its latency including the dropped attempt",
			second.Error, second.Retries, time.Duration(second.EndNS))
	}
}

func TestCutOffStreams(t *testing.T) {
	tests := []struct {
		name  string
		write func(net.Conn)
		class string
	}{
		{"cut mid-line, clean end", func(conn net.Conn) {
			writeChunk(conn, chatDelta(" a")+`data: {"choices":[{"delta":{"con`)
			fmt.Fprint(conn, "0\r\n\r\n")
		}, metrics.ErrTruncated},
		{"malformed chunked encoding", func(conn net.Conn) {
			writeChunk(conn, chatDelta(" a"))
			fmt.Fprint(conn, "zz\r\nnot a chunk\r\n")
		}, metrics.ErrProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := rawServer(t, func(conn net.Conn, req *http.Request) bool {
				fmt.Fprint(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
				tt.write(conn)
				return false
			})
			rec := doOne(t, testClient(t, "chat"), url, true, 5*time.Second)
			if rec.Error == nil || rec.Error.Class != tt.class || len(rec.Events) != 1 {
				t.Errorf("error %+v, %d events; want class %s after the one whole event", rec.Error, len(rec.Events), tt.class)
			}
		})
	}
}

// TestChoiceAndUsageStamps checks the stamps semantics: vllm times by: the
// first and last events with choices (the empty role chunk included) and
// the usage-only chunk after them.
func TestChoiceAndUsageStamps(t *testing.T) {
	body := `data: {"id":"r1","choices":[{"delta":{"role":"assistant","content":""}}]}` + "\n\n" +
		chatDelta(" a") + chatDelta(" b") +
		`data: {"choices":[{"delta":{},"finish_reason":"length"}]}` + "\n\n" +
		`data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}` + "\n\n" +
		"data: [DONE]\n\n"
	c := testClient(t, "chat")
	rec := &metrics.Record{Stream: true}
	// One read per event, so that each gets its own stamp.
	var chunks []string
	for _, ev := range strings.SplitAfter(body, "\n\n") {
		if ev != "" {
			chunks = append(chunks, ev)
		}
	}
	c.readEvents(context.Background(), &slowReader{chunks: chunks, gap: time.Millisecond}, rec, time.Now())
	if rec.Error != nil {
		t.Fatal(rec.Error)
	}
	if rec.ResponseID != "r1" {
		t.Errorf("response id %q", rec.ResponseID)
	}
	if !(rec.FirstChoiceNS > 0 && rec.FirstChoiceNS < rec.FirstTokenNS && rec.LastTokenNS < rec.LastChoiceNS && rec.LastChoiceNS < rec.UsageNS) {
		t.Errorf("stamps: first choice %d, first token %d, last token %d, last choice %d, usage %d",
			rec.FirstChoiceNS, rec.FirstTokenNS, rec.LastTokenNS, rec.LastChoiceNS, rec.UsageNS)
	}
}

// slowReader returns one chunk per Read, gap apart.
type slowReader struct {
	chunks []string
	gap    time.Duration
}

func (r *slowReader) Read(p []byte) (int, error) {
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	time.Sleep(r.gap)
	n := copy(p, r.chunks[0])
	r.chunks[0] = r.chunks[0][n:]
	if r.chunks[0] == "" {
		r.chunks = r.chunks[1:]
	}
	return n, nil
}

// TestNonStreamedEndIsTheLastByte: a non-streamed response ends when its
// last byte is read, not when the read that finds the end of the body
// returns. Here the server writes the whole JSON body, then holds the
// connection 150 ms before ending the chunked body.
func TestNonStreamedEndIsTheLastByte(t *testing.T) {
	body := `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"a b c"},"finish_reason":"length"}],` +
		`"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,"prompt_tokens_details":{"cached_tokens":4}}}`
	srv := scripted(t, http.StatusOK, "application/json", step{data: body}, step{delay: 150 * time.Millisecond, data: ""})
	rec := doOne(t, testClient(t, "chat"), srv.URL, false, 5*time.Second)
	if rec.Error != nil {
		t.Fatal(rec.Error)
	}
	if end := time.Duration(rec.EndNS); end > 100*time.Millisecond {
		t.Errorf("end %v; want the last byte's time, before the server's 150 ms wait", end)
	}
	if rec.CachedTokens == nil || *rec.CachedTokens != 4 {
		t.Errorf("cached tokens %v; want the usage's 4", rec.CachedTokens)
	}
}

// TestCachedTokensFromTheStream: usage.prompt_tokens_details.cached_tokens
// (vLLM, SGLang, llama.cpp) or llama.cpp's timings.cache_n, whichever the
// server sends; nothing when it sends neither.
func TestCachedTokensFromTheStream(t *testing.T) {
	for _, tt := range []struct {
		name, usage string
		want        *int
	}{
		{"openai", `{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":1,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":5}}}`, intp(5)},
		{"llama.cpp timings", `{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":1,"total_tokens":8},"timings":{"cache_n":6,"prompt_n":1}}`, intp(6)},
		{"none", `{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":1,"total_tokens":8}}`, nil},
	} {
		srv := scripted(t, http.StatusOK, "text/event-stream", step{data: chatDelta("hi")}, step{data: sse(tt.usage)}, step{data: "data: [DONE]\n\n"})
		rec := doOne(t, testClient(t, "chat"), srv.URL, true, 5*time.Second)
		if rec.Error != nil {
			t.Fatalf("%s: %+v", tt.name, rec.Error)
		}
		if (rec.CachedTokens == nil) != (tt.want == nil) || (tt.want != nil && *rec.CachedTokens != *tt.want) {
			t.Errorf("%s: cached %v; want %v", tt.name, deref(rec.CachedTokens), deref(tt.want))
		}
	}
}

func intp(v int) *int { return &v }

// deref is a count for a message: its value, or nil when absent.
func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestClassifyConnectionErrors pins the classes a run's gate and its
// error table read: a dial that fails in any way, a reset during the
// handshake included (a dying server's listener resets the connections
// still in its backlog), is "connect", no connection had; a reset or EOF
// on a connection that was had is "reset", and mid-response "truncated".
func TestClassifyConnectionErrors(t *testing.T) {
	dial := func(errno syscall.Errno) error {
		return &url.Error{Op: "Post", URL: "http://127.0.0.1:1/v1/chat/completions", Err: &net.OpError{
			Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}}
	}
	onConn := func(op string, errno syscall.Errno) error {
		return &url.Error{Op: "Post", URL: "http://127.0.0.1:1/v1/chat/completions", Err: &net.OpError{
			Op: op, Net: "tcp", Err: os.NewSyscallError(op, errno)}}
	}
	for _, tt := range []struct {
		name    string
		err     error
		reading bool
		want    string
	}{
		{"dial refused", dial(syscall.ECONNREFUSED), false, metrics.ErrConnect},
		{"dial reset", dial(syscall.ECONNRESET), false, metrics.ErrConnect},
		{"dns", &url.Error{Op: "Post", Err: &net.DNSError{Err: "no such host", Name: "nowhere"}}, false, metrics.ErrConnect},
		{"write reset", onConn("write", syscall.ECONNRESET), false, metrics.ErrReset},
		{"read reset", onConn("read", syscall.ECONNRESET), true, metrics.ErrReset},
		{"EOF before a response", &url.Error{Op: "Post", Err: io.EOF}, false, metrics.ErrReset},
		{"EOF mid-response", io.ErrUnexpectedEOF, true, metrics.ErrTruncated},
		{"client out of files", &url.Error{Op: "Post", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.EMFILE)}}, false, metrics.ErrConnect},
	} {
		got := classify(context.Background(), tt.err, tt.reading)
		if got.Class != tt.want {
			t.Errorf("%s (%v): class %q; want %q", tt.name, tt.err, got.Class, tt.want)
		}
		// Only the client's own failure says so: the gate and the
		// client_files check read the detail.
		if client := got.Detail == metrics.DetailClientFiles; client != (tt.name == "client out of files") {
			t.Errorf("%s: detail %q", tt.name, got.Detail)
		}
	}
}

// TestOnConnMeansReachable: the gate reopens on OnConn, so it fires only on
// evidence that the server answers now: a fresh connection, or a response
// byte. A kept-alive connection handed out from the pool is none, since a
// dead server's idle connections are handed out too until a read fails.
func TestOnConnMeansReachable(t *testing.T) {
	calls := 0
	tr := &connTrace{start: time.Now(), now: time.Now, onConn: func() { calls++ }}
	h := tr.hooks()
	h.GotConn(httptrace.GotConnInfo{Reused: true, WasIdle: true})
	if calls != 0 {
		t.Fatal("OnConn on a kept-alive connection from the pool")
	}
	h.GotFirstResponseByte()
	if calls != 1 {
		t.Fatalf("OnConn called %d times at the first response byte; want 1", calls)
	}
	h.GotConn(httptrace.GotConnInfo{})
	if calls != 2 {
		t.Fatalf("OnConn called %d times after a fresh connection; want 2", calls)
	}
}
