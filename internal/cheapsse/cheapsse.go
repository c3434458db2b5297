// Package cheapsse serves OpenAI-compatible chat streams as cheaply as a
// server can: no engine, no tokenizer, no JSON encoding on the hot path,
// every chunk built once per request and written once per token. It is
// the server the load benchmarks measure the client against: against the
// built-in server, which models a GPU and pays for it in CPU, a two-core
// machine shows the server's cost, not the client's (issue 16).
//
// Each chunk is written and flushed on its own, one token per event, as
// vLLM streams; the last chunks are the finish reason and the usage (the
// prompt counted as one token per four bytes of the request body, a
// stand-in: nothing here tokenizes), then [DONE].
package cheapsse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// Word is the text of every token: one token in o200k, GPT-2 and Llama 3
// alike, so a client that counts the text agrees with the usage.
const Word = " the"

// Model is the one model the server lists and answers as.
const Model = "cheap-sse"

// Server is a running cheap server.
type Server struct {
	URL string // base URL, ending in /v1
	srv *http.Server
	ln  net.Listener
	ids atomic.Int64
}

// Start serves on addr (127.0.0.1:0 for any free port).
func Start(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cheapsse: %w", err)
	}
	s := &Server{ln: ln, URL: "http://" + ln.Addr().String() + "/v1"}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server at once.
func (s *Server) Close() error {
	err := s.srv.Close()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops the server after its streams end.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

var (
	models = []byte(`{"object":"list","data":[{"id":"` + Model + `","object":"model","owned_by":"cheapsse"}]}`)
	done   = []byte("data: [DONE]\n\n")
)

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/models":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(models)
	case "/v1/chat/completions":
		s.stream(w, r)
	case "/health":
	default:
		http.NotFound(w, r)
	}
}

// maxTokens reads "max_tokens" (or "max_completion_tokens") from a body
// without decoding it; 16 when neither is there.
func maxTokens(body []byte) int {
	for _, key := range [][]byte{[]byte(`"max_tokens":`), []byte(`"max_completion_tokens":`)} {
		if i := bytes.Index(body, key); i >= 0 {
			rest := bytes.TrimLeft(body[i+len(key):], " ")
			j := 0
			for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
				j++
			}
			if n, err := strconv.Atoi(string(rest[:j])); err == nil && n > 0 {
				return n
			}
		}
	}
	return 16
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	n := maxTokens(body)
	id := "chatcmpl-cheap-" + strconv.FormatInt(s.ids.Add(1), 10)
	head := `data: {"id":"` + id + `","object":"chat.completion.chunk","created":0,"model":"` + Model + `","choices":[{"index":0,"delta":`
	role := []byte(head + `{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n")
	token := []byte(head + `{"content":"` + Word + `"},"finish_reason":null}]}` + "\n\n")
	finish := []byte(head + `{},"finish_reason":"length"}]}` + "\n\n")
	prompt := len(body) / 4
	usage := fmt.Appendf(nil, `data: {"id":"%s","object":"chat.completion.chunk","created":0,"model":"%s","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n",
		id, Model, prompt, n, prompt+n)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	write := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	if !write(role) {
		return
	}
	for range n {
		if !write(token) {
			return
		}
	}
	_ = write(finish) && write(usage) && write(done)
}
