package sim

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPing checks vLLM's /ping, which load balancers (SageMaker's among
// them) poll: 200 with an empty body on GET and POST.
func TestPing(t *testing.T) {
	inst := startSim(t, fastConfig())
	base := strings.TrimSuffix(inst.BaseURL, "/v1")
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		req, _ := http.NewRequest(method, base+"/ping", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(b) != 0 {
			t.Errorf("%s /ping: %s %q, want 200 and no body", method, resp.Status, b)
		}
	}
}

// TestTokenizeAgreesWithUsage checks that /tokenize counts a prompt as
// generation does, so that a client sizing prompts with it gets the
// prompt_tokens it planned, and that token_strs comes only when asked.
func TestTokenizeAgreesWithUsage(t *testing.T) {
	inst := startSim(t, fastConfig())
	base := strings.TrimSuffix(inst.BaseURL, "/v1")
	msgs := []map[string]string{{"role": "system", "content": "Be brief."}, {"role": "user", "content": "How many tokens is this?"}}
	var tk tokenizeResponse
	if err := json.NewDecoder(post(t, base+"/tokenize", map[string]any{"messages": msgs, "return_token_strs": true}).Body).Decode(&tk); err != nil {
		t.Fatal(err)
	}
	var chat chatResponse
	if err := json.NewDecoder(post(t, inst.BaseURL+"/chat/completions", map[string]any{"messages": msgs, "max_tokens": 1}).Body).Decode(&chat); err != nil {
		t.Fatal(err)
	}
	if tk.Count != chat.Usage.PromptTokens || len(tk.Tokens) != tk.Count || len(tk.TokenStrs) != tk.Count || tk.MaxModelLen != inst.Server.Config().MaxModelLen {
		t.Errorf("tokenize %+v, chat prompt_tokens %d", tk, chat.Usage.PromptTokens)
	}
	if strings.Join(tk.TokenStrs, "") != "Be brief.How many tokens is this?" {
		t.Errorf("token_strs %q", tk.TokenStrs)
	}
	resp := post(t, base+"/tokenize", map[string]any{"model": "other", "prompt": "hi"})
	checkError(t, resp, 404, "NotFoundError", "The model `other` does not exist.")
}

// TestPersonalityContextRules checks the context rules each personality
// follows: llama-server refuses a prompt over its context with its own
// error and generates a too-long output only until the context is full;
// vLLM refuses both; TGI answers 422 and ignores the model field.
func TestPersonalityContextRules(t *testing.T) {
	cfg := Config{MaxModelLen: 20, TTFT: time.Millisecond, ITL: 100 * time.Microsecond}
	chat := `{"model":"any","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`

	cfg.Personality = PersonalityLlamaCpp
	llama := startSim(t, cfg)
	var body llamaChatResponse
	resp := request(t, llama.BaseURL+"/chat/completions", chat, "")
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 {
		t.Fatalf("llama.cpp: %s, %v", resp.Status, err)
	}
	if body.Usage.TotalTokens != 20 || body.Choices[0].FinishReason != "length" {
		t.Errorf("llama.cpp usage %+v finish %q: want generation until the 20-token context is full", body.Usage, body.Choices[0].FinishReason)
	}
	// llama-server reads any body, whatever its Content-Type.
	req, _ := http.NewRequest(http.MethodPost, llama.BaseURL+"/completions", strings.NewReader(`{"prompt":"hi","max_tokens":1}`))
	req.Header.Set("Idempotency-Key", "plain")
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != 200 {
		t.Errorf("llama.cpp without Content-Type: %v %v", r, err)
	} else {
		r.Body.Close()
	}

	cfg.Personality = PersonalityTGI
	tgi := startSim(t, cfg)
	resp = request(t, tgi.BaseURL+"/chat/completions", chat, "")
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(b), `"error_type":"validation"`) {
		t.Errorf("tgi: %s %s, want 422 with error_type validation", resp.Status, b)
	}
	resp = request(t, tgi.BaseURL+"/chat/completions", `{"model":"tgi","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, "")
	if resp.StatusCode != 200 {
		t.Errorf(`tgi with "model":"tgi": %s, want 200: TGI ignores the field`, resp.Status)
	}
}
