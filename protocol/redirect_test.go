package protocol

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
)

const chatJSON = `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi there"},"finish_reason":"stop"}]}`

// elsewhere is a server on another port of the same host, which counts
// what reaches it and the API keys it is sent.
type elsewhere struct {
	*httptest.Server
	hits, keys atomic.Int32
}

func newElsewhere(t *testing.T) *elsewhere {
	e := &elsewhere{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.hits.Add(1)
		if r.Header.Get("Authorization") != "" {
			e.keys.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, chatJSON)
	}))
	t.Cleanup(e.Close)
	return e
}

// TestRedirects: a 307 or 308 to the same origin is followed; a redirect
// to another origin is not, and nothing reaches it, the API key least of
// all; a 302 that would turn the POST into a GET is not followed; a loop
// stops. Each refusal is its own error class, with where the redirect
// pointed, without its user info or query.
func TestRedirects(t *testing.T) {
	other := newElsewhere(t)
	var v2 atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/same/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/v2/chat/completions", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/v2/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || string(body) != `{"model":"m"}` || r.Header.Get("Authorization") != "Bearer sk-test" {
			http.Error(w, "want the same POST, body and key", http.StatusBadRequest)
			return
		}
		v2.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, chatJSON)
	})
	mux.HandleFunc("/cross/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", strings.Replace(other.URL, "http://", "http://user:hunter2@", 1)+"/v1/chat/completions?token=hunter3")
		w.WriteHeader(http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/found/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/v2/chat/completions", http.StatusFound)
	})
	mux.HandleFunc("/loop/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop/chat/completions", http.StatusPermanentRedirect)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := testClient(t, "chat")
	c.APIKey = "sk-test"

	rec := doOne(t, c, srv.URL+"/same", false, 5*time.Second)
	if rec.Error != nil || v2.Load() != 1 || rec.Retries != 0 || rec.OutputTokens.Client == 0 {
		t.Errorf("same-origin 307: error %+v, %d requests reached the target, retries %d; want followed once, no retry counted", rec.Error, v2.Load(), rec.Retries)
	}

	tests := []struct {
		path string
		want []string
	}{
		{"/cross", []string{"307 Temporary Redirect to " + other.URL + "/v1/chat/completions, another origin: not followed, so the API key"}},
		{"/found", []string{"302 Found to " + srv.URL + "/v2/chat/completions: not followed, as it would turn the POST into a GET"}},
		{"/loop", []string{"308 Permanent Redirect to " + srv.URL + "/loop/chat/completions: stopped after 10 redirects"}},
	}
	for _, tt := range tests {
		v2.Store(0)
		rec := doOne(t, c, srv.URL+tt.path, false, 5*time.Second)
		if rec.Error == nil || rec.Error.Class != metrics.ErrRedirect {
			t.Errorf("%s: error %+v; want class %s", tt.path, rec.Error, metrics.ErrRedirect)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(rec.Error.Message, w) {
				t.Errorf("%s: message %q; want it to contain %q", tt.path, rec.Error.Message, w)
			}
		}
		if strings.Contains(rec.Error.Message, "hunter") || strings.Contains(rec.Error.Message, "user") {
			t.Errorf("%s: message %q shows the redirect's user info or query", tt.path, rec.Error.Message)
		}
		if v2.Load() != 0 {
			t.Errorf("%s: the redirect was followed", tt.path)
		}
	}
	// Streamed, the same.
	if rec := doOne(t, c, srv.URL+"/cross", true, 5*time.Second); rec.Error == nil || rec.Error.Class != metrics.ErrRedirect {
		t.Errorf("streamed cross-origin redirect: %+v", rec.Error)
	}
	if other.hits.Load() != 0 || other.keys.Load() != 0 {
		t.Errorf("the other origin got %d requests, %d with the API key; want none", other.hits.Load(), other.keys.Load())
	}
}

func TestSameOrigin(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"http://h:80/a", "http://h/b", true},
		{"https://H/a", "https://h:443/b", true},
		{"http://h:8000/a", "http://h:9000/a", false},
		{"http://h/a", "https://h/a", false},
		{"http://h/a", "http://g/a", false},
	}
	for _, tt := range tests {
		a, _ := http.NewRequest("GET", tt.a, nil)
		b, _ := http.NewRequest("GET", tt.b, nil)
		if got := sameOrigin(a.URL, b.URL); got != tt.want {
			t.Errorf("sameOrigin(%s, %s) = %v", tt.a, tt.b, got)
		}
	}
}

// TestResponseBudget: one response may hold at most maxResponseBody, and
// all responses in flight together at most their budget; a response's
// share comes back when its request ends.
func TestResponseBudget(t *testing.T) {
	b := NewBudget(1 << 20)
	h1, h2 := &respHold{budget: b}, &respHold{budget: b}
	if err := h1.grow(700 << 10); err != nil {
		t.Fatal(err)
	}
	if err := h2.grow(700 << 10); !errors.Is(err, errResponseBudget) {
		t.Errorf("second response past the shared budget: %v", err)
	}
	h1.release()
	if err := (&respHold{budget: b}).grow(700 << 10); err != nil {
		t.Errorf("after the first response ended: %v", err)
	}
	if err := (&respHold{}).grow(maxResponseBody + 1); !errors.Is(err, errResponseTooLarge) {
		t.Errorf("one response past its own bound: %v", err)
	}

	// Through the client: a stream whose text passes a small budget fails
	// with class protocol, and gives its share back.
	big := strings.Repeat("x", 64<<10)
	steps := make([]step, 40)
	for i := range steps {
		steps[i] = step{data: chatDelta(big)}
	}
	srv := scripted(t, 200, "text/event-stream", steps...)
	c := testClient(t, "chat")
	c.Budget = NewBudget(1 << 20)
	rec := doOne(t, c, srv.URL, true, 10*time.Second)
	if rec.Error == nil || rec.Error.Class != metrics.ErrProtocol || !strings.Contains(rec.Error.Message, "(1 MiB in all)") {
		t.Errorf("stream past the budget: %+v", rec.Error)
	}
	if left := c.Budget.left.Load(); left != 1<<20 {
		t.Errorf("budget left after the request: %d; want all of it back", left)
	}
	// A body past the per-request bound, in one response.
	huge := scripted(t, 200, "application/json", step{data: `{"choices": [{"message": {"content": "` + strings.Repeat("y", maxResponseBody) + `"}}]}`})
	if rec := doOne(t, testClient(t, "chat"), huge.URL, false, 20*time.Second); rec.Error == nil || rec.Error.Class != metrics.ErrProtocol ||
		!strings.Contains(rec.Error.Message, "more than 64 MiB") {
		t.Errorf("body past 64 MiB: %+v", rec.Error)
	}
}
