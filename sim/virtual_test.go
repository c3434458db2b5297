package sim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/sim/engine"
)

func newTestVirtual(t *testing.T) *Virtual {
	t.Helper()
	p, ok := engine.LookupPreset("llama-3.1-8b-h100")
	if !ok {
		t.Fatal("no llama-3.1-8b-h100 preset")
	}
	ec := p.Config
	v, err := NewVirtual(Config{Model: "m", Engine: &ec, MaxModelLen: 8192}, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// drain moves the clock until the engine has nothing left to do.
func drain(v *Virtual) {
	for {
		t, ok := v.Next()
		if d, dok := v.NextDone(); dok && (!ok || d < t) {
			t, ok = d, true
		}
		if !ok {
			return
		}
		v.RunUntil(t)
		v.EndDue(t)
	}
}

func virtualHeader(id string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Request-Id", id)
	return h
}

// A response that is not streamed leaves when its last token is released,
// as one body, and the client reading it sees that time.
func TestVirtualNonStreamedAnswerLeavesWithItsLastToken(t *testing.T) {
	v := newTestVirtual(t)
	var ended time.Duration
	c, err := v.Submit("/v1/chat/completions", virtualHeader("a"),
		[]byte(`{"model":"m","messages":[{"role":"user","content":"hello there"}],"max_tokens":20}`),
		nil, func(at time.Duration) { ended = at })
	if err != nil {
		t.Fatal(err)
	}
	drain(v)
	if ended == 0 {
		t.Fatal("the request never ended")
	}
	c.ReplayStart(nil)
	hc := &http.Client{Transport: v.Transport()}
	req, _ := http.NewRequest(http.MethodPost, "http://virtual.invalid/v1/chat/completions", strings.NewReader("{}"))
	req.Header = virtualHeader("a")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got := v.ClientClock().Sub(v.Time(0)); got != ended {
		t.Errorf("the client read the body at %v; want the last token's release at %v", got, ended)
	}
	var out struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.Usage.CompletionTokens != 20 || resp.StatusCode != 200 {
		t.Errorf("status %d body %s: want 200 with 20 completion tokens", resp.StatusCode, body)
	}
	if _, err := hc.Do(req); err == nil {
		t.Error("a request replayed twice was answered twice")
	}
}

// An invalid request is answered at once, ImmediateLatency after it was
// sent, with the server's error; a cut request's replay ends where the
// client gave up, its context cancelled with the cause.
func TestVirtualRefusalAndCut(t *testing.T) {
	v := newTestVirtual(t)
	bad, err := v.Submit("/v1/chat/completions", virtualHeader("bad"), []byte(`{"model":"nope","messages":[]}`), nil, func(time.Duration) {})
	if err != nil {
		t.Fatal(err)
	}
	cause := errors.New("gave up")
	long, err := v.Submit("/v1/chat/completions", virtualHeader("long"),
		[]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5000,"stream":true}`), nil, func(time.Duration) {})
	if err != nil {
		t.Fatal(err)
	}
	v.RunUntil(50 * time.Millisecond)
	v.EndDue(50 * time.Millisecond)
	if at, done := bad.Done(); !done || at != ImmediateLatency {
		t.Errorf("refusal ended %v (done %v); want at %v", at, done, ImmediateLatency)
	}
	long.Cut(cause)
	hc := &http.Client{Transport: v.Transport()}
	bad.ReplayStart(nil)
	req, _ := http.NewRequest(http.MethodPost, "http://virtual.invalid/v1/chat/completions", nil)
	req.Header = virtualHeader("bad")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusBadRequest {
		t.Errorf("status %d for an unknown model; want vLLM's 404 or 400", resp.StatusCode)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	long.ReplayStart(cancel)
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, "http://virtual.invalid/v1/chat/completions", nil)
	req.Header = virtualHeader("long")
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if !errors.Is(err, cause) || !errors.Is(context.Cause(ctx), cause) {
		t.Errorf("read error %v, context cause %v; want the cut's cause", err, context.Cause(ctx))
	}
	if !strings.Contains(string(body), "data: ") || strings.Contains(string(body), "[DONE]") {
		t.Errorf("cut stream of %d bytes ending %q: want the tokens released before the cut and no [DONE]", len(body), body[max(len(body)-80, 0):])
	}
	if got := v.ClientClock().Sub(v.Time(0)); got != 50*time.Millisecond {
		t.Errorf("the cut reached the client at %v; want 50ms", got)
	}
}
