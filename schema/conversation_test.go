package schema

import (
	"strings"
	"testing"
	"time"
)

// TestConversation: a conversation resolves onto its row with its think
// time and user message length, and the built-in server's context check
// counts the history the last turn carries.
func TestConversation(t *testing.T) {
	p := mustParse(t, `defaults: {requests: 20, input_tokens: 100, output_tokens: 50, concurrency: 2}
rows:
  - {id: chat, conversation: {turns: 4, user_tokens: 30, think_time: 2s}}
  - {id: plain}
  - {id: arrivals, rate: {per_second: 2}, conversation: {turns: 2, user_tokens: 10}}
`, Options{})
	c := p.Rows[0].Conversation
	if c == nil || c.Turns != 4 || c.ThinkTime.D() != 2*time.Second || c.User.Mean != 30 {
		t.Fatalf("chat: conversation %+v; want 4 turns of 30 new tokens, 2s apart", c)
	}
	if p.Rows[1].Conversation != nil {
		t.Errorf("plain: conversation %+v; want none", p.Rows[1].Conversation)
	}
	if a := p.Rows[2]; a.Load.Mode != ModeRate || a.Conversation == nil {
		t.Errorf("arrivals: load %+v, conversation %+v; want conversations arriving at a rate", a.Load, a.Conversation)
	}
	// 100 + 3 × (30 + 50) + 50 = 390 tokens by the last turn.
	_, err := Parse("test.yaml", []byte(`apiVersion: infermatrix/v1
name: t
server: {target: builtin, sim: {max_model_len: 300}}
rows:
  - {id: long, requests: 8, concurrency: 1, input_tokens: 100, output_tokens: 50, conversation: {turns: 4, user_tokens: 30}}
`), Options{})
	if err == nil || !strings.Contains(err.Error(), "row long asks for 340 input + 50 output tokens") {
		t.Errorf("Parse: %v; want the last turn's 390 tokens refused", err)
	}
}

// TestConversationProblems: a conversation that cannot be held is refused
// at load, every problem at once, each at its key.
func TestConversationProblems(t *testing.T) {
	all := problemsText(t, header+`defaults: {requests: 8, output_tokens: 8}
rows:
  - {id: noturns, concurrency: 1, input_tokens: 8, conversation: {user_tokens: 4}}
  - {id: nouser, concurrency: 1, input_tokens: 8, conversation: {turns: 3}}
  - {id: trace, trace: {file: resolve_test.go}, conversation: {turns: 2, user_tokens: 4}}
  - {id: data, concurrency: 1, dataset: {file: resolve_test.go, format: jsonl}, conversation: {user_tokens: 4}}
  - {id: neg, concurrency: 1, input_tokens: 8, conversation: {turns: 2, user_tokens: 4, think_time: -1s}}
  - {id: prompt, api: completions, concurrency: 1, input_tokens: 8, conversation: {turns: 2, user_tokens: 4}}
`)
	for _, want := range []string{
		"rows[0].conversation: conversation needs turns",
		"rows[1].conversation: conversation needs user_tokens",
		"rows[2].conversation: conversation cannot replay a trace",
		"rows[3].conversation.user_tokens: user_tokens applies to synthetic prompts (input_tokens), not to a dataset",
		"rows[4].conversation.think_time: duration must not be negative",
		"rows[5].conversation: conversation needs the chat API: each turn sends the history as messages, and the row's api is completions",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing %q in:\n%s", want, all)
		}
	}
}
