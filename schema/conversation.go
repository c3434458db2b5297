package schema

import (
	"strings"
	"time"
)

// Conversation makes each simulated user of a row hold a multi-turn chat,
// as users of a chat product do: turn k's request carries the whole
// conversation so far (the first prompt, every earlier user message and
// the server's actual replies) before its new user message. Single-turn
// rows never send a prompt that begins with another's reply, so they
// cannot show what a server's prefix cache does for a chat service, nor
// how TTFT grows with the history; a conversation row shows both, turn by
// turn (RowSummary.ByTurn).
type Conversation struct {
	Turns      int       `yaml:"turns" json:"turns,omitempty" doc:"Requests per conversation, the first included. Required with input_tokens; with a dataset, the most turns of each file conversation to replay (default: all of them)." minimum:"1" maximum:"1000"`
	ThinkTime  *Duration `yaml:"think_time" json:"think_time,omitempty" doc:"How long a user waits after a reply before sending the next turn, as a person reads and types. The user's next turn starts this long after the previous reply ends." default:"0s"`
	UserTokens *Length   `yaml:"user_tokens" json:"user_tokens,omitempty" doc:"Length of each later turn's new user message, in tokens: a number, or {mean, stddev, min, max} or {values}. Required with input_tokens (which is the first turn's prompt); not allowed with a dataset, whose user turns are the file's."`
}

// ConversationPlan is a row's conversation setting resolved.
type ConversationPlan struct {
	// Turns is the most requests per conversation; 0 with a dataset
	// means every user turn of each file conversation.
	Turns     int      `json:"turns,omitempty"`
	ThinkTime Duration `json:"think_time,omitempty"`
	// User is the length of the new user message of turns after the
	// first, for synthetic prompts; unset with a dataset.
	User Length `json:"user_tokens,omitempty"`
}

// MaxConversationTurns bounds conversation.turns: a conversation's last
// prompt holds every earlier turn, so the work of building and counting
// prompts grows with the square of the turns.
const MaxConversationTurns = 1000

// conversation validates a row's conversation setting against the rest of
// the row (p, resolved up to here) and returns it resolved; nil without
// one. A conversation is a chat: each turn's prompt is a list of messages
// whose earlier entries are the server's own replies, which only the chat
// API takes, and each turn follows its reply, which a trace's timestamps
// or a ramp's steps would contradict. A rate row's arrivals start
// conversations.
func (r *resolver) conversation(m *merged, rowPath string, p *PlannedRow) *ConversationPlan {
	c := m.Conversation
	if c == nil {
		return nil
	}
	path := m.at("conversation")
	cp := &ConversationPlan{Turns: c.Turns}
	if c.ThinkTime != nil {
		cp.ThinkTime = *c.ThinkTime // the decoder refuses a negative one
	}
	api, where := p.API, "the row's api"
	if api == "" {
		api, where = r.exp.Server.API, "server.api"
	}
	if api != "" && api != "chat" {
		r.problem(path, "use the chat API (the default), or drop conversation",
			"conversation needs the chat API: each turn sends the history as messages, and %s is %s", where, api)
	}
	if m.Ramp != nil {
		r.problem(path, "ramp and hold conversations in separate rows",
			"a ramped row cannot hold conversations")
	}
	switch p.Load.Mode {
	case ModeTrace:
		r.problem(path, "a trace's timestamps already say when each request is sent; drop conversation",
			"conversation cannot replay a trace")
	}
	switch {
	case p.Dataset != nil:
		if c.UserTokens != nil {
			r.problem(path+".user_tokens", "a dataset's later turns are its own user messages; drop user_tokens",
				"user_tokens applies to synthetic prompts (input_tokens), not to a dataset")
		}
		if p.Dataset.Format == "mooncake" {
			r.problem(path, "use a jsonl file with messages, or ShareGPT", "a mooncake dataset holds no conversations")
		}
	default:
		if c.Turns == 0 && !r.d.isBroken(path+".turns") {
			r.problem(path, "e.g. conversation: {turns: 4, user_tokens: 64, think_time: 2s}", "conversation needs turns")
		}
		if c.UserTokens == nil {
			if c.Turns > 1 && !r.d.isBroken(path+".user_tokens") {
				r.problem(path, "e.g. user_tokens: 64: the length of each later turn's new user message",
					"conversation needs user_tokens")
			}
		} else {
			cp.User = r.length(path+".user_tokens", *c.UserTokens, false)
		}
	}
	return cp
}

// thinkPerRequest is the think time a user spends per request on average,
// for estimates: every turn but a conversation's last is followed by one
// (with a dataset's unknown turns, every turn is counted, an upper bound).
func (c *ConversationPlan) thinkPerRequest() time.Duration {
	if c == nil || c.ThinkTime <= 0 {
		return 0
	}
	if c.Turns > 0 {
		return c.ThinkTime.D() * time.Duration(c.Turns-1) / time.Duration(c.Turns)
	}
	return c.ThinkTime.D()
}

// requestsPerArrival is how many requests one arrival of a rate row sends:
// a conversation's turns (its file's unknown turns count as one, the
// longest estimate), or 1 without conversations.
func (c *ConversationPlan) requestsPerArrival() float64 {
	if c == nil || c.Turns < 1 {
		return 1
	}
	return float64(c.Turns)
}

// loadText describes a row's load: a conversation row's rate counts
// conversations, and its cap the conversations held at once.
func (c *ConversationPlan) loadText(l LoadPlan) string {
	s := l.String()
	if c == nil || l.Mode != ModeRate {
		return s
	}
	s = strings.Replace(s, " req/s", " conversations/s", 1)
	return strings.Replace(s, " in flight", " conversations at once", 1)
}

// growth is the most tokens a conversation adds to its first prompt by its
// last turn, in typical lengths: every earlier reply and every later user
// message. The built-in server's context must hold the first prompt and
// this.
func (c *ConversationPlan) growth(out Length) int {
	if c == nil || c.Turns < 2 {
		return 0
	}
	return (c.Turns - 1) * (c.User.typical() + out.typical())
}
