package workload

import (
	"math"
	"math/rand/v2"
	"strings"

	"github.com/infermatrix/infermatrix/schema"
	openai "github.com/sashabaranov/go-openai"
)

// A conversation row's turns carry the whole chat so far: the first
// prompt, every earlier user message and the server's own replies to them,
// then a new user message (see runner/conversation.go for why the replies
// are the server's, and how turns are scheduled). This file builds those
// histories; the runner decides when each turn is sent.

// Conversation is one user's chat in progress: the history its next turn
// sends. The runner holds one per user and schedules its turns; the
// workload builds each turn's prompt from it (TurnPrompt) and adds the
// server's reply (Replied).
type Conversation struct {
	msgs []openai.ChatCompletionMessage // what the next turn sends before its new user message
	// counts holds the client tokenizer's count of each of msgs, so that a
	// turn's input length is summed, not the whole history counted again.
	counts []int
	turn   int // the next turn, from 0
	turns  int // how many turns the conversation holds
	// n is the conversation's number in the row: with the turn, it keys
	// every draw of the later turns (turnRNG).
	n int64
	// users and outputs are a dataset conversation's user turns (after any
	// leading system messages, which are in msgs from the start) and the
	// file's output length for each (0: none); nil for synthetic prompts.
	users   []openai.ChatCompletionMessage
	outputs []int
}

// convRNGSalt separates the draws of later turns' lengths from those of
// the first turn's (Row.rng), which use the same sequence numbers.
const convRNGSalt = 0xc0c0a5e1d3b2f4e7

// Turn is the conversation's next turn, from 0: the turn a record of the
// request now built belongs to.
func (cv *Conversation) Turn() int { return cv.turn }

// Over says whether every turn the conversation holds has been answered.
func (cv *Conversation) Over() bool { return cv.turn >= cv.turns }

// NewConversation starts the row's conversation number n (from 0): a
// dataset row's n-th line, wrapping around, or a synthetic chat. seq is
// the sequence number its first turn's prompt is drawn from, whose tag
// the whole conversation carries. The runner derives seq from n, so that
// a conversation is the same whichever user, or shard, holds it.
func (w *Row) NewConversation(n, seq int64) *Conversation {
	cv := &Conversation{turns: w.row.Conversation.Turns, n: n}
	if w.src == nil {
		return cv
	}
	e := w.src.entries[n%int64(len(w.src.entries))]
	switch {
	case e.messages != nil:
		// Leading system (or developer) messages stay in front of every
		// turn; each user message is a turn; the file's assistant
		// messages give way to the server's replies.
		i := 0
		for i < len(e.messages) && e.messages[i].Role != openai.ChatMessageRoleUser {
			i++
		}
		if i == len(e.messages) {
			i = 0 // no user message: the line is one turn, sent as it is
			cv.users = []openai.ChatCompletionMessage{e.messages[len(e.messages)-1]}
			cv.msgs = append(cv.msgs, e.messages[:len(e.messages)-1]...)
			cv.outputs = []int{e.output}
			break
		}
		cv.msgs = append(cv.msgs, e.messages[:i]...)
		for _, m := range e.messages[i:] {
			if m.Role == openai.ChatMessageRoleUser {
				cv.users = append(cv.users, m)
			}
		}
		cv.outputs = make([]int, len(cv.users))
		for j := range cv.outputs {
			cv.outputs[j] = e.output // a line's max_tokens holds for each of its turns
		}
	case e.turns != nil:
		for _, t := range e.turns {
			cv.users = append(cv.users, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: t})
		}
		cv.outputs = e.outputs
	default:
		cv.users = []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: e.text}}
		cv.outputs = []int{e.output}
	}
	if cv.turns == 0 || cv.turns > len(cv.users) {
		cv.turns = len(cv.users)
	}
	// The conversation's tag goes in front of its first message, so that
	// it shares nothing with another conversation, even of the same file
	// line; every turn repeats it, so the history stays one prefix.
	if tag := w.tag(seq, math.MaxInt32); tag != "" {
		if len(cv.msgs) > 0 {
			cv.msgs = append([]openai.ChatCompletionMessage(nil), cv.msgs...)
			cv.msgs[0].Content = tag + cv.msgs[0].Content
		} else {
			cv.users = append([]openai.ChatCompletionMessage(nil), cv.users...)
			cv.users[0].Content = tag + cv.users[0].Content
		}
	}
	for _, m := range cv.msgs {
		cv.counts = append(cv.counts, w.corpus.tok.Count(m.Content))
	}
	return cv
}

// turnRNG draws a turn's lengths: a function of the row's seed, the
// conversation's number and the turn only, not of the request's sequence
// number, which depends on how the turns of concurrent conversations
// happened to interleave (and, under run --shard, on the shard). So the
// same conversation has the same turns in every run of the row, sharded
// or not.
func (w *Row) turnRNG(cv *Conversation) *rand.Rand {
	return rand.New(rand.NewPCG(w.seed^convRNGSalt, uint64(cv.n)<<20|uint64(cv.turn)))
}

// TurnPrompt builds the prompt of the conversation's next turn and adds
// its user message to the history. seq is the conversation's first turn's
// (NewConversation): the first turn of a synthetic chat is the row's
// prompt seq; later turns are drawn by turnRNG.
func (w *Row) TurnPrompt(cv *Conversation, seq int64) Prompt {
	history := 0
	for _, c := range cv.counts {
		history += c
	}
	var user openai.ChatCompletionMessage
	var userN, requested, maxTokens int
	shared := history
	switch {
	case cv.users != nil:
		user = cv.users[cv.turn]
		userN = w.corpus.tok.Count(user.Content)
		requested = history + userN
		if cv.turn < len(cv.outputs) {
			maxTokens = cv.outputs[cv.turn]
		}
		if out := w.row.Output; out.Mean > 0 || len(out.Values) > 0 {
			maxTokens = sampleLength(w.turnRNG(cv), out)
		}
	case cv.turn == 0:
		// The first turn is the row's synthetic prompt: its prefix and
		// tag, its drawn input and output lengths.
		p := w.Prompt(seq)
		user = openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: p.text}
		userN, requested, maxTokens, shared = p.InTokens, p.Requested, p.MaxTokens, p.Shared
	default:
		rng := w.turnRNG(cv)
		n := sampleLength(rng, w.row.Conversation.User)
		maxTokens = sampleLength(rng, w.row.Output)
		key := cv.n*1009 + int64(cv.turn) // spreads the windows as seq does for first turns
		off := int((w.text ^ convRNGSalt) % uint64(len(w.corpus.ids)))
		off = (off + int(math.Mod(float64(key)*goldenStride*float64(len(w.corpus.ids)), float64(len(w.corpus.ids))))) % len(w.corpus.ids)
		text, got := w.corpus.exact("", 0, off, n, message)
		user = openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: text}
		userN, requested = got, history+n
	}
	cv.msgs = append(cv.msgs, user)
	cv.counts = append(cv.counts, userN)
	in := history + userN
	if w.row.UniquePrompts == schema.UniqueOff && cv.users != nil {
		shared = in // a dataset sent verbatim is shared whole, as sourcePrompt counts it
	}
	msgs := append([]openai.ChatCompletionMessage(nil), cv.msgs...)
	return Prompt{messages: msgs, InTokens: in, Requested: requested, MaxTokens: maxTokens, Shared: shared}
}

// Replied adds the server's reply to the history and moves to the next
// turn.
func (w *Row) Replied(cv *Conversation, reply string) {
	cv.msgs = append(cv.msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: reply})
	cv.counts = append(cv.counts, w.corpus.tok.Count(reply))
	cv.turn++
}

// shareGPTTurns returns a ShareGPT conversation's non-empty human turns
// and the reply after each ("" where none). With needReply, the turns stop
// before the first one without a reply: its output length is unknown.
func shareGPTTurns(turns []struct {
	From  string `json:"from"`
	Value string `json:"value"`
}, needReply bool) (users, replies []string) {
	for j, t := range turns {
		if !shareGPTUser[strings.ToLower(t.From)] || t.Value == "" {
			continue
		}
		reply := ""
		for _, rt := range turns[j+1:] {
			if shareGPTUser[strings.ToLower(rt.From)] {
				break
			}
			if shareGPTReply[strings.ToLower(rt.From)] {
				reply = rt.Value
				break
			}
		}
		if needReply && reply == "" {
			break
		}
		users = append(users, t.Value)
		replies = append(replies, reply)
	}
	return users, replies
}
