package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"

	"github.com/infermatrix/infermatrix/tokenizer"
)

// endpoint tells the two generation endpoints apart where their protocol
// differs: the request's prompt field and the shape of the response.
type endpoint int

const (
	chatEndpoint endpoint = iota
	completionEndpoint
)

// completionRequest holds the fields of a chat or completion request that
// the simulator acts on. Unknown fields, such as temperature, are ignored, as
// real servers accept them.
type completionRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Prompt              json.RawMessage `json:"prompt"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Seed *int64 `json:"seed"`
	N    *int   `json:"n"`
	// IgnoreEOS and MinTokens are vLLM's sampling parameters: with
	// Config.EOSMeanTokens set, a request stops at a seeded natural
	// length unless it ignores EOS, and never before min_tokens.
	IgnoreEOS bool `json:"ignore_eos"`
	MinTokens int  `json:"min_tokens"`
}

type chatMessage struct {
	Role    string         `json:"role"`
	Content messageContent `json:"content"`
}

// messageContent is a message's text: OpenAI allows a string or an array of
// typed parts, of which the simulator serves only text.
type messageContent struct {
	parts []string
}

func (c *messageContent) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case bytes.Equal(data, []byte("null")):
		// An assistant message with tool calls has null content.
		c.parts = nil
		return nil
	case len(data) > 0 && data[0] == '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		c.parts = []string{s}
		return nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(data, &parts); err != nil {
		return errors.New("content must be a string or an array of content parts")
	}
	c.parts = make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type != "text" || p.Text == nil {
			// Counting only the text of a multimodal prompt would
			// report prompt tokens the client did not mean.
			return fmt.Errorf("content part of type %q is not supported: the simulated model is text-only", p.Type)
		}
		c.parts = append(c.parts, *p.Text)
	}
	return nil
}

// apiError is an error response in vLLM's shape, with its HTTP status.
type apiError struct {
	status  int
	kind    string // "BadRequestError", "NotFoundError", ...
	message string
}

func (e *apiError) Error() string { return e.message }

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, kind: "BadRequestError", message: fmt.Sprintf(format, args...)}
}

// maxBodyBytes bounds a request body. Prompts near a long context limit run
// to a few megabytes of text; anything far beyond is not a benchmark.
const maxBodyBytes = 64 << 20

// parsedRequest is a validated request: what the generation path needs.
type parsedRequest struct {
	promptTokens int
	promptIDs    []int // the prompt's token ids, for the engine's prefix cache
	// maxTokens is the number of tokens the request generates: its
	// max_tokens, or fewer when a seeded EOS ends it first.
	maxTokens    int
	finishReason string // "length", or "stop" when EOS came first
	stream       bool
	includeUsage bool
	seed         *int64
	counter      uint64 // arrival number among valid requests, for unseeded draws
}

// parseRequest reads and validates a generation request, counting its prompt
// tokens with tok.
func (s *Server) parseRequest(w http.ResponseWriter, r *http.Request, ep endpoint) (parsedRequest, *apiError) {
	body := http.MaxBytesReader(w, r.Body, maxBodyBytes)
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(body); err != nil {
		return parsedRequest{}, badRequest("could not read request body: %v", err)
	}
	var req completionRequest
	if err := json.Unmarshal(buf.Bytes(), &req); err != nil {
		return parsedRequest{}, badRequest("invalid JSON body: %v", err)
	}
	// llama.cpp serves whatever model it loaded and ignores the field.
	if req.Model != "" && req.Model != s.cfg.Model && s.pers != personaLlama {
		return parsedRequest{}, &apiError{
			status:  http.StatusNotFound,
			kind:    "NotFoundError",
			message: fmt.Sprintf("The model `%s` does not exist.", req.Model),
		}
	}

	if req.N != nil && *req.N != 1 {
		// Several choices per request would make usage disagree with
		// what a client counts in the one choice the simulator returns.
		return parsedRequest{}, badRequest("n=%d is not supported: the simulator returns one choice per request", *req.N)
	}
	if req.StreamOptions != nil && !req.Stream {
		return parsedRequest{}, badRequest("Stream options can only be defined when `stream=True`.")
	}

	var ids []int
	switch ep {
	case chatEndpoint:
		if len(req.Messages) == 0 {
			return parsedRequest{}, badRequest("messages: field required and must not be empty")
		}
		for _, m := range req.Messages {
			for _, p := range m.Content.parts {
				ids = append(ids, s.tok.Encode(p)...)
			}
		}
	case completionEndpoint:
		var err error
		if ids, err = encodePrompt(s.tok, req.Prompt); err != nil {
			return parsedRequest{}, badRequest("prompt: %v", err)
		}
	}
	prompt := len(ids)
	if prompt == 0 {
		// vLLM's message; an engine has nothing to sample from.
		return parsedRequest{}, badRequest("The decoder prompt cannot be empty")
	}

	p := parsedRequest{
		promptTokens: prompt,
		promptIDs:    ids,
		stream:       req.Stream,
		includeUsage: req.Stream && req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
		seed:         req.Seed,
	}
	limit := s.cfg.MaxModelLen
	requested := req.MaxCompletionTokens
	if requested == nil {
		requested = req.MaxTokens
	}
	if requested == nil {
		// vLLM's message for a prompt that leaves no room at all.
		if prompt >= limit {
			return parsedRequest{}, badRequest("This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", limit, prompt)
		}
		p.maxTokens = min(s.cfg.DefaultMaxTokens, limit-prompt)
	} else {
		p.maxTokens = *requested
		if p.maxTokens < 1 {
			return parsedRequest{}, badRequest("max_tokens must be at least 1, got %d.", p.maxTokens)
		}
		if prompt+p.maxTokens > limit {
			return parsedRequest{}, badRequest("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.", limit, prompt+p.maxTokens, prompt, p.maxTokens)
		}
	}
	if req.MinTokens < 0 {
		return parsedRequest{}, badRequest("min_tokens must be greater than or equal to 0, got %d.", req.MinTokens)
	}
	if req.MinTokens > p.maxTokens {
		return parsedRequest{}, badRequest("min_tokens must be less than or equal to max_tokens=%d, got %d.", p.maxTokens, req.MinTokens)
	}
	// Only valid requests are numbered, so that a run's unseeded draws do
	// not depend on how many malformed requests it sent.
	p.counter = s.requests.Add(1)
	p.finishReason = "length"
	if s.cfg.EOSMeanTokens > 0 && !req.IgnoreEOS {
		natural := naturalLength(s.cfg.Seed, req.Seed, p.counter, s.cfg.EOSMeanTokens)
		if out := max(req.MinTokens, natural); out < p.maxTokens {
			p.maxTokens = out
			p.finishReason = "stop"
		}
	}
	return p, nil
}

// eosStream separates a request's EOS draw from its text and fault draws.
const eosStream = 0xbb67ae8584caa73b

// naturalLength draws the output length at which a request would sample its
// end-of-sequence token: geometric on 1, 2, ... with the given mean, as if
// EOS had the same probability 1/mean at every step. The draw is keyed like
// the request's text (Config.Seed, and the request's seed or else its
// arrival number), so that the same request with the same seed stops at the
// same length on every run.
func naturalLength(cfgSeed int64, reqSeed *int64, counter uint64, mean int) int {
	if mean <= 1 {
		return 1
	}
	seq := counter ^ unseededStream
	if reqSeed != nil {
		seq = uint64(*reqSeed)
	}
	u := unitFloat(rand.NewPCG(uint64(cfgSeed)^eosStream, seq))
	// Inverse CDF: P(L <= k) = 1 - (1-p)^k, so L = ceil(ln(1-u)/ln(1-p)).
	p := 1 / float64(mean)
	k := math.Ceil(math.Log1p(-u) / math.Log1p(-p))
	if k < 1 || math.IsNaN(k) {
		return 1
	}
	if k > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(k)
}

// encodePrompt returns the token ids of a completion prompt: a string, an
// array of strings, or token ids (an array of ints, or an array of such
// arrays). An array is served as one prompt whose parts are encoded
// separately and concatenated, since the simulator returns a single choice.
func encodePrompt(tok tokenizer.Tokenizer, raw json.RawMessage) ([]int, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, errors.New("field required")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return tok.Encode(s), nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, errors.New("must be a string, an array of strings, or an array of token ids")
	}
	if len(items) == 0 {
		return nil, errors.New("must not be empty")
	}
	var ids []int
	for _, item := range items {
		var (
			text string
			id   int
			more []int
		)
		switch {
		case json.Unmarshal(item, &text) == nil:
			ids = append(ids, tok.Encode(text)...)
		case json.Unmarshal(item, &id) == nil:
			ids = append(ids, id)
		case json.Unmarshal(item, &more) == nil:
			ids = append(ids, more...)
		default:
			return nil, errors.New("array items must be strings, token ids, or arrays of token ids")
		}
	}
	return ids, nil
}
