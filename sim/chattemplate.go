package sim

// Chat templates: what a vLLM serving the preset's model adds around a chat
// request's messages before it counts the prompt.
//
// vLLM renders the model's chat template (tokenizer_config.json's
// chat_template, a Jinja program) to text and tokenizes that text without
// adding special tokens again (ChatCompletionRequest.add_special_tokens
// defaults to false, since the template writes its own BOS). The tokens a
// client never sent (BOS, headers, end-of-turn markers, the default system
// block, the generation prompt) are then part of usage.prompt_tokens, of the
// context limit and of the prefill the engine computes. A server that counted
// the contents alone would report "hi" as one token where vLLM with Llama 3.1
// 8B Instruct reports 36.
//
// The templates below are written out in Go for the two families the presets
// serve, from the models' published tokenizer_config.json, for the requests a
// benchmark sends: text messages, no tools (a request with tools is refused,
// checkUnsupported). Each renders to a sequence of special tokens and text;
// a special token is one token, the text is encoded with the server's
// tokenizer, so that with the model's own tokenizer.json the ids are vLLM's,
// id for id, and with another tokenizer only the text's count differs.

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/infermatrix/infermatrix/tokenizer"
)

// The values of Config.ChatTemplate.
const (
	// ChatTemplateNone counts a chat prompt as its messages' text alone,
	// as a model without a chat template would be prompted. The default
	// for a served model of no known family (the fixed and tiny-fast
	// presets' infermatrix-sim), so that their counts are exactly the
	// client's.
	ChatTemplateNone = "none"
	// ChatTemplateLlama31 is Llama 3.1 Instruct's template.
	ChatTemplateLlama31 = "llama-3.1"
	// ChatTemplateQwen3 is Qwen3's template.
	ChatTemplateQwen3 = "qwen3"
)

// ChatTemplates lists the values Config.ChatTemplate accepts besides "".
func ChatTemplates() []string {
	return []string{ChatTemplateNone, ChatTemplateLlama31, ChatTemplateQwen3}
}

// chatTemplateFor is the template a served model id implies: the family a
// vLLM would load the template of. Matching on the id, not the preset,
// keeps a preset whose model was renamed to something unrelated template
// free, as its id names no model a client could look up.
func chatTemplateFor(model string) string {
	m := strings.ToLower(model)
	switch {
	case strings.Contains(m, "llama-3.1"):
		return ChatTemplateLlama31
	case strings.Contains(m, "qwen3"):
		return ChatTemplateQwen3
	}
	return ChatTemplateNone
}

func checkChatTemplate(name string) error {
	for _, t := range ChatTemplates() {
		if name == t {
			return nil
		}
	}
	return fmt.Errorf("chat template %q: want one of %s", name, strings.Join(ChatTemplates(), ", "))
}

// The special tokens the templates write, with their ids in the models'
// own vocabularies (Llama 3.1's tokenizer.json; Qwen3's, as in
// ../shared/tokenizers/qwen3). A server tokenizer that knows the token's
// text as one added token gives its own id instead (specialID).
var specialIDs = map[string]int{
	llamaBOS: 128000, llamaStartHeader: 128006, llamaEndHeader: 128007, llamaEOT: 128009,
	qwenStart: 151644, qwenEnd: 151645, qwenThink: 151667, qwenEndThink: 151668,
}

const (
	llamaBOS         = "<|begin_of_text|>"
	llamaStartHeader = "<|start_header_id|>"
	llamaEndHeader   = "<|end_header_id|>"
	llamaEOT         = "<|eot_id|>"
	qwenStart        = "<|im_start|>"
	qwenEnd          = "<|im_end|>"
	qwenThink        = "<think>"
	qwenEndThink     = "</think>"
)

// specialText is the text of a template special id, for /tokenize's
// token_strs and /detokenize when the server's tokenizer does not know it.
var specialText = func() map[int]string {
	m := make(map[int]string, len(specialIDs))
	for text, id := range specialIDs {
		m[id] = text
	}
	return m
}()

// resolvedSpecials caches specialID's answer per tokenizer name, since
// encoding the token's text costs a little on every request.
var resolvedSpecials sync.Map // specialKey → resolvedSpecial

type specialKey struct{ tok, text string }

type resolvedSpecial struct {
	id  int
	own bool // the tokenizer encodes the text as this one token
}

// specialID is the id of a template's special token: the tokenizer's own
// when it encodes the text as one token (a Hugging Face tokenizer of the
// model, whose added tokens are matched before anything else, as vLLM's
// tokenizer does), else the model's published id. The builtin o200k reads
// special-token text as ordinary text, so it gets the published id: the
// template's special tokens count as one token each whatever the
// tokenizer.
func specialID(tok tokenizer.Tokenizer, text string) int { return resolveSpecial(tok, text).id }

func resolveSpecial(tok tokenizer.Tokenizer, text string) resolvedSpecial {
	key := specialKey{tok.Name(), text}
	if r, ok := resolvedSpecials.Load(key); ok {
		return r.(resolvedSpecial)
	}
	r := resolvedSpecial{id: specialIDs[text]}
	if ids := tok.Encode(text); len(ids) == 1 {
		r = resolvedSpecial{id: ids[0], own: true}
	}
	resolvedSpecials.Store(key, r)
	return r
}

// templateFields are the request fields that change what the template
// renders, on chat requests and on /tokenize with messages; completions
// read add_special_tokens alone.
type templateFields struct {
	AddGenerationPrompt *bool                      `json:"add_generation_prompt"`
	AddSpecialTokens    *bool                      `json:"add_special_tokens"`
	ChatTemplateKwargs  map[string]json.RawMessage `json:"chat_template_kwargs"`
}

// chatOptions are templateFields with vLLM's defaults applied:
// add_generation_prompt true, add_special_tokens false (the template writes
// BOS itself), and Qwen3's enable_thinking undefined, which renders no
// empty think block.
type chatOptions struct {
	generationPrompt bool
	specialTokens    bool
	// thinkingOff is chat_template_kwargs.enable_thinking false, which
	// Qwen3's template answers with an empty think block after the
	// generation prompt (how benchmarks turn its reasoning off).
	thinkingOff bool
}

func (f templateFields) chatOptions() chatOptions {
	o := chatOptions{generationPrompt: true}
	if f.AddGenerationPrompt != nil {
		o.generationPrompt = *f.AddGenerationPrompt
	}
	if f.AddSpecialTokens != nil {
		o.specialTokens = *f.AddSpecialTokens
	}
	if raw, ok := f.ChatTemplateKwargs["enable_thinking"]; ok {
		var on bool
		o.thinkingOff = json.Unmarshal(raw, &on) == nil && !on
	}
	return o
}

// completionSpecialTokens is add_special_tokens for a text prompt
// (completions, /tokenize with a prompt), where vLLM's default is true.
func (f templateFields) completionSpecialTokens() bool {
	return f.AddSpecialTokens == nil || *f.AddSpecialTokens
}

// rendered is a template's output: special tokens and text in order.
type rendered struct {
	parts []renderedPart
}

type renderedPart struct {
	special bool
	text    string
}

func (r *rendered) special(text string) {
	r.parts = append(r.parts, renderedPart{special: true, text: text})
}

func (r *rendered) text(s string) {
	if s == "" {
		return
	}
	if n := len(r.parts); n > 0 && !r.parts[n-1].special {
		// Adjacent text is tokenized as one string, as the
		// rendered prompt is: BPE merges across the pieces the
		// template concatenated.
		r.parts[n-1].text += s
		return
	}
	r.parts = append(r.parts, renderedPart{text: s})
}

// encode tokenizes the rendered prompt: each special token is one id, and
// each run of text between them is encoded as a whole.
func (r *rendered) encode(tok tokenizer.Tokenizer) []int {
	var ids []int
	for _, p := range r.parts {
		if p.special {
			ids = append(ids, specialID(tok, p.text))
		} else {
			ids = append(ids, tok.Encode(p.text)...)
		}
	}
	return ids
}

// String is the rendered prompt as text, as the template's Jinja renders
// it; tests compare it with the published template's output.
func (r *rendered) String() string {
	var b strings.Builder
	for _, p := range r.parts {
		b.WriteString(p.text)
	}
	return b.String()
}

// messageText is a message's content as a chat template sees it: vLLM
// joins a list of text parts with newlines for templates that take the
// content as a string, as both families' do.
func messageText(m chatMessage) string {
	return strings.Join(m.Content.parts, "\n")
}

// renderLlama31 renders Llama 3.1 Instruct's chat_template
// (huggingface.co/meta-llama/Llama-3.1-8B-Instruct, tokenizer_config.json)
// for messages without tools:
//
//	{{- bos_token }}
//	... date_string defaults to "26 Jul 2024"
//	system_message = messages[0]['content']|trim if messages[0] is a system message (and it is removed), else ""
//	"<|start_header_id|>system<|end_header_id|>\n\n"
//	"Cutting Knowledge Date: December 2023\n" "Today Date: " + date_string + "\n\n"
//	system_message "<|eot_id|>"
//	for each message: '<|start_header_id|>' + role + '<|end_header_id|>\n\n' + content|trim + '<|eot_id|>'
//	  (a tool or ipython message: "<|start_header_id|>ipython<|end_header_id|>\n\n" + content + "<|eot_id|>")
//	add_generation_prompt: '<|start_header_id|>assistant<|end_header_id|>\n\n'
//
// The system block, with its knowledge and date lines, is written whether
// or not the request has a system message. vLLM passes no date_string, so
// the default date stands; vLLM's own tests show the same prompt ids
// (128000, 128006, 9125, 128007, 271, 38766, 1303, ...).
func renderLlama31(msgs []chatMessage, o chatOptions) *rendered {
	r := &rendered{}
	r.special(llamaBOS)
	system := ""
	if len(msgs) > 0 && msgs[0].Role == "system" {
		system = strings.TrimSpace(messageText(msgs[0]))
		msgs = msgs[1:]
	}
	header := func(role string) {
		r.special(llamaStartHeader)
		r.text(role)
		r.special(llamaEndHeader)
		r.text("\n\n")
	}
	header("system")
	r.text("Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n")
	r.text(system)
	r.special(llamaEOT)
	for _, m := range msgs {
		if m.Role == "tool" || m.Role == "ipython" {
			header("ipython")
			r.text(messageText(m))
		} else {
			header(m.Role)
			r.text(strings.TrimSpace(messageText(m)))
		}
		r.special(llamaEOT)
	}
	if o.generationPrompt {
		header("assistant")
	}
	return r
}

// renderQwen3 renders Qwen3's chat_template (huggingface.co/Qwen/Qwen3-0.6B,
// tokenizer_config.json; the same file is ../shared/tokenizers/qwen3) for
// messages without tools:
//
//	a first system message: '<|im_start|>system\n' + content + '<|im_end|>\n'
//	user, and system after the first: '<|im_start|>' + role + '\n' + content + '<|im_end|>' + '\n'
//	assistant: '<|im_start|>assistant\n' + content (its reasoning split off at
//	  '</think>'; after the last user query, the last message, or one with
//	  reasoning, gets '<think>\n' + reasoning + '\n</think>\n\n' first) + '<|im_end|>\n'
//	tool: consecutive tool messages share one user turn, each
//	  '\n<tool_response>\n' + content + '\n</tool_response>'
//	add_generation_prompt: '<|im_start|>assistant\n', and '<think>\n\n</think>\n\n'
//	  when enable_thinking is false
//
// A message of any other role is left out, as the template does.
func renderQwen3(msgs []chatMessage, o chatOptions) *rendered {
	r := &rendered{}
	if len(msgs) > 0 && msgs[0].Role == "system" {
		r.special(qwenStart)
		r.text("system\n" + messageText(msgs[0]))
		r.special(qwenEnd)
		r.text("\n")
	}
	// The last user message that is not a wrapped tool response.
	lastQuery := len(msgs) - 1
	for i := len(msgs) - 1; i >= 0; i-- {
		c := messageText(msgs[i])
		if msgs[i].Role == "user" && !(strings.HasPrefix(c, "<tool_response>") && strings.HasSuffix(c, "</tool_response>")) {
			lastQuery = i
			break
		}
	}
	for i, m := range msgs {
		c := messageText(m)
		switch {
		case m.Role == "user" || m.Role == "system" && i > 0:
			r.special(qwenStart)
			r.text(m.Role + "\n" + c)
			r.special(qwenEnd)
			r.text("\n")
		case m.Role == "assistant":
			content, reasoning := c, ""
			if strings.Contains(c, qwenEndThink) {
				parts := strings.Split(c, qwenEndThink)
				content = strings.TrimLeft(parts[len(parts)-1], "\n")
				think := strings.Split(strings.TrimRight(parts[0], "\n"), qwenThink)
				reasoning = strings.TrimLeft(think[len(think)-1], "\n")
			}
			r.special(qwenStart)
			r.text("assistant\n")
			if i > lastQuery && (i == len(msgs)-1 || reasoning != "") {
				r.special(qwenThink)
				r.text("\n" + strings.Trim(reasoning, "\n") + "\n")
				r.special(qwenEndThink)
				r.text("\n\n" + strings.TrimLeft(content, "\n"))
			} else {
				r.text(content)
			}
			r.special(qwenEnd)
			r.text("\n")
		case m.Role == "tool":
			if i == 0 || msgs[i-1].Role != "tool" {
				r.special(qwenStart)
				r.text("user")
			}
			r.text("\n<tool_response>\n" + c + "\n</tool_response>")
			if i == len(msgs)-1 || msgs[i+1].Role != "tool" {
				r.special(qwenEnd)
				r.text("\n")
			}
		}
	}
	if o.generationPrompt {
		r.special(qwenStart)
		r.text("assistant\n")
		if o.thinkingOff {
			r.special(qwenThink)
			r.text("\n\n")
			r.special(qwenEndThink)
			r.text("\n\n")
		}
	}
	return r
}

// chatIDs returns the token ids of a chat request's prompt: its messages
// rendered with the server's chat template and tokenized, as vLLM counts
// usage.prompt_tokens. Without a template (ChatTemplateNone) it is each
// message part's text, encoded alone, roles and all else left out.
func (s *Server) chatIDs(msgs []chatMessage, o chatOptions) []int {
	var r *rendered
	switch s.cfg.ChatTemplate {
	case ChatTemplateLlama31:
		r = renderLlama31(msgs, o)
	case ChatTemplateQwen3:
		r = renderQwen3(msgs, o)
	default:
		var ids []int
		for _, m := range msgs {
			for _, p := range m.Content.parts {
				ids = append(ids, s.tok.Encode(p)...)
			}
		}
		return ids
	}
	if len(msgs) == 0 {
		// No message, no prompt: vLLM's template fails on
		// messages[0], and the empty prompt is refused either way.
		return nil
	}
	ids := r.encode(s.tok)
	if o.specialTokens {
		// The tokenizer's own special tokens on top of the
		// template's, as vLLM adds them when asked: a second BOS
		// for Llama, nothing for Qwen.
		ids = append(s.bos(), ids...)
	}
	return ids
}

// bos is what the model's tokenizer prepends to a text prompt when it adds
// special tokens (vLLM's completions, whose add_special_tokens defaults to
// true): Llama 3's post-processor writes <|begin_of_text|>; Qwen's adds
// nothing (add_bos_token false); no template, nothing.
func (s *Server) bos() []int {
	if s.cfg.ChatTemplate == ChatTemplateLlama31 {
		return []int{specialID(s.tok, llamaBOS)}
	}
	return nil
}

// decode is the text of ids for /tokenize's token_strs and /detokenize: a
// template special the server's tokenizer does not know is written as its
// own text rather than as whatever that id means in the tokenizer's
// vocabulary. (An id of the prompt's text that happens to equal one is
// shown as the special too: the two cannot be told apart.)
func (s *Server) decode(ids []int) string {
	if s.cfg.ChatTemplate == ChatTemplateNone {
		return s.tok.Decode(ids)
	}
	var b strings.Builder
	start := 0
	for i, id := range ids {
		text, ok := specialText[id]
		if !ok || resolveSpecial(s.tok, text).own {
			continue
		}
		b.WriteString(s.tok.Decode(ids[start:i]))
		b.WriteString(text)
		start = i + 1
	}
	b.WriteString(s.tok.Decode(ids[start:]))
	return b.String()
}

// templateShapes caches ChatTemplateTokens by what decides its answer.
var templateShapes sync.Map // string → int

// ChatTemplateTokens is how many tokens a server with this configuration
// adds to a chat request's prompt around its messages' text: its chat
// template's tokens, with each message's content left out (and the
// newlines that join a message's text parts counted with them). It is
// what usage.prompt_tokens exceeds the sum of the contents' counts by, so
// that a client of the built-in server, which knows the server's
// configuration, can tell the template's tokens from a tokenizer that
// counts its prompts differently (metrics' token check). It is 0 for a body
// that is not a chat request with messages, and with ChatTemplateNone. c
// is a running server's (Server.Config), whose Tokenizer is set.
//
// The count is the template's alone: where the template trims a content
// (Llama's system and user messages), or a content's first characters
// merge with the template's text into one token, the prompt differs from
// template plus contents by those tokens, which are the content's.
func (c Config) ChatTemplateTokens(body []byte) int {
	if c.ChatTemplate == ChatTemplateNone || c.Tokenizer == nil {
		return 0
	}
	var req struct {
		Messages []chatMessage `json:"messages"`
		templateFields
	}
	if json.Unmarshal(body, &req) != nil || len(req.Messages) == 0 {
		return 0
	}
	opts := req.chatOptions()
	var key strings.Builder
	fmt.Fprintf(&key, "%s|%s|%v", c.ChatTemplate, c.Tokenizer.Name(), opts)
	msgs := make([]chatMessage, len(req.Messages))
	for i, m := range req.Messages {
		// Each content is its joins alone: n parts, n-1 newlines.
		joins := make([]string, max(len(m.Content.parts), 1))
		msgs[i] = chatMessage{Role: m.Role, Content: messageContent{parts: joins}}
		fmt.Fprintf(&key, "|%s:%d", m.Role, len(joins))
	}
	if n, ok := templateShapes.Load(key.String()); ok {
		return n.(int)
	}
	n := len((&Server{cfg: c, tok: c.Tokenizer}).chatIDs(msgs, opts))
	templateShapes.Store(key.String(), n)
	return n
}
