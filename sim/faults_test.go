package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

const chatStreamBody = `{"messages":[{"role":"user","content":"hi"}],"max_tokens":%d,"stream":true,"stream_options":{"include_usage":true}}`

func chatStream(n int) string { return fmt.Sprintf(chatStreamBody, n) }

func chatPlain(n int) string {
	return fmt.Sprintf(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":%d}`, n)
}

func TestParseFaultHeader(t *testing.T) {
	good := []struct {
		in   string
		want *FaultRule
	}{
		{"429", &FaultRule{Kind: FaultRateLimit, RetryAfter: time.Second}},
		{"429; retry_after=3", &FaultRule{Kind: FaultRateLimit, RetryAfter: 3 * time.Second}},
		{"503", &FaultRule{Kind: FaultUnavailable}},
		{"503;retry_after=1500ms", &FaultRule{Kind: FaultUnavailable, RetryAfter: 1500 * time.Millisecond}},
		{"500", &FaultRule{Kind: FaultServerError}},
		{"error_event", &FaultRule{Kind: FaultErrorEvent, After: 1}},
		{"truncate; after=0", &FaultRule{Kind: FaultTruncate}},
		{" reset ; after=10 ", &FaultRule{Kind: FaultReset, After: 10}},
		{"stall; after=5; for=2s", &FaultRule{Kind: FaultStall, After: 5, For: 2 * time.Second}},
		{"stall", &FaultRule{Kind: FaultStall, After: 1}},
		{"slow_headers; for=200ms", &FaultRule{Kind: FaultSlowHeaders, For: 200 * time.Millisecond}},
		{"slow_headers", &FaultRule{Kind: FaultSlowHeaders, For: time.Second}},
		{"none", nil},
	}
	for _, c := range good {
		got, set, err := parseFaultHeader([]string{c.in})
		if err != nil || !set || !reflect.DeepEqual(got, c.want) {
			t.Errorf("parseFaultHeader(%q) = %+v, %v, %v; want %+v", c.in, got, set, err, c.want)
		}
	}
	if got, set, err := parseFaultHeader(nil); got != nil || set || err != nil {
		t.Errorf("parseFaultHeader(nil) = %v, %v, %v; want nothing", got, set, err)
	}

	bad := [][]string{
		{""}, {"bogus"}, {"RESET"}, {"429; after=1"}, {"500; retry_after=1"}, {"reset; after=-1"},
		{"reset; after=two"}, {"stall; for=2"}, {"stall; after"}, {"stall; after=1; after=2"},
		{"none; after=1"}, {"slow_headers; for=-1s"}, {"truncate; speed=3"}, {"429; retry_after=-2"},
		{"429", "500"},
	}
	for _, in := range bad {
		_, _, err := parseFaultHeader(in)
		if err == nil {
			t.Errorf("parseFaultHeader(%q) succeeded", in)
			continue
		}
		if err.status != http.StatusBadRequest || !strings.Contains(err.message, validFaultKinds()) {
			t.Errorf("parseFaultHeader(%q) = %d %q; want a 400 listing %s", in, err.status, err.message, validFaultKinds())
		}
	}
}

func TestFaultHeaderMalformed(t *testing.T) {
	inst := startSim(t, fastConfig())
	resp := request(t, inst.BaseURL+"/chat/completions", chatStream(3), "explode; after=2")
	checkError(t, resp, http.StatusBadRequest, "BadRequestError", "429, 500, 503, error_event, truncate, reset, stall, slow_headers, none")
}

func TestFaultStatuses(t *testing.T) {
	truth := &syncBuffer{}
	cfg := fastConfig()
	cfg.GroundTruth = truth
	inst := startSim(t, cfg)
	cases := []struct {
		fault, kind, retryAfter string
		status                  int
		code                    string // JSON of error.code
	}{
		{"429", "requests", "1", 429, `"rate_limit_exceeded"`},
		{"429; retry_after=3", "requests", "3", 429, `"rate_limit_exceeded"`},
		{"500", "server_error", "", 500, "null"},
		{"503", "service_unavailable", "", 503, "null"},
		{"503; retry_after=2", "service_unavailable", "2", 503, "null"},
	}
	for i, c := range cases {
		body := chatStream(5)
		if i%2 == 1 {
			body = chatPlain(5)
		}
		resp := request(t, inst.BaseURL+"/chat/completions", body, c.fault)
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d", c.fault, resp.StatusCode, c.status)
		}
		if got := resp.Header.Get("Retry-After"); got != c.retryAfter {
			t.Errorf("%s: Retry-After %q, want %q", c.fault, got, c.retryAfter)
		}
		var e struct {
			Error map[string]json.RawMessage `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatalf("%s: decode: %v", c.fault, err)
		}
		if string(e.Error["type"]) != `"`+c.kind+`"` || string(e.Error["code"]) != c.code ||
			string(e.Error["param"]) != "null" || len(e.Error["message"]) < 3 {
			t.Errorf("%s: error body %v", c.fault, e.Error)
		}
	}
	for kind, want := range map[FaultKind]string{FaultRateLimit: "2.0", FaultServerError: "1.0", FaultUnavailable: "2.0", FaultReset: "0.0"} {
		if got := faultCount(t, inst.BaseURL, kind); got != want {
			t.Errorf("%s faults %s, want %s", kind, got, want)
		}
	}
	for _, rec := range waitTruth(t, truth, len(cases)) {
		if rec.Status != statusFault || rec.Fault == nil || rec.OutputTokens != 0 || rec.FinishReason != nil {
			t.Errorf("ground truth of a status fault: %+v", rec)
		}
	}
}

func TestFaultErrorEvent(t *testing.T) {
	inst := startSim(t, fastConfig())
	resp := request(t, inst.BaseURL+"/chat/completions", chatStream(10), "error_event; after=2")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	events := readEvents(t, resp.Body)
	// role, two tokens, the error, [DONE]: vLLM ends every stream with
	// [DONE], an errored one included.
	if len(events) != 5 || events[4] != "[DONE]" {
		t.Fatalf("events %q", events)
	}
	for i, ev := range events[1:3] {
		if c, _ := decodeChunk(t, ev); contentOf(c) == "" {
			t.Errorf("event %d is not a token: %s", i+1, ev)
		}
	}
	var e struct {
		Error struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Param   json.RawMessage `json:"param"`
			Code    int             `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(events[3]), &e); err != nil {
		t.Fatalf("error event %s: %v", events[3], err)
	}
	if e.Error.Type != "InternalServerError" || e.Error.Code != 500 || string(e.Error.Param) != "null" || e.Error.Message == "" {
		t.Errorf("error event %s", events[3])
	}

	resp = request(t, inst.BaseURL+"/chat/completions", chatPlain(10), "error_event")
	checkError(t, resp, http.StatusInternalServerError, "InternalServerError", "simulated fault")
	if got := faultCount(t, inst.BaseURL, FaultErrorEvent); got != "2.0" {
		t.Errorf("error_event faults %s, want 2.0", got)
	}
}

// faultCount scrapes faults_injected_total for one kind.
func faultCount(t *testing.T, baseURL string, kind FaultKind) string {
	t.Helper()
	return seriesValue(t, baseURL, `infermatrix_sim:faults_injected_total{model_name="infermatrix-sim",kind="`+string(kind)+`"}`)
}

func TestFaultTruncate(t *testing.T) {
	inst := startSim(t, fastConfig())
	resp := request(t, inst.BaseURL+"/chat/completions", chatStream(10), "truncate; after=3")
	events := readEvents(t, resp.Body) // a clean end: no read error
	if len(events) != 4 {
		t.Fatalf("got %d events, want the role chunk and 3 tokens: %q", len(events), events)
	}
	for _, ev := range events[1:] {
		c, _ := decodeChunk(t, ev)
		if contentOf(c) == "" || c.Usage != nil || c.Choices[0].FinishReason != nil {
			t.Errorf("truncated stream has a non-token event %s", ev)
		}
	}

	// A non-streaming request gets a well-formed 200 whose JSON is cut.
	resp = request(t, inst.BaseURL+"/chat/completions", chatPlain(10), "truncate")
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	if json.Valid(body) || !strings.HasPrefix(string(body), `{"id":"chatcmpl-`) {
		t.Errorf("truncated body %q", body)
	}
}

func TestFaultReset(t *testing.T) {
	inst := startSim(t, fastConfig())
	resp := request(t, inst.BaseURL+"/chat/completions", chatStream(50), "reset; after=2")
	events, err := rawEvents(resp.Body)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("read error %v, want a connection reset", err)
	}
	if len(events) > 3 {
		t.Errorf("got %d events before the reset, want at most the role chunk and 2 tokens", len(events))
	}
	for _, ev := range events {
		if ev == "[DONE]" {
			t.Error("reset stream has [DONE]")
		}
	}

	req, _ := http.NewRequest(http.MethodPost, inst.BaseURL+"/chat/completions", strings.NewReader(chatPlain(5)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(FaultHeader, "reset")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("non-streaming reset answered %d", resp.StatusCode)
	}
	if got := faultCount(t, inst.BaseURL, FaultReset); got != "2.0" {
		t.Errorf("reset faults %s, want 2.0", got)
	}
}

// TestFaultResetWithoutHijack checks the fallback where the connection
// cannot be taken over: the stream is truncated instead, without a panic.
func TestFaultResetWithoutHijack(t *testing.T) {
	for _, p := range []string{PersonalityVLLM, PersonalityLlamaCpp} {
		s, err := New(Config{TTFT: time.Nanosecond, ITL: time.Nanosecond, Personality: p})
		if err != nil {
			t.Fatal(err)
		}
		for _, fault := range []string{"reset; after=2", ""} {
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(chatStream(5)))
			r.Header.Set("Content-Type", "application/json")
			if fault != "" {
				r.Header.Set(FaultHeader, fault)
			}
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			events, _ := rawEvents(w.Body)
			done := len(events) > 0 && events[len(events)-1] == "[DONE]"
			if fault != "" && (done || len(events) != 3) {
				t.Errorf("%s: recorded %d events, done %v; want role + 2 tokens", p, len(events), done)
			}
			if fault == "" && !done {
				t.Errorf("%s: stream without fault did not finish: %q", p, events)
			}
		}
	}
}

// TestFaultStallUnbounded checks that a stall without a duration holds the
// stream until the client gives up, and that the request ends canceled.
func TestFaultStallUnbounded(t *testing.T) {
	truth := &syncBuffer{}
	inst := startSim(t, Config{TTFT: time.Millisecond, ITL: time.Microsecond, GroundTruth: truth})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, inst.BaseURL+"/chat/completions", strings.NewReader(chatStream(1000)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(FaultHeader, "stall; after=3")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	for tokens := 0; tokens < 3; {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d tokens: %v", tokens, err)
		}
		if strings.Contains(line, `"content":" `) {
			tokens++
		}
	}
	// The stall strikes when token 3 comes due; the tokens up to then
	// are all the client gets, however long it waits.
	waitFaultCount(t, inst.BaseURL, FaultStall, "1.0")
	cancel()
	rec := waitTruth(t, truth, 1)[0]
	if rec.Status != statusCanceled || rec.Fault == nil || *rec.Fault != "stall" || rec.OutputTokens != 3 {
		t.Errorf("ground truth %+v, want a canceled stall after 3 tokens", rec)
	}
}

func waitFaultCount(t *testing.T, baseURL string, kind FaultKind, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for faultCount(t, baseURL, kind) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s faults never reached %s", kind, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestFaultStallBounded checks that a stall delays the tokens after it by at
// least its duration and that the stream then finishes. Only lower bounds
// are checked, so a slow machine cannot make it fail.
func TestFaultStallBounded(t *testing.T) {
	truth := &syncBuffer{}
	inst := startSim(t, Config{TTFT: time.Millisecond, ITL: time.Millisecond, GroundTruth: truth})
	const stallFor = 60 * time.Millisecond
	resp := request(t, inst.BaseURL+"/chat/completions", chatStream(6), "stall; after=2; for=60ms")
	events := readEvents(t, resp.Body)
	if len(events) != 1+6+1+1 || events[len(events)-1] != "[DONE]" { // role, tokens, usage, [DONE]
		t.Fatalf("got %d events, want a whole stream", len(events))
	}
	rec := waitTruth(t, truth, 1)[0]
	if rec.Status != statusOK || rec.Fault == nil || *rec.Fault != "stall" || rec.OutputTokens != 6 {
		t.Fatalf("ground truth %+v", rec)
	}
	if gap := time.Duration(rec.FlushNs[2] - rec.FlushNs[1]); gap < stallFor {
		t.Errorf("tokens 1 and 2 flushed %v apart, want at least the %v stall", gap, stallFor)
	}
	// Tokens held by an injected stall are late by design and stay out
	// of the host's flush lateness.
	if count, _, _ := inst.Server.FlushLateness(); count != 2 {
		t.Errorf("flush lateness counted %d tokens, want the 2 before the stall", count)
	}
}

func TestFaultStallDoesNotHoldClose(t *testing.T) {
	inst, err := Start(Config{TTFT: time.Millisecond, ITL: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, inst.BaseURL+"/chat/completions", strings.NewReader(chatStream(100)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(FaultHeader, "stall; after=0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	waitFaultCount(t, inst.BaseURL, FaultStall, "1.0")
	start := time.Now()
	if err := inst.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= closeGrace {
		t.Errorf("Close took %v with a stalled stream", took)
	}
}

// TestFaultSlowHeaders checks that the headers wait for the delay while the
// model runs on: tokens due meanwhile keep their due times and go out in a
// burst when the headers do.
func TestFaultSlowHeaders(t *testing.T) {
	truth := &syncBuffer{}
	inst := startSim(t, Config{TTFT: time.Millisecond, ITL: time.Millisecond, GroundTruth: truth})
	const hold = 80 * time.Millisecond
	sent := time.Now()
	resp := request(t, inst.BaseURL+"/chat/completions", chatStream(5), "slow_headers; for=80ms")
	if took := time.Since(sent); took < hold {
		t.Errorf("headers after %v, before the %v hold", took, hold)
	}
	if events := readEvents(t, resp.Body); events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream did not finish: %q", events)
	}
	rec := waitTruth(t, truth, 1)[0]
	if rec.Status != statusOK || rec.Fault == nil || *rec.Fault != "slow_headers" {
		t.Fatalf("ground truth %+v", rec)
	}
	for k := range rec.OutputTokens {
		if time.Duration(rec.DueNs[k]) >= hold || time.Duration(rec.FlushNs[k]) < hold {
			t.Errorf("token %d due at %v, flushed at %v; want due before and flushed after %v",
				k, time.Duration(rec.DueNs[k]), time.Duration(rec.FlushNs[k]), hold)
		}
	}
	if count, _, _ := inst.Server.FlushLateness(); count != 0 {
		t.Errorf("flush lateness counted %d tokens held by slow_headers", count)
	}

	sent = time.Now()
	resp = request(t, inst.BaseURL+"/completions", `{"prompt":"hi","max_tokens":3}`, "slow_headers; for=50ms")
	if _, err := io.ReadAll(resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	if took := time.Since(sent); took < 50*time.Millisecond {
		t.Errorf("non-streaming response after %v, before the 50ms hold", took)
	}
}

// TestConfigFaultsSeeded checks that configured faults are drawn per request
// from Config.Seed and the arrival order: two servers with the same seed
// fault the same requests, whatever seed the requests carry.
func TestConfigFaultsSeeded(t *testing.T) {
	cfg := Config{TTFT: time.Nanosecond, ITL: time.Nanosecond, Seed: 11, Faults: []FaultRule{
		{Kind: FaultServerError, Probability: 0.25},
		{Kind: FaultRateLimit, Probability: 0.25},
	}}
	statuses := func(cfg Config) []int {
		inst := startSim(t, cfg)
		var got []int
		for range 60 {
			resp := request(t, inst.BaseURL+"/completions", `{"prompt":"hi","max_tokens":1,"seed":5}`, "")
			io.Copy(io.Discard, resp.Body)
			got = append(got, resp.StatusCode)
		}
		return got
	}
	a, b := statuses(cfg), statuses(cfg)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("same seed, different faults:\n%v\n%v", a, b)
	}
	count := map[int]int{}
	for _, s := range a {
		count[s]++
	}
	if count[200] == 0 || count[500] == 0 || count[429] == 0 || count[200]+count[500]+count[429] != len(a) {
		t.Errorf("statuses %v: want a mix of 200, 500 and 429", count)
	}
	other := cfg
	other.Seed = 12
	if c := statuses(other); reflect.DeepEqual(a, c) {
		t.Errorf("seeds 11 and 12 fault the same requests: %v", a)
	}
}

func TestHeaderOverridesConfigFaults(t *testing.T) {
	inst := startSim(t, Config{TTFT: time.Nanosecond, ITL: time.Nanosecond, Faults: []FaultRule{{Kind: FaultServerError, Probability: 1}}})
	for _, c := range []struct {
		fault  string
		status int
	}{{"", 500}, {"none", 200}, {"503", 503}, {"truncate", 200}} {
		resp := request(t, inst.BaseURL+"/completions", `{"prompt":"hi","max_tokens":2}`, c.fault)
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != c.status {
			t.Errorf("header %q: status %d, want %d", c.fault, resp.StatusCode, c.status)
		}
	}
}

// TestChooseFaultRates checks the draw against the configured probabilities.
func TestChooseFaultRates(t *testing.T) {
	s, err := New(Config{Faults: []FaultRule{
		{Kind: FaultStall, Probability: 0.1, For: time.Second},
		{Kind: FaultReset, Probability: 0.3, After: 4},
	}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	count := map[FaultKind]int{}
	for i := range uint64(n) {
		if f := s.chooseFault(i); f != nil {
			count[f.Kind]++
		}
	}
	for kind, p := range map[FaultKind]float64{FaultStall: 0.1, FaultReset: 0.3} {
		if got := float64(count[kind]) / n; got < p-0.02 || got > p+0.02 {
			t.Errorf("%s drawn for %.3f of requests, want %.2f", kind, got, p)
		}
	}
}

func TestFaultRulesValidated(t *testing.T) {
	bad := []struct {
		rules []FaultRule
		want  string
	}{
		{[]FaultRule{{Kind: "explode", Probability: 0.1}}, "unknown fault kind"},
		{[]FaultRule{{Kind: FaultRateLimit, Probability: 1.5}}, "probability"},
		{[]FaultRule{{Kind: FaultRateLimit, Probability: -0.1}}, "probability"},
		{[]FaultRule{{Kind: FaultRateLimit, Probability: 0.6}, {Kind: FaultReset, Probability: 0.6}}, "sum"},
		{[]FaultRule{{Kind: FaultRateLimit, Probability: 0.1, After: 3}}, "after does not apply"},
		{[]FaultRule{{Kind: FaultReset, Probability: 0.1, After: -1}}, "after -1"},
		{[]FaultRule{{Kind: FaultReset, Probability: 0.1, For: time.Second}}, "for does not apply"},
		{[]FaultRule{{Kind: FaultStall, Probability: 0.1, RetryAfter: time.Second}}, "retry_after does not apply"},
	}
	for _, c := range bad {
		_, err := New(Config{Faults: c.rules})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(Faults: %+v) = %v; want an error containing %q", c.rules, err, c.want)
		}
	}
	rules := []FaultRule{{Kind: FaultRateLimit, Probability: 0.1}, {Kind: FaultSlowHeaders, Probability: 0.2}}
	s, err := New(Config{Faults: rules})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Config().Faults; got[0].RetryAfter != time.Second || got[1].For != time.Second {
		t.Errorf("resolved faults %+v: want the defaults filled", got)
	}
	if rules[0].RetryAfter != 0 || rules[1].For != 0 {
		t.Errorf("WithDefaults wrote to the caller's rules: %+v", rules)
	}
}
