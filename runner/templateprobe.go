package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infermatrix/infermatrix/protocol"
)

// templateProbe learns from a server's POST /tokenize (vLLM's, and the
// built-in server's behind a URL) how many tokens its chat template adds
// around a chat request's messages, so that the token check can allow them
// as it allows the in-process built-in server's (template.go). For each
// shape of request (the messages' roles and the template's switches) it
// asks once: the messages' count, less each content's count as a bare
// prompt without special tokens, is what the template added, which holds
// for every request of that shape up to a token where a content's edge
// merges with the template's text. A server without a vLLM-shaped
// /tokenize (404, another answer) is asked no more, and its template stays
// unknown, flagged as before.
type templateProbe struct {
	hc      *http.Client
	headers map[string]string
	apiKey  string
	root    string // the base URL without /v1, where vLLM serves /tokenize
	model   string

	mu     sync.Mutex
	shapes map[string]int // shape → template tokens; -1 unknown
	// dead is set, under mu, once the server has no /tokenize; read
	// without it, so that every later request skips decoding its body.
	dead atomic.Bool
}

// newTemplateProbe probes the server at baseURL with the row's client's
// transport and headers; nil when the base URL does not end in /v1, where
// the server's root, and so /tokenize, cannot be told.
func newTemplateProbe(cl *protocol.Client, baseURL, model string) *templateProbe {
	root, ok := strings.CutSuffix(strings.TrimRight(baseURL, "/"), "/v1")
	if !ok || cl == nil || cl.HTTP == nil {
		return nil
	}
	return &templateProbe{hc: cl.HTTP, headers: cl.Headers, apiKey: cl.APIKey, root: root, model: model, shapes: map[string]int{}}
}

// probeTimeout bounds each /tokenize call: a server that does not answer
// promptly is not asked again, so the row's requests are not held up.
const probeTimeout = 3 * time.Second

// count returns the template tokens of a chat request body, or 0 when they
// are unknown.
func (p *templateProbe) count(body []byte) int {
	if p.dead.Load() {
		return 0
	}
	var req struct {
		Messages            []json.RawMessage `json:"messages"`
		AddGenerationPrompt json.RawMessage   `json:"add_generation_prompt,omitempty"`
		AddSpecialTokens    json.RawMessage   `json:"add_special_tokens,omitempty"`
		ChatTemplateKwargs  json.RawMessage   `json:"chat_template_kwargs,omitempty"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.Messages) == 0 {
		return 0
	}
	var contents []string
	var key strings.Builder
	key.Write(req.AddGenerationPrompt)
	key.WriteByte('|')
	key.Write(req.AddSpecialTokens)
	key.WriteByte('|')
	key.Write(req.ChatTemplateKwargs)
	for _, raw := range req.Messages {
		var m struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		}
		if json.Unmarshal(raw, &m) != nil {
			return 0
		}
		s, ok := m.Content.(string)
		if !ok {
			// Content parts: the server joins them; the client
			// counts them apart. Not probed.
			return 0
		}
		contents = append(contents, s)
		key.WriteString("|" + m.Role)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if n, ok := p.shapes[key.String()]; ok {
		return max(n, 0)
	}
	if p.dead.Load() {
		return 0
	}
	n := p.ask(req.Messages, req.AddGenerationPrompt, req.AddSpecialTokens, req.ChatTemplateKwargs, contents)
	p.shapes[key.String()] = n
	return max(n, 0)
}

// ask counts the messages and each content on the server; -1 when it
// cannot (and then the server is asked no more).
func (p *templateProbe) ask(msgs []json.RawMessage, gen, special, kwargs json.RawMessage, contents []string) int {
	whole := map[string]any{"model": p.model, "messages": msgs}
	for k, v := range map[string]json.RawMessage{"add_generation_prompt": gen, "add_special_tokens": special, "chat_template_kwargs": kwargs} {
		if len(v) > 0 {
			whole[k] = v
		}
	}
	total, ok := p.tokenize(whole)
	if !ok {
		p.dead.Store(true)
		return -1
	}
	for _, c := range contents {
		n, ok := p.tokenize(map[string]any{"model": p.model, "prompt": c, "add_special_tokens": false})
		if !ok {
			p.dead.Store(true)
			return -1
		}
		total -= n
	}
	return total
}

// tokenize posts one /tokenize request and returns vLLM's count.
func (p *templateProbe) tokenize(v any) (int, bool) {
	body, err := json.Marshal(v)
	if err != nil {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.root+"/tokenize", bytes.NewReader(body))
	if err != nil {
		return 0, false
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range p.headers {
		req.Header.Set(k, v)
	}
	if p.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+p.apiKey)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, false
	}
	// vLLM's TokenizeResponse; anything else is not vLLM's /tokenize.
	var out struct {
		Count       *int  `json:"count"`
		MaxModelLen *int  `json:"max_model_len"`
		Tokens      []int `json:"tokens"`
	}
	if json.Unmarshal(b, &out) != nil || out.Count == nil || out.MaxModelLen == nil || len(out.Tokens) != *out.Count {
		return 0, false
	}
	return *out.Count, true
}
