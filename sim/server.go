package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/infermatrix/infermatrix/internal/buildinfo"
	"github.com/infermatrix/infermatrix/sim/engine"
	"github.com/infermatrix/infermatrix/tokenizer"
)

// Server is the simulated inference server. It is an http.Handler, so a
// caller can mount it on any listener or in httptest; Start runs it on
// loopback with a managed lifetime.
type Server struct {
	cfg       Config
	tok       tokenizer.Tokenizer
	pool      *tokenPool
	timing    timingModel
	modelJSON []byte // cfg.Model as a JSON string, spliced into chunks
	created   int64  // start time, reported as the model's creation time

	requests atomic.Uint64 // numbers valid requests, for their unseeded draws
	metrics  metrics
	pers     personality
	truth    *truthWriter // nil unless cfg.GroundTruth is set
	// clock, when set, is the server's time instead of the wall clock's:
	// the virtual clock of a run on virtual time (virtual.go).
	clock func() time.Time
}

// now is the server's time: the wall clock, or the virtual clock.
func (s *Server) now() time.Time {
	if s.clock != nil {
		return s.clock()
	}
	return time.Now()
}

// New returns a server for cfg, with defaults applied. It loads the builtin
// tokenizer when cfg.Tokenizer is nil and precomputes the token pool output
// text is drawn from, both cached across servers.
func New(cfg Config) (*Server, error) {
	return build(cfg, func(ec engine.Config) (timingModel, error) { return newEngineTiming(ec) })
}

// build is New with the engine's driver chosen by the caller: the real-time
// one, or the virtual clock's (virtual.go).
func build(cfg Config, drive func(engine.Config) (timingModel, error)) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("sim: invalid config: %w", err)
	}
	if cfg.Tokenizer == nil {
		tok, err := tokenizer.New(tokenizer.Builtin)
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		cfg.Tokenizer = tok
	}
	pool, err := poolFor(cfg.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("sim: build output token pool: %w", err)
	}
	modelJSON, err := json.Marshal(cfg.Model)
	if err != nil {
		return nil, fmt.Errorf("sim: encode model name: %w", err)
	}
	pers, err := parsePersonality(cfg.Personality)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err) // validate has caught it already
	}
	var timing timingModel = constantTiming{ttft: cfg.TTFT, itl: cfg.ITL}
	if cfg.Engine != nil {
		// The engine refuses requests longer than its max_model_len; the
		// server's own limit, which answers them with a 400 first, is
		// the one that counts, so the two must agree.
		ec := *cfg.Engine
		ec.MaxModelLen = cfg.MaxModelLen
		et, err := drive(ec)
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		timing = et
	}
	s := &Server{
		cfg:       cfg,
		tok:       cfg.Tokenizer,
		pool:      pool,
		timing:    timing,
		modelJSON: modelJSON,
		created:   time.Now().Unix(),
		metrics:   newMetrics(),
		pers:      pers,
	}
	if cfg.GroundTruth != nil {
		s.truth = &truthWriter{w: cfg.GroundTruth}
	}
	return s, nil
}

// Close stops the engine's real-time driver. Requests still waiting for
// tokens fail. A Server that is served by an Instance is closed by it.
func (s *Server) Close() { s.timing.close() }

// Config returns the configuration the server runs with, defaults and
// tokenizer resolved, so that a caller can record what it measured against.
func (s *Server) Config() Config { return s.cfg }

// ServeHTTP routes the OpenAI-compatible endpoints. Routing is a switch
// rather than an http.ServeMux so that wrong methods and unknown paths get
// the personality's JSON errors instead of the mux's plain-text ones.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.setServerHeaders(w.Header())
	switch r.URL.Path {
	case "/v1/chat/completions":
		if s.allowJSON(w, r) {
			s.serveGeneration(w, r, chatEndpoint)
		}
	case "/v1/completions":
		if s.allowJSON(w, r) {
			s.serveGeneration(w, r, completionEndpoint)
		}
	case "/v1/embeddings", "/v1/rerank", "/rerank":
		// vLLM serves rerank at /rerank, /v1/rerank and /v2/rerank.
		if s.allowJSON(w, r) {
			s.servePooling(w, r, r.URL.Path != "/v1/embeddings") // embeddings.go
		}
	case "/tokenize":
		if s.allowJSON(w, r) {
			s.serveTokenize(w, r) // tokenize.go
		}
	case "/detokenize":
		if s.allowJSON(w, r) {
			s.serveDetokenize(w, r)
		}
	case "/v1/models":
		if s.allow(w, r, http.MethodGet, http.MethodHead) {
			s.serveModels(w)
		}
	case "/health":
		if s.allow(w, r, http.MethodGet, http.MethodHead) {
			w.WriteHeader(http.StatusOK)
		}
	case "/ping":
		// vLLM's /ping (SageMaker's health check) answers as /health,
		// on GET and POST.
		if s.allow(w, r, http.MethodGet, http.MethodHead, http.MethodPost) {
			w.WriteHeader(http.StatusOK)
		}
	case "/metrics":
		if s.allow(w, r, http.MethodGet, http.MethodHead) {
			s.serveMetrics(w)
		}
	case "/version":
		if s.allow(w, r, http.MethodGet, http.MethodHead) {
			s.serveVersion(w)
		}
	default:
		s.writeError(w, &apiError{status: http.StatusNotFound, kind: kindRouting, message: "Not Found"})
	}
}

// allowJSON reports whether r is a POST with a JSON body, answering as
// the personality does when not.
func (s *Server) allowJSON(w http.ResponseWriter, r *http.Request) bool {
	return s.allow(w, r, http.MethodPost) && s.checkContentType(w, r)
}

// allow reports whether r uses one of methods, answering 405 when not.
func (s *Server) allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	s.writeError(w, &apiError{
		status:  http.StatusMethodNotAllowed,
		kind:    kindRouting,
		message: "Method Not Allowed",
	})
	return false
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body) // a client that hung up needs no answer
}

// serveVersion answers as vLLM's GET /version does, {"version":"..."},
// with the build of infermatrix serving, so that a client that records the
// server's version records which simulator it measured.
func (s *Server) serveVersion(w http.ResponseWriter) {
	body, err := json.Marshal(struct {
		Version string `json:"version"`
	}{buildinfo.Get().Version})
	if err != nil {
		s.writeError(w, internalError(err))
		return
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) serveModels(w http.ResponseWriter) {
	type model struct {
		ID          string `json:"id"`
		Object      string `json:"object"`
		Created     int64  `json:"created"`
		OwnedBy     string `json:"owned_by"`
		Root        string `json:"root"`
		MaxModelLen int    `json:"max_model_len"`
	}
	body, err := json.Marshal(struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{"list", []model{{s.cfg.Model, "model", s.created, "infermatrix", s.cfg.Model, s.cfg.MaxModelLen}}})
	if err != nil {
		s.writeError(w, internalError(err))
		return
	}
	writeJSON(w, http.StatusOK, body)
}
