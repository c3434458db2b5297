package sim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// serveGeneration serves one chat or completion request: it validates the
// request, admits it to the timing model, and writes the tokens as they
// come due, as a stream or as one body at the end.
func (s *Server) serveGeneration(w http.ResponseWriter, r *http.Request, ep endpoint) {
	// The clock starts before parsing, as it would on a real server: the
	// client measures time to first token from when it sent the request.
	arrival := time.Now()
	req, apiErr := s.parseRequest(w, r, ep)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	s.metrics.running.Add(1)
	defer s.metrics.running.Add(-1)
	g := generation{
		ep:      ep,
		req:     req,
		clock:   s.timing.admit(admission{arrival: arrival, prompt: req.promptIDs, output: req.maxTokens}),
		text:    newTextSource(s.pool, s.cfg.Seed, req.seed, s.requests.Add(1)),
		id:      newResponseID(ep),
		created: arrival.Unix(),
	}
	defer g.clock.release()
	if req.stream {
		s.stream(w, r, g)
	} else {
		s.respond(w, r, g)
	}
}

// generation is an admitted request on its way out.
type generation struct {
	ep      endpoint
	req     parsedRequest
	clock   tokenClock  // when each token is due
	text    *textSource // what each token says
	id      string
	created int64 // arrival, in Unix seconds
}

// newResponseID returns an id shaped like vLLM's: a prefix and 32 hex digits.
func newResponseID(ep endpoint) string {
	prefix := "chatcmpl-"
	if ep == completionEndpoint {
		prefix = "cmpl-"
	}
	return fmt.Sprintf("%s%016x%016x", prefix, rand.Uint64(), rand.Uint64())
}

// frames holds the bytes of every server-sent event of one stream except the
// token text, built once per request so that sending a token is three
// appends, a write and a flush, with no JSON encoding on the hot path.
type frames struct {
	role      []byte // chat only: the chunk that opens the assistant message
	tokenPre  []byte // a token chunk up to the token's text
	tokenPost []byte // a token chunk after the token's text
	finish    []byte // the chunk that carries finish_reason
	usagePre  []byte // the usage chunk up to the usage object
}

const doneEvent = "data: [DONE]\n\n"

func (s *Server) buildFrames(ep endpoint, id string, created int64, includeUsage bool) frames {
	object := "chat.completion.chunk"
	if ep == completionEndpoint {
		object = "text_completion"
	}
	head := make([]byte, 0, 160)
	head = append(head, `data: {"id":"`...)
	head = append(head, id...)
	head = append(head, `","object":"`...)
	head = append(head, object...)
	head = append(head, `","created":`...)
	head = strconv.AppendInt(head, created, 10)
	head = append(head, `,"model":`...)
	head = append(head, s.modelJSON...)
	head = append(head, `,"choices":`...)

	// With include_usage, OpenAI sends "usage":null on every chunk
	// before the last, and clients rely on the field being present.
	tail := "}\n\n"
	if includeUsage {
		tail = `,"usage":null}` + "\n\n"
	}
	cat := func(parts ...string) []byte {
		b := append([]byte(nil), head...)
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}

	var f frames
	if ep == chatEndpoint {
		f.role = cat(`[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]`, tail)
		f.tokenPre = cat(`[{"index":0,"delta":{"content":"`)
		f.tokenPost = []byte(`"},"logprobs":null,"finish_reason":null}]` + tail)
		f.finish = cat(`[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}]`, tail)
	} else {
		f.tokenPre = cat(`[{"index":0,"text":"`)
		f.tokenPost = []byte(`","logprobs":null,"finish_reason":null}]` + tail)
		f.finish = cat(`[{"index":0,"text":"","logprobs":null,"finish_reason":"length"}]`, tail)
	}
	f.usagePre = cat(`[],"usage":`)
	return f
}

// stream writes a request's tokens as server-sent events, each flushed when
// its token comes due. The role chunk goes out with the first token, as on
// vLLM, so that a client's time to first byte of the body is its time to
// first token. The finish, usage and [DONE] events follow the last token at
// once, so they share its write.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, g generation) {
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	// Headers go out on arrival, before the first token, as a real server
	// accepts the stream before it finishes prefill.
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flush()

	req := g.req
	f := s.buildFrames(g.ep, g.id, g.created, req.includeUsage)
	ctx := r.Context()
	n := req.maxTokens
	buf := make([]byte, 0, 1024)
	for k := 0; k < n; k++ {
		if _, err := g.clock.wait(ctx, k); err != nil {
			return // the client went away or the server is closing
		}
		buf = buf[:0]
		if k == 0 {
			s.metrics.promptTokens.Add(uint64(req.promptTokens))
			buf = append(buf, f.role...)
		}
		buf = append(buf, f.tokenPre...)
		buf = append(buf, g.text.next()...)
		buf = append(buf, f.tokenPost...)
		if k == n-1 {
			buf = append(buf, f.finish...)
			if req.includeUsage {
				buf = append(buf, f.usagePre...)
				buf = appendUsage(buf, req.promptTokens, n)
				buf = append(buf, "}\n\n"...)
			}
			buf = append(buf, doneEvent...)
		}
		if _, err := w.Write(buf); err != nil {
			return
		}
		flush()
		s.metrics.generationTokens.Add(1)
	}
	s.metrics.success.Add(1)
}

// appendUsage appends a usage object in vLLM's field order.
func appendUsage(b []byte, prompt, completion int) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	return append(b, '}')
}

// usage is the usage object of a non-streaming response.
type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	TotalTokens      int `json:"total_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

type chatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   usage        `json:"usage"`
}

type chatChoice struct {
	Index   int `json:"index"`
	Message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"message"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
}

type textResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []textChoice `json:"choices"`
	Usage   usage        `json:"usage"`
}

type textChoice struct {
	Index        int       `json:"index"`
	Text         string    `json:"text"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
}

// respond waits until the last token is due and writes the whole response
// as one JSON body, as a non-streaming server does when generation ends.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, g generation) {
	// Waiting for the first token before the last keeps the prompt-token
	// counter in step with prefill, as for streams.
	ctx, req, n := r.Context(), g.req, g.req.maxTokens
	if _, err := g.clock.wait(ctx, 0); err != nil {
		return
	}
	s.metrics.promptTokens.Add(uint64(req.promptTokens))
	if _, err := g.clock.wait(ctx, n-1); err != nil {
		return
	}
	var sb strings.Builder
	sb.Grow(n * 8)
	for range n {
		sb.WriteString(g.text.next())
	}
	u := usage{PromptTokens: req.promptTokens, TotalTokens: req.promptTokens + n, CompletionTokens: n}

	var v any
	if g.ep == chatEndpoint {
		c := chatChoice{FinishReason: "length"}
		c.Message.Role = "assistant"
		c.Message.Content = sb.String()
		v = chatResponse{g.id, "chat.completion", g.created, s.cfg.Model, []chatChoice{c}, u}
	} else {
		c := textChoice{Text: sb.String(), FinishReason: "length"}
		v = textResponse{g.id, "text_completion", g.created, s.cfg.Model, []textChoice{c}, u}
	}
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, &apiError{status: http.StatusInternalServerError, kind: "InternalServerError", message: err.Error()})
		return
	}
	s.metrics.generationTokens.Add(uint64(n))
	writeJSON(w, http.StatusOK, body)
	s.metrics.success.Add(1)
}
