package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/infermatrix/infermatrix/tokenizer"
)

const (
	llamaModel = "meta-llama/Llama-3.1-8B-Instruct"
	qwenModel  = "Qwen/Qwen3-0.6B"
)

// llama3Text is a stand-in for Llama 3's tokenizer on English text: its
// first 100,000 tokens, and so every id of the prompts below, are
// cl100k_base's, which tiktoken-go carries offline. Special-token text is
// ordinary text to it, as to the builtin o200k, so the template's special
// tokens take the published ids.
type llama3Text struct{ enc *tiktoken.Tiktoken }

var cl100k = sync.OnceValues(func() (*tiktoken.Tiktoken, error) {
	tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
	return tiktoken.GetEncoding("cl100k_base")
})

func llama3Tokenizer(t *testing.T) tokenizer.Tokenizer {
	t.Helper()
	enc, err := cl100k()
	if err != nil {
		t.Fatalf("cl100k_base: %v", err)
	}
	return llama3Text{enc}
}

func (l llama3Text) Name() string             { return "test:cl100k_base" }
func (l llama3Text) Encode(text string) []int { return l.enc.EncodeOrdinary(text) }
func (l llama3Text) Decode(ids []int) string  { return l.enc.Decode(ids) }
func (l llama3Text) Count(text string) int    { return len(l.Encode(text)) }

// qwen3Tokenizer loads Qwen3's own tokenizer.json from the project's shared
// test files, skipping when they are absent (or failing, where CI requires
// them), as the tokenizer package's tests do.
func qwen3Tokenizer(t *testing.T) tokenizer.Tokenizer {
	t.Helper()
	path := filepath.Join("..", "..", "shared", "tokenizers", "qwen3", "tokenizer.json")
	if _, err := os.Stat(path); err != nil {
		msg := "shared tokenizer files not found at " + path
		if os.Getenv("INFERMATRIX_REQUIRE_SHARED") == "1" {
			t.Fatal(msg + "; INFERMATRIX_REQUIRE_SHARED=1 requires them")
		}
		t.Skip(msg + "; skipping")
	}
	tok, err := tokenizer.New(path)
	if err != nil {
		t.Fatalf("qwen3 tokenizer: %v", err)
	}
	return tok
}

func userMessage(text string) []chatMessage {
	return []chatMessage{{Role: "user", Content: messageContent{parts: []string{text}}}}
}

func templateServer(template string, tok tokenizer.Tokenizer) *Server {
	return &Server{cfg: Config{ChatTemplate: template}, tok: tok}
}

// vllmLlamaIDs are the prompt_token_ids vLLM reported for Llama 3.1 8B
// Instruct on one user message (quoted in a public vLLM test report): BOS,
// the system block with its default knowledge and date lines, the user turn
// and the generation prompt.
var vllmLlamaIDs = []int{128000, 128006, 9125, 128007, 271, 38766, 1303, 33025, 2696, 25, 6790, 220, 2366, 18, 198, 15724, 2696, 25, 220, 1627, 10263, 220, 2366, 19, 271, 128009, 128006, 882, 128007, 271,
	31121, 3041, 264, 5899, 38428, 11914, 430, 198, 310, 5829, 279, 3492, 24748, 520, 3325, 3131, 627, 310, 3041, 912, 1023, 2612, 1109, 430, 4382, 11914, 2085, 17637, 13,
	128009, 128006, 78191, 128007, 271}

// TestLlamaTemplateMatchesVLLM renders Llama 3.1's template for the message
// vLLM tokenized and checks the ids, one for one, and that "hi" counts 36:
// the 35 template tokens and its own.
func TestLlamaTemplateMatchesVLLM(t *testing.T) {
	s := templateServer(ChatTemplateLlama31, llama3Tokenizer(t))
	msg := "please give a ten-word sentence that\n            uses the word hello at least once.\n            give no other output than that simple sentence without quotes."
	opts := templateFields{}.chatOptions()
	if got := s.chatIDs(userMessage(msg), opts); !slices.Equal(got, vllmLlamaIDs) {
		t.Errorf("ids\n got %v\nwant %v (vLLM's)", got, vllmLlamaIDs)
	}
	want := "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>" +
		"<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	if got := renderLlama31(userMessage("  hi\n"), opts).String(); got != want {
		t.Errorf("rendered\n got %q\nwant %q", got, want)
	}
	if got := len(s.chatIDs(userMessage("hi"), opts)); got != 36 {
		t.Errorf(`"hi" counts %d tokens, want 36 as vLLM with Llama 3.1 8B Instruct`, got)
	}
	// The builtin o200k splits the template's text into as many tokens.
	if got := len(templateServer(ChatTemplateLlama31, builtinTokenizer(t)).chatIDs(userMessage("hi"), opts)); got != 36 {
		t.Errorf(`"hi" counts %d tokens with o200k, want 36`, got)
	}

	// A system message goes into the system block, after the date, trimmed.
	sys := []chatMessage{{Role: "system", Content: messageContent{parts: []string{" Be brief. "}}}, userMessage("hi")[0]}
	wantSys := "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nBe brief.<|eot_id|>" +
		"<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	if got := renderLlama31(sys, opts).String(); got != wantSys {
		t.Errorf("with a system message\n got %q\nwant %q", got, wantSys)
	}
	noGen := templateFields{AddGenerationPrompt: new(false)}.chatOptions()
	if got := len(s.chatIDs(userMessage("hi"), noGen)); got != 32 {
		t.Errorf(`"hi" without the generation prompt counts %d, want 32`, got)
	}
}

// TestQwen3Template counts with Qwen3's own tokenizer: "hi" is 9 tokens,
// the ids its tokenizer gives the rendered prompt, and enable_thinking
// false adds the empty think block (4 more: <think>, "\n\n", </think>, "\n\n").
func TestQwen3Template(t *testing.T) {
	tok := qwen3Tokenizer(t)
	s := templateServer(ChatTemplateQwen3, tok)
	opts := templateFields{}.chatOptions()
	want := []int{151644, 872, 198, 6023, 151645, 198, 151644, 77091, 198}
	if got := s.chatIDs(userMessage("hi"), opts); !slices.Equal(got, want) {
		t.Errorf(`"hi": ids %v, want %v`, got, want)
	}
	cases := []struct {
		name string
		msgs []chatMessage
		opts templateFields
		text string
	}{
		{"user", userMessage("hi"), templateFields{},
			"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"},
		{"system and thinking off", []chatMessage{
			{Role: "system", Content: messageContent{parts: []string{"Be brief."}}},
			{Role: "user", Content: messageContent{parts: []string{"hi"}}},
		}, templateFields{ChatTemplateKwargs: map[string]json.RawMessage{"enable_thinking": json.RawMessage("false")}},
			"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{"earlier turn's reasoning dropped", []chatMessage{
			{Role: "user", Content: messageContent{parts: []string{"hi"}}},
			{Role: "assistant", Content: messageContent{parts: []string{"<think>\nhm\n</think>\n\nhello"}}},
			{Role: "user", Content: messageContent{parts: []string{"bye"}}},
		}, templateFields{},
			"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n<|im_start|>user\nbye<|im_end|>\n<|im_start|>assistant\n"},
	}
	for _, c := range cases {
		r := renderQwen3(c.msgs, c.opts.chatOptions())
		if got := r.String(); got != c.text {
			t.Errorf("%s: rendered\n got %q\nwant %q", c.name, got, c.text)
		}
		// With the model's tokenizer the ids are those of the whole
		// rendered text, which is what vLLM tokenizes.
		if got, want := s.chatIDs(c.msgs, c.opts.chatOptions()), tok.Encode(c.text); !slices.Equal(got, want) {
			t.Errorf("%s: ids %v, want the rendered text's %v", c.name, got, want)
		}
	}
	thinkingOff := templateFields{ChatTemplateKwargs: map[string]json.RawMessage{"enable_thinking": json.RawMessage("false")}}.chatOptions()
	if got := len(s.chatIDs(userMessage("hi"), thinkingOff)); got != 13 {
		t.Errorf(`"hi" with enable_thinking false counts %d, want 13`, got)
	}
	if got := len(templateServer(ChatTemplateQwen3, builtinTokenizer(t)).chatIDs(userMessage("hi"), opts)); got != 9 {
		t.Errorf(`"hi" counts %d with o200k, want 9`, got)
	}
}

// TestChatTemplateDefault: the served model's id picks the template.
func TestChatTemplateDefault(t *testing.T) {
	for model, want := range map[string]string{
		llamaModel: ChatTemplateLlama31, qwenModel: ChatTemplateQwen3, "": ChatTemplateNone, "my-model": ChatTemplateNone,
	} {
		if got := (Config{Model: model}).WithDefaults().ChatTemplate; got != want {
			t.Errorf("model %q: template %q, want %q", model, got, want)
		}
	}
	if got := (Config{Model: llamaModel, ChatTemplate: ChatTemplateNone}).WithDefaults().ChatTemplate; got != ChatTemplateNone {
		t.Errorf("an explicit none became %q", got)
	}
	if _, err := New(Config{ChatTemplate: "jinja"}); err == nil || !strings.Contains(err.Error(), "chat template") {
		t.Errorf("unknown template: err %v", err)
	}
}

// usageOf posts body to path and returns usage.prompt_tokens, or the
// error body when the status is not 200.
func usageOf(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp := request(t, url, body, "")
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return -1, string(b)
	}
	var out struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
		Count int `json:"count"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if strings.HasSuffix(url, "/tokenize") {
		return out.Count, string(b)
	}
	return out.Usage.PromptTokens, string(b)
}

// TestServedChatTemplate checks the counts a client sees: chat usage with
// the template, /tokenize with messages agreeing, completions with Llama's
// BOS and Qwen's none, and the context limit counting the template.
func TestServedChatTemplate(t *testing.T) {
	cases := []struct {
		model            string
		chat, completion int // for "hi"
	}{
		{llamaModel, 36, 2},
		{qwenModel, 9, 1},
		{"infermatrix-sim", 1, 1},
	}
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			cfg := fastConfig()
			cfg.Model, cfg.TTFT, cfg.ITL = c.model, 1, 1
			inst := startSim(t, cfg)
			root := strings.TrimSuffix(inst.BaseURL, "/v1")
			chat := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1}`
			if got, body := usageOf(t, inst.BaseURL+"/chat/completions", chat); got != c.chat {
				t.Errorf("chat prompt_tokens %d, want %d: %s", got, c.chat, body)
			}
			if got, body := usageOf(t, root+"/tokenize", `{"messages":[{"role":"user","content":"hi"}]}`); got != c.chat {
				t.Errorf("/tokenize messages count %d, want %d as chat usage: %s", got, c.chat, body)
			}
			if got, body := usageOf(t, inst.BaseURL+"/completions", `{"prompt":"hi","max_tokens":1}`); got != c.completion {
				t.Errorf("completion prompt_tokens %d, want %d: %s", got, c.completion, body)
			}
			if got, body := usageOf(t, root+"/tokenize", `{"prompt":"hi"}`); got != c.completion {
				t.Errorf("/tokenize prompt count %d, want %d as completion usage: %s", got, c.completion, body)
			}
			if got, body := usageOf(t, inst.BaseURL+"/completions", `{"prompt":"hi","max_tokens":1,"add_special_tokens":false}`); got != 1 {
				t.Errorf("completion without special tokens counts %d, want 1: %s", got, body)
			}
			if got, body := usageOf(t, inst.BaseURL+"/completions", `{"prompt":[9906],"max_tokens":1}`); got != 1 {
				t.Errorf("a token-id prompt counts %d, want its 1 id (no BOS added): %s", got, body)
			}
		})
	}
}

// TestContextLimitCountsTemplate: a chat request whose content fits but
// whose templated prompt does not is refused with the templated count.
func TestContextLimitCountsTemplate(t *testing.T) {
	cfg := fastConfig()
	cfg.Model, cfg.MaxModelLen = llamaModel, 40
	inst := startSim(t, cfg)
	got, body := usageOf(t, inst.BaseURL+"/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":10}`)
	want := "However, you requested 46 tokens (36 in the messages, 10 in the completion)."
	if got != -1 || !strings.Contains(body, want) {
		t.Errorf("got %d, %s; want a 400 saying %q", got, body, want)
	}
	got, body = usageOf(t, inst.BaseURL+"/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}`)
	if got != 36 {
		t.Errorf("36 + 4 tokens in a context of 40: got %d, %s", got, body)
	}
}

// TestTokenizeShowsTemplate: /tokenize's token strings and /detokenize
// show the template's special tokens as their text, though the builtin
// o200k has no such tokens.
func TestTokenizeShowsTemplate(t *testing.T) {
	cfg := fastConfig()
	cfg.Model = llamaModel
	inst := startSim(t, cfg)
	root := strings.TrimSuffix(inst.BaseURL, "/v1")
	resp := request(t, root+"/tokenize", `{"messages":[{"role":"user","content":"hi"}],"return_token_strs":true}`, "")
	var tk tokenizeResponse
	if err := json.NewDecoder(resp.Body).Decode(&tk); err != nil {
		t.Fatal(err)
	}
	if tk.Count != 36 || len(tk.TokenStrs) != 36 || tk.TokenStrs[0] != llamaBOS || tk.TokenStrs[35] != "\n\n" {
		t.Fatalf("tokenize: %+v", tk)
	}
	ids, _ := json.Marshal(tk.Tokens)
	resp = request(t, root+"/detokenize", fmt.Sprintf(`{"tokens":%s}`, ids), "")
	var dt struct {
		Prompt string `json:"prompt"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&dt); err != nil {
		t.Fatal(err)
	}
	if want := renderLlama31(userMessage("hi"), templateFields{}.chatOptions()).String(); dt.Prompt != want {
		t.Errorf("detokenize\n got %q\nwant %q", dt.Prompt, want)
	}
}

// tokenizeIDs returns /tokenize's ids for a request body.
func tokenizeIDs(t *testing.T, root, body string) []int {
	t.Helper()
	resp := request(t, root+"/tokenize", body, "")
	var tk tokenizeResponse
	if err := json.NewDecoder(resp.Body).Decode(&tk); err != nil {
		t.Fatal(err)
	}
	return tk.Tokens
}

// TestTemplatePrefixCaching: the engine computes the templated prompt, so
// two chats with the same system prompt share their leading blocks
// (template tokens, system prompt, the user turn's header), and a repeat of
// the second finds every whole block of it.
func TestTemplatePrefixCaching(t *testing.T) {
	for _, model := range []string{llamaModel, qwenModel} {
		t.Run(model, func(t *testing.T) {
			cfg := engineConfig(t)
			cfg.Model = model
			bs := cfg.Engine.BlockSize
			inst := startSim(t, cfg)
			root := strings.TrimSuffix(inst.BaseURL, "/v1")
			chat := func(user string) string {
				return fmt.Sprintf(`{"messages":[{"role":"system","content":%q},{"role":"user","content":%q}],"max_tokens":2}`, cachedPrompt, user)
			}
			a, b := chat("Tell me about whales."), chat("What do sailors eat?")
			idsA, idsB := tokenizeIDs(t, root, a), tokenizeIDs(t, root, b)
			common := 0
			for common < min(len(idsA), len(idsB)) && idsA[common] == idsB[common] {
				common++
			}
			if common < 8*bs {
				t.Fatalf("the two prompts share %d tokens, want the system prompt's", common)
			}
			send(t, inst.BaseURL, "/chat/completions", a, false)
			n, got := send(t, inst.BaseURL, "/chat/completions", b, false).usageCached(t)
			if n != len(idsB) {
				t.Errorf("prompt_tokens %d, /tokenize counts %d", n, len(idsB))
			}
			if want := common / bs * bs; got != want {
				t.Errorf("second chat found %d cached tokens, want %d: the whole blocks of the %d tokens it shares", got, want, common)
			}
			if _, got := send(t, inst.BaseURL, "/chat/completions", b, false).usageCached(t); got != wholeBlocks(n, bs) {
				t.Errorf("repeat found %d cached tokens, want %d", got, wholeBlocks(n, bs))
			}
		})
	}
}

// TestChatTemplateTokens: what a client of the built-in server is told the
// template adds is exactly prompt_tokens less the contents' counts, for one
// message and for a conversation with a system prompt and a multi-part
// message.
func TestChatTemplateTokens(t *testing.T) {
	tok := builtinTokenizer(t)
	bodies := []struct {
		body     string
		contents []string
	}{
		{`{"messages":[{"role":"user","content":"hi"}],"max_tokens":1}`, []string{"hi"}},
		{`{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Name a whale."},{"type":"text","text":"One word."}]},` +
			`{"role":"assistant","content":"Moby."},{"role":"user","content":"Another?"}],"max_tokens":1}`,
			[]string{"Be brief.", "Name a whale.", "One word.", "Moby.", "Another?"}},
	}
	for _, c := range []struct {
		model string
		hi    int
	}{{llamaModel, 35}, {qwenModel, 8}, {"infermatrix-sim", 0}} {
		cfg := fastConfig()
		cfg.Model, cfg.TTFT, cfg.ITL = c.model, 1, 1
		inst := startSim(t, cfg)
		served := inst.Server.Config()
		if got := served.ChatTemplateTokens([]byte(bodies[0].body)); got != c.hi {
			t.Errorf("%s: \"hi\" has %d template tokens, want %d", c.model, got, c.hi)
		}
		for _, b := range bodies {
			content := 0
			for _, s := range b.contents {
				content += tok.Count(s)
			}
			prompt, raw := usageOf(t, inst.BaseURL+"/chat/completions", b.body)
			if got := served.ChatTemplateTokens([]byte(b.body)); prompt-content != got {
				t.Errorf("%s: prompt_tokens %d less contents %d = %d, template tokens say %d: %s", c.model, prompt, content, prompt-content, got, raw)
			}
		}
	}
	if got := (Config{Model: llamaModel, Tokenizer: tok}).WithDefaults().ChatTemplateTokens([]byte(`{"prompt":"hi"}`)); got != 0 {
		t.Errorf("a completion body: %d template tokens, want 0", got)
	}
}
