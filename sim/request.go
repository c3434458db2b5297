package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
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
	// The chat template's switches, and a completion's
	// add_special_tokens (chattemplate.go).
	templateFields

	// Parameters the simulator cannot honour: its text is random words,
	// drawn without a distribution to report. A request that sets one is
	// refused (checkUnsupported), never served as if it had not.
	Stop           json.RawMessage `json:"stop"`
	Logprobs       json.RawMessage `json:"logprobs"`
	Echo           bool            `json:"echo"`
	Tools          json.RawMessage `json:"tools"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
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
		return parsedRequest{}, invalidBody("could not read request body: %v", err)
	}
	var req completionRequest
	if err := json.Unmarshal(buf.Bytes(), &req); err != nil {
		return parsedRequest{}, jsonError(err)
	}
	if e := s.checkModel(req.Model); e != nil {
		return parsedRequest{}, e
	}
	if e := checkUnsupported(&req, ep); e != nil {
		return parsedRequest{}, e
	}
	if req.StreamOptions != nil && !req.Stream {
		return parsedRequest{}, badRequest("Stream options can only be defined when `stream=True`.")
	}

	var ids []int
	switch ep {
	case chatEndpoint:
		if req.Messages == nil {
			return parsedRequest{}, invalidBody("[{'type': 'missing', 'loc': ('body', 'messages'), 'msg': 'Field required'}]")
		}
		ids = s.chatIDs(req.Messages, req.chatOptions())
	case completionEndpoint:
		var err error
		if ids, err = s.encodePrompt(req.Prompt, req.completionSpecialTokens()); err != nil {
			return parsedRequest{}, invalidBody("prompt: %v", err)
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
		requested = s.defaultMaxTokens(ep, prompt)
	}
	if prompt >= limit {
		// vLLM's message for a prompt that leaves no room at all.
		e := badRequest("This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", limit, prompt)
		e.contextPrompt, e.contextLimit = prompt, limit
		return parsedRequest{}, e
	}
	if requested == nil {
		// Until EOS, or until the context is full.
		p.maxTokens = limit - prompt
	} else {
		p.maxTokens = *requested
		if p.maxTokens < 1 {
			return parsedRequest{}, badRequest("max_tokens must be at least 1, got %d.", p.maxTokens)
		}
		if prompt+p.maxTokens > limit {
			if s.pers == personaLlama {
				// llama-server generates until its context is
				// full and stops there with "length".
				p.maxTokens = limit - prompt
			} else {
				e := badRequest("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.", limit, prompt+p.maxTokens, prompt, p.maxTokens)
				e.contextPrompt, e.contextLimit, e.contextOutput = prompt, limit, p.maxTokens
				return parsedRequest{}, e
			}
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
// With specialTokens (vLLM's add_special_tokens, true by default for a
// completion) each text part gets the model's BOS, as vLLM's tokenizer adds
// it to every prompt of a batch; token ids are taken as they are, as vLLM
// takes them.
func (s *Server) encodePrompt(raw json.RawMessage, specialTokens bool) ([]int, error) {
	tok := s.tok
	var bos []int
	if specialTokens {
		bos = s.bos()
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, errors.New("field required")
	}
	var str string
	if err := json.Unmarshal(raw, &str); err == nil {
		return append(bos, tok.Encode(str)...), nil
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
			ids = append(ids, bos...)
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

// defaultMaxTokens is the output length of a request that sets neither
// max_tokens nor max_completion_tokens: Config.DefaultMaxTokens when set,
// else the server's own default: vLLM's completions default to 16 tokens
// (and so refuse a prompt that leaves less room), while vLLM's chat,
// llama-server and TGI generate until EOS or a full context (nil).
func (s *Server) defaultMaxTokens(ep endpoint, prompt int) *int {
	n := s.cfg.DefaultMaxTokens
	switch {
	case n > 0:
		n = min(n, s.cfg.MaxModelLen-prompt)
	case ep == completionEndpoint && s.pers == personaVLLM:
		n = vllmCompletionMaxTokens
	default:
		return nil
	}
	return &n
}

// vllmCompletionMaxTokens is CompletionRequest.max_tokens' default in vLLM
// (and OpenAI's legacy completions).
const vllmCompletionMaxTokens = 16

// checkUnsupported refuses, in vLLM's shape, a request whose answer the
// simulator cannot honour: several choices, stop strings, log
// probabilities, echo, tool calls, structured output. Serving such a request
// as if the parameter were absent would hand a client an answer it did not
// ask for without saying so. Empty and explicit defaults ("stop": [],
// "logprobs": false, "tool_choice": "none", "response_format": {"type":
// "text"}) are accepted, as clients send them routinely.
func checkUnsupported(req *completionRequest, ep endpoint) *apiError {
	const why = "is not supported by the simulator, whose output is random words"
	if req.N != nil && *req.N != 1 {
		// Several choices would make usage disagree with what a client
		// counts in the one choice the simulator returns.
		return badRequest("n=%d %s: it returns one choice per request", *req.N, why)
	}
	if !isEmptyJSON(req.Stop) {
		return badRequest("stop %s: no stop string can be matched meaningfully", why)
	}
	if !isEmptyJSON(req.Logprobs) && string(bytes.TrimSpace(req.Logprobs)) != "false" {
		return badRequest("logprobs %s: there are no probabilities to report", why)
	}
	if req.Echo {
		return badRequest("echo %s", why)
	}
	if ep == chatEndpoint && !isEmptyJSON(req.Tools) {
		var choice string
		_ = json.Unmarshal(req.ToolChoice, &choice)
		switch {
		case isEmptyJSON(req.ToolChoice) || choice == "auto":
			// What a vLLM started without a tool parser answers,
			// as the published benchmarks' servers were.
			return badRequest(`"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`)
		case choice != "none":
			return badRequest("tool_choice %s %s: it cannot call tools", string(req.ToolChoice), why)
		}
	}
	if rf := req.ResponseFormat; rf != nil && rf.Type != "" && rf.Type != "text" {
		return badRequest("response_format of type %q %s, not structured output", rf.Type, why)
	}
	return nil
}

// isEmptyJSON reports whether raw is absent, null, "", [] or {}.
func isEmptyJSON(raw json.RawMessage) bool {
	switch string(bytes.TrimSpace(raw)) {
	case "", "null", `""`, "[]", "{}":
		return true
	}
	return false
}
