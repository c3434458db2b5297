package runner

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/infermatrix/infermatrix/protocol"
)

// The client's own redirect rules are tested in protocol/redirect_test.go;
// these tests hold discovery to them.

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

// TestDiscoveryRedirects: the discovery GETs are held to the same rule,
// and a refused redirect is noted rather than taken for an unreachable
// server.
func TestDiscoveryRedirects(t *testing.T) {
	other := newElsewhere(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
	}))
	defer srv.Close()
	hc := protocol.NewHTTPClient(1)
	defer hc.CloseIdleConnections()
	d, err := discover(context.Background(), hc, srv.URL+"/v1", "sk-test", map[string]string{"X-Team": "a"})
	if err != nil || !strings.Contains(d.Error, "GET /models: 302 Found to "+other.URL+"/v1/models, another origin: not followed") {
		t.Errorf("discover: %v, %q", err, d.Error)
	}
	if other.hits.Load() != 0 {
		t.Errorf("the other origin got %d requests; want none", other.hits.Load())
	}
}
