package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// The personalities Config.Personality names. Each mimics the wire format of
// one server closely enough that a client's parser meets that server's
// quirks, while every one stays OpenAI-compatible.
const (
	PersonalityVLLM     = "vllm"
	PersonalityLlamaCpp = "llama.cpp"
	PersonalityTGI      = "tgi"
)

// personality is Config.Personality resolved once, so that the hot path
// switches on an int.
type personality int

const (
	personaVLLM personality = iota
	personaLlama
	personaTGI
)

func parsePersonality(name string) (personality, error) {
	switch name {
	case PersonalityVLLM:
		return personaVLLM, nil
	case PersonalityLlamaCpp:
		return personaLlama, nil
	case PersonalityTGI:
		return personaTGI, nil
	}
	return 0, fmt.Errorf("personality %q: unknown (valid: %s, %s, %s)", name, PersonalityVLLM, PersonalityLlamaCpp, PersonalityTGI)
}

// System fingerprints shaped like each server's build string.
const (
	llamaFingerprint = "b6000-infermatrix"
	tgiFingerprint   = "3.3.0-infermatrix"
)

// frames holds the bytes of every server-sent event of one stream except the
// token text and what is only known at the end (usage and llama.cpp's
// timings), built once per request so that sending an event is a few
// appends, a write and a flush, with no JSON encoding on the hot path.
type frames struct {
	role      []byte // sent with the first token event; nil when the personality has none
	tokenPre  []byte // a token event up to its text
	tokenPost []byte // a token event after its text
	// lastPost closes the final token event when the personality puts
	// finish_reason on it (vllm, tgi); nil when a separate finish event
	// follows (llama.cpp).
	lastPost []byte
	// finish is llama.cpp's finish event up to where usage and timings
	// go, without the closing "}\n\n".
	finish   []byte
	usagePre []byte // the usage event up to its usage object; nil when there is none
}

const doneEvent = "data: [DONE]\n\n"

// buildFrames builds the frames of g's stream in the server's personality.
func (s *Server) buildFrames(g *generation) frames {
	switch s.pers {
	case personaLlama:
		return s.llamaFrames(g)
	case personaTGI:
		return s.tgiFrames(g)
	}
	return s.vllmFrames(g)
}

func (s *Server) vllmFrames(g *generation) frames {
	object := "chat.completion.chunk"
	if g.ep == completionEndpoint {
		object = "text_completion"
	}
	head := make([]byte, 0, 160)
	head = append(head, `data: {"id":"`...)
	head = append(head, g.id...)
	head = append(head, `","object":"`...)
	head = append(head, object...)
	head = append(head, `","created":`...)
	head = strconv.AppendInt(head, g.created, 10)
	head = append(head, `,"model":`...)
	head = append(head, s.modelJSON...)
	head = append(head, `,"choices":`...)

	// With include_usage, OpenAI sends "usage":null on every chunk
	// before the last, and clients rely on the field being present.
	tail := "}\n\n"
	if g.req.includeUsage {
		tail = `,"usage":null}` + "\n\n"
	}
	// finish_reason rides on the last token's chunk, with stop_reason
	// (null: no stop string or token ended it), as vLLM's serving code
	// sets both on the output that finishes; there is no separate empty
	// finish chunk. Completion chunks carry stop_reason on every chunk.
	reason := g.req.finishReason
	var f frames
	if g.ep == chatEndpoint {
		f.role = concat(head, `[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]`, tail)
		f.tokenPre = concat(head, `[{"index":0,"delta":{"content":"`)
		f.tokenPost = []byte(`"},"logprobs":null,"finish_reason":null}]` + tail)
		f.lastPost = []byte(`"},"logprobs":null,"finish_reason":"` + reason + `","stop_reason":null}]` + tail)
	} else {
		f.tokenPre = concat(head, `[{"index":0,"text":"`)
		f.tokenPost = []byte(`","logprobs":null,"finish_reason":null,"stop_reason":null}]` + tail)
		f.lastPost = []byte(`","logprobs":null,"finish_reason":"` + reason + `","stop_reason":null}]` + tail)
	}
	if g.req.includeUsage {
		f.usagePre = concat(head, `[],"usage":`)
	}
	return f
}

// llamaFrames follows llama-server's chunks (docs: server-streams.md): the
// choices come first, keys in its order, a role chunk with "content":null
// and no logprobs, a separate finish chunk, and for completions no role
// chunk and an id that starts with chatcmpl- all the same.
func (s *Server) llamaFrames(g *generation) frames {
	fp := `"system_fingerprint":"` + llamaFingerprint + `"`
	var envelope []byte
	if g.ep == chatEndpoint {
		envelope = fmt.Appendf(nil, `"created":%d,"id":"%s","model":%s,%s,"object":"chat.completion.chunk"`, g.created, g.id, s.modelJSON, fp)
	} else {
		envelope = fmt.Appendf(nil, `"created":%d,"model":%s,%s,"object":"text_completion","id":"%s"`, g.created, s.modelJSON, fp, g.id)
	}
	reason := g.req.finishReason
	var f frames
	if g.ep == chatEndpoint {
		f.role = concat([]byte(`data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],`), string(envelope), "}\n\n")
		f.tokenPre = []byte(`data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"`)
		f.tokenPost = concat([]byte(`"}}],`), string(envelope), "}\n\n")
		f.finish = concat([]byte(`data: {"choices":[{"finish_reason":"`+reason+`","index":0,"delta":{}}],`), string(envelope))
		f.usagePre = concat([]byte(`data: {"choices":[],`), string(envelope), `,"usage":`)
	} else {
		f.tokenPre = []byte(`data: {"choices":[{"text":"`)
		f.tokenPost = concat([]byte(`","index":0,"logprobs":null,"finish_reason":null}],`), string(envelope), "}\n\n")
		f.finish = concat([]byte(`data: {"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"`+reason+`"}],`), string(envelope))
	}
	return f
}

// tgiFrames follows text-generation-inference's OpenAI chunks: the envelope
// first, every delta carrying the role, finish_reason on the last token
// event rather than a separate one, and "usage":null on chat chunks.
func (s *Server) tgiFrames(g *generation) frames {
	object := "chat.completion.chunk"
	if g.ep == completionEndpoint {
		object = "text_completion"
	}
	head := fmt.Appendf(nil, `data: {"object":"%s","id":"%s","created":%d,"model":%s,"system_fingerprint":"%s","choices":`, object, g.id, g.created, s.modelJSON, tgiFingerprint)
	reason := g.req.finishReason
	var f frames
	if g.ep == chatEndpoint {
		f.tokenPre = concat(head, `[{"index":0,"delta":{"role":"assistant","content":"`)
		f.tokenPost = []byte(`"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
		f.lastPost = []byte(`"},"logprobs":null,"finish_reason":"` + reason + `"}],"usage":null}` + "\n\n")
	} else {
		f.tokenPre = concat(head, `[{"index":0,"text":"`)
		f.tokenPost = []byte(`","logprobs":null,"finish_reason":null}]}` + "\n\n")
		f.lastPost = []byte(`","logprobs":null,"finish_reason":"` + reason + `"}]}` + "\n\n")
	}
	if g.req.includeUsage {
		f.usagePre = concat(head, `[],"usage":`)
	}
	return f
}

func concat(head []byte, parts ...string) []byte {
	n := len(head)
	for _, p := range parts {
		n += len(p)
	}
	b := make([]byte, 0, n)
	b = append(b, head...)
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// appendEnd appends what follows a stream's last token event: the finish
// event where it is separate, usage for n output tokens, llama.cpp's
// timings, and [DONE]. It runs once per request, so it may format numbers.
// It runs after the last token was due, when the request's prefix-cache hit
// count is final.
func (s *Server) appendEnd(b []byte, g *generation, f *frames, n int, lastAt time.Time) []byte {
	req := g.req
	switch s.pers {
	case personaVLLM:
		if req.includeUsage {
			b = append(b, f.usagePre...)
			b = appendUsage(b, req.promptTokens, n, g.clock.cached())
			b = append(b, "}\n\n"...)
		}
	case personaTGI:
		if req.includeUsage {
			b = append(b, f.usagePre...)
			b = appendTGIUsage(b, req.promptTokens, n)
			b = append(b, "}\n\n"...)
		}
	case personaLlama:
		cached := g.clock.cached()
		timings := g.timings(n, cached, lastAt)
		b = append(b, f.finish...)
		switch {
		case g.ep == completionEndpoint:
			// Completions always end with usage and timings on the
			// finish chunk, and never send a usage chunk.
			b = append(b, `,"usage":`...)
			b = appendLlamaUsage(b, req.promptTokens, n, cached)
			b = append(b, `,"timings":`...)
			b = append(b, timings...)
			b = append(b, "}\n\n"...)
		case req.includeUsage:
			b = append(b, "}\n\n"...)
			b = append(b, f.usagePre...)
			b = appendLlamaUsage(b, req.promptTokens, n, cached)
			b = append(b, `,"timings":`...)
			b = append(b, timings...)
			b = append(b, "}\n\n"...)
		default:
			b = append(b, `,"timings":`...)
			b = append(b, timings...)
			b = append(b, "}\n\n"...)
		}
	}
	return append(b, doneEvent...)
}

// appendUsage appends a usage object in vLLM's field order, with the
// prompt tokens found in the prefix cache as vLLM reports them when started
// with --enable-prompt-tokens-details.
func appendUsage(b []byte, prompt, completion, cached int) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	return appendPromptDetails(b, cached)
}

// appendPromptDetails closes a usage object with its
// "prompt_tokens_details", vLLM's and llama.cpp's last field.
func appendPromptDetails(b []byte, cached int) []byte {
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(cached), 10)
	return append(b, "}}"...)
}

// appendTGIUsage appends a usage object in TGI's field order.
func appendTGIUsage(b []byte, prompt, completion int) []byte {
	u, _ := json.Marshal(tgiUsage{prompt, completion, prompt + completion})
	return append(b, u...)
}

// appendLlamaUsage appends a usage object in llama.cpp's field order, with
// the prompt tokens it reused from its cache, as recent llama-server builds
// report them.
func appendLlamaUsage(b []byte, prompt, completion, cached int) []byte {
	b = append(b, `{"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	b = append(b, `,"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	return appendPromptDetails(b, cached)
}

// setStreamHeaders sets the headers of a stream in the server's personality.
func (s *Server) setStreamHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	switch s.pers {
	case personaLlama:
		// What llama-server sends, Keep-Alive included: it promises a
		// kept-alive connection and then closes it after the stream.
		h["Access-Control-Allow-Origin"] = []string{""}
		h.Set("X-Accel-Buffering", "no")
		h.Set("Keep-Alive", "timeout=5, max=100")
	case personaTGI:
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
	default:
		h.Set("Cache-Control", "no-cache")
	}
}

// setServerHeaders sets the headers every response of the personality
// carries.
func (s *Server) setServerHeaders(h http.Header) {
	if s.pers == personaLlama {
		h.Set("Server", "llama.cpp")
	}
}

// jsonFloat is a float64 that marshals a non-finite value as null, as
// llama-server's JSON library does for a rate over a zero duration.
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, v, 'f', -1, 64), nil
}

// llamaTimings is llama-server's per-request "timings" object: its own
// prefill and decode times. The simulator fills it from the request's
// actual times: prompt from arrival to the first token, predicted from the
// first token to the last. As on llama-server, cache_n counts the prompt
// tokens reused from the cache and prompt_n those computed, so that the two
// add up to usage.prompt_tokens.
type llamaTimings struct {
	CacheN              int       `json:"cache_n"`
	PromptN             int       `json:"prompt_n"`
	PromptMS            jsonFloat `json:"prompt_ms"`
	PromptPerTokenMS    jsonFloat `json:"prompt_per_token_ms"`
	PromptPerSecond     jsonFloat `json:"prompt_per_second"`
	PredictedN          int       `json:"predicted_n"`
	PredictedMS         jsonFloat `json:"predicted_ms"`
	PredictedPerTokenMS jsonFloat `json:"predicted_per_token_ms"`
	PredictedPerSecond  jsonFloat `json:"predicted_per_second"`
}

// timings returns g's llama.cpp timings as JSON for n output tokens, cached
// of its prompt tokens found in the prefix cache, with lastAt the time its
// last token was produced.
func (g *generation) timings(n, cached int, lastAt time.Time) []byte {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	promptMS := ms(g.firstAt.Sub(g.arrival))
	predictedMS := ms(lastAt.Sub(g.firstAt))
	computed := g.req.promptTokens - cached
	p, out := float64(computed), float64(n)
	t := llamaTimings{
		CacheN:              cached,
		PromptN:             computed,
		PromptMS:            jsonFloat(promptMS),
		PromptPerTokenMS:    jsonFloat(promptMS / p),
		PromptPerSecond:     jsonFloat(1e3 / promptMS * p),
		PredictedN:          n,
		PredictedMS:         jsonFloat(predictedMS),
		PredictedPerTokenMS: jsonFloat(predictedMS / out),
		PredictedPerSecond:  jsonFloat(1e3 / predictedMS * out),
	}
	b, err := json.Marshal(t)
	if err != nil {
		return []byte("null")
	}
	return b
}

// usage is vLLM's usage object, in its field order.
type usage struct {
	PromptTokens        int                 `json:"prompt_tokens"`
	TotalTokens         int                 `json:"total_tokens"`
	CompletionTokens    int                 `json:"completion_tokens"`
	PromptTokensDetails promptTokensDetails `json:"prompt_tokens_details"`
}

// promptTokensDetails is OpenAI's usage.prompt_tokens_details, which vLLM
// and llama.cpp fill with the prompt tokens found in the prefix cache.
type promptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type tgiUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type llamaUsage struct {
	CompletionTokens    int                 `json:"completion_tokens"`
	PromptTokens        int                 `json:"prompt_tokens"`
	TotalTokens         int                 `json:"total_tokens"`
	PromptTokensDetails promptTokensDetails `json:"prompt_tokens_details"`
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// The non-streaming bodies, one struct per personality and endpoint, since
// each server orders its fields its own way.
type (
	chatResponse struct {
		ID      string           `json:"id"`
		Object  string           `json:"object"`
		Created int64            `json:"created"`
		Model   string           `json:"model"`
		Choices []vllmChatChoice `json:"choices"`
		Usage   usage            `json:"usage"`
	}
	// vLLM's choices carry stop_reason: the stop string or token that
	// ended the output, null when none did (always, here).
	vllmChatChoice struct {
		Index        int       `json:"index"`
		Message      message   `json:"message"`
		Logprobs     *struct{} `json:"logprobs"`
		FinishReason string    `json:"finish_reason"`
		StopReason   *string   `json:"stop_reason"`
	}
	vllmTextChoice struct {
		Index        int       `json:"index"`
		Text         string    `json:"text"`
		Logprobs     *struct{} `json:"logprobs"`
		FinishReason string    `json:"finish_reason"`
		StopReason   *string   `json:"stop_reason"`
	}
	chatChoice struct {
		Index        int       `json:"index"`
		Message      message   `json:"message"`
		Logprobs     *struct{} `json:"logprobs"`
		FinishReason string    `json:"finish_reason"`
	}
	textResponse struct {
		ID      string           `json:"id"`
		Object  string           `json:"object"`
		Created int64            `json:"created"`
		Model   string           `json:"model"`
		Choices []vllmTextChoice `json:"choices"`
		Usage   usage            `json:"usage"`
	}
	textChoice struct {
		Index        int       `json:"index"`
		Text         string    `json:"text"`
		Logprobs     *struct{} `json:"logprobs"`
		FinishReason string    `json:"finish_reason"`
	}

	llamaChatResponse struct {
		Choices           []llamaChatChoice `json:"choices"`
		Created           int64             `json:"created"`
		Model             string            `json:"model"`
		SystemFingerprint string            `json:"system_fingerprint"`
		Object            string            `json:"object"`
		Usage             llamaUsage        `json:"usage"`
		ID                string            `json:"id"`
		Timings           json.RawMessage   `json:"timings"`
	}
	llamaChatChoice struct {
		FinishReason string  `json:"finish_reason"`
		Index        int     `json:"index"`
		Message      message `json:"message"`
	}
	llamaTextResponse struct {
		Choices           []llamaTextChoice `json:"choices"`
		Created           int64             `json:"created"`
		Model             string            `json:"model"`
		SystemFingerprint string            `json:"system_fingerprint"`
		Object            string            `json:"object"`
		Usage             llamaUsage        `json:"usage"`
		ID                string            `json:"id"`
		Timings           json.RawMessage   `json:"timings"`
	}
	llamaTextChoice struct {
		Text         string    `json:"text"`
		Index        int       `json:"index"`
		Logprobs     *struct{} `json:"logprobs"`
		FinishReason string    `json:"finish_reason"`
	}

	tgiChatResponse struct {
		Object            string       `json:"object"`
		ID                string       `json:"id"`
		Created           int64        `json:"created"`
		Model             string       `json:"model"`
		SystemFingerprint string       `json:"system_fingerprint"`
		Choices           []chatChoice `json:"choices"`
		Usage             tgiUsage     `json:"usage"`
	}
	tgiTextResponse struct {
		Object            string       `json:"object"`
		ID                string       `json:"id"`
		Created           int64        `json:"created"`
		Model             string       `json:"model"`
		SystemFingerprint string       `json:"system_fingerprint"`
		Choices           []textChoice `json:"choices"`
		Usage             tgiUsage     `json:"usage"`
	}
)

// responseBody returns the non-streaming body of g with the given text, in
// the server's personality. It runs after the last token was due, when the
// request's prefix-cache hit count is final.
func (s *Server) responseBody(g *generation, text string, lastAt time.Time) ([]byte, error) {
	req, model, reason := g.req, s.cfg.Model, g.req.finishReason
	p, n, cached := req.promptTokens, g.sent, g.clock.cached()
	chat := g.ep == chatEndpoint
	var v any
	switch s.pers {
	case personaLlama:
		u := llamaUsage{n, p, p + n, promptTokensDetails{cached}}
		timings := g.timings(n, cached, lastAt)
		if chat {
			v = llamaChatResponse{[]llamaChatChoice{{reason, 0, message{"assistant", text}}}, g.created, model, llamaFingerprint, "chat.completion", u, g.id, timings}
		} else {
			v = llamaTextResponse{[]llamaTextChoice{{text, 0, nil, reason}}, g.created, model, llamaFingerprint, "text_completion", u, g.id, timings}
		}
	case personaTGI:
		u := tgiUsage{p, n, p + n}
		if chat {
			v = tgiChatResponse{"chat.completion", g.id, g.created, model, tgiFingerprint, []chatChoice{{0, message{"assistant", text}, nil, reason}}, u}
		} else {
			v = tgiTextResponse{"text_completion", g.id, g.created, model, tgiFingerprint, []textChoice{{0, text, nil, reason}}, u}
		}
	default:
		u := usage{PromptTokens: p, TotalTokens: p + n, CompletionTokens: n, PromptTokensDetails: promptTokensDetails{cached}}
		if chat {
			v = chatResponse{g.id, "chat.completion", g.created, model, []vllmChatChoice{{0, message{"assistant", text}, nil, reason, nil}}, u}
		} else {
			v = textResponse{g.id, "text_completion", g.created, model, []vllmTextChoice{{0, text, nil, reason, nil}}, u}
		}
	}
	return json.Marshal(v)
}

// responseIDPrefix is the id prefix of the personality and endpoint: vLLM
// tells chat and completions apart; llama.cpp uses chatcmpl- for both.
func (s *Server) responseIDPrefix(ep endpoint) string {
	if ep == completionEndpoint && s.pers != personaLlama {
		return "cmpl-"
	}
	return "chatcmpl-"
}
