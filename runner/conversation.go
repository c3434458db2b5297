package runner

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/infermatrix/infermatrix/schema"
	openai "github.com/sashabaranov/go-openai"
)

// A conversation row (schema.Conversation) gives each closed-loop user one
// chat at a time. Turn k's request carries the whole chat so far: the first
// prompt, every earlier user message, and the server's own replies to them,
// then a new user message, as a chat product sends it. The assistant turns
// are what the server actually answered, never a file's: the next turn's
// prompt is then exactly the previous prompt and its reply, which is what a
// server's prefix cache holds after answering (vLLM, SGLang and the
// built-in server keep a reply's full blocks), so the TTFT of later turns
// shows what the cache saves. A file's canned replies would show a cache
// miss the real product never has. AIPerf's live-response mode and vLLM's
// multi-turn benchmark build their histories the same way.
//
// A user's turns run strictly in order: the next turn is sent think_time
// after the previous reply ended. In a rate row, conversations arrive at
// the rate (per_second counts conversations, not requests), each then held
// by a user of its own as in a closed loop; max_concurrency caps the
// conversations held at once. A turn that fails, or whose reply carries
// no text, ends its conversation (there is no reply to carry on from); the
// user then starts the next conversation.

// conversation is one user's chat in progress.
type conversation struct {
	id   string
	msgs []openai.ChatCompletionMessage // what the next turn sends before its new user message
	// counts holds the client tokenizer's count of each of msgs, so that a
	// turn's input length is summed, not the whole history counted again.
	counts []int
	turn   int // the next turn, from 0
	turns  int // how many turns the conversation holds
	// users and outputs are a dataset conversation's user turns (after any
	// leading system messages, which are in msgs from the start) and the
	// file's output length for each (0: none); nil for synthetic prompts.
	users   []openai.ChatCompletionMessage
	outputs []int
}

// convRNGSalt separates the draws of later turns' lengths from those of
// the first turn's (workload.rng), which use the same sequence numbers.
const convRNGSalt = 0xc0c0a5e1d3b2f4e7

func (rr *rowRun) nextConversation() int64 {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.convs++
	return rr.convs - 1
}

// conversationID is unique in the run, like a record's id: the run, the
// row's index, the trial of a repeated row, and the conversation's number.
func (rr *rowRun) conversationID(n int64) string {
	if rr.trial > 0 {
		return fmt.Sprintf("%s-%d-t%d-c%d", rr.runID, rr.index, rr.trial, n)
	}
	return fmt.Sprintf("%s-%d-c%d", rr.runID, rr.index, n)
}

// newConversation starts the row's next conversation; seq is its first
// turn's request.
func (rr *rowRun) newConversation(seq int64) *conversation {
	n := rr.nextConversation()
	cv := &conversation{id: rr.conversationID(n), turns: rr.row.Conversation.Turns}
	w := rr.wl
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

// turnPrompt builds the prompt of the conversation's next turn, request
// seq, and adds its user message to the history.
func (w *workload) turnPrompt(cv *conversation, seq int64) prompt {
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
			maxTokens = sampleLength(w.rng(seq), out)
		}
	case cv.turn == 0:
		// The first turn is the row's synthetic prompt: its prefix and
		// tag, its drawn input and output lengths.
		p := w.prompt(seq)
		user = openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: p.text}
		userN, requested, maxTokens, shared = p.inTokens, p.requested, p.maxTokens, p.shared
	default:
		rng := rand.New(rand.NewPCG(w.seed^convRNGSalt, uint64(seq)))
		n := sampleLength(rng, w.row.Conversation.User)
		maxTokens = sampleLength(rng, w.row.Output)
		off := int((w.text ^ convRNGSalt) % uint64(len(w.corpus.ids)))
		off = (off + int(math.Mod(float64(seq)*goldenStride*float64(len(w.corpus.ids)), float64(len(w.corpus.ids))))) % len(w.corpus.ids)
		text, got := w.corpus.exact("", 0, off, n)
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
	return prompt{messages: msgs, inTokens: in, requested: requested, maxTokens: maxTokens, shared: shared}
}

// replied adds the server's reply to the history and moves to the next
// turn.
func (w *workload) replied(cv *conversation, reply string) {
	cv.msgs = append(cv.msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: reply})
	cv.counts = append(cv.counts, w.corpus.tok.Count(reply))
	cv.turn++
}

// prepareTurn builds the request of the conversation's next turn.
func (rr *rowRun) prepareTurn(t ticket, cv *conversation) (*call, error) {
	rec := rr.newRecord(t, 0)
	turn := cv.turn
	rec.ConversationID, rec.Turn = cv.id, &turn
	p := rr.wl.turnPrompt(cv, t.seq)
	body, err := rr.wl.body(p, rr.row.Streaming)
	if err != nil {
		return nil, err
	}
	rec.InputTokens.Requested = p.requested
	rec.InputTokens.Client = p.inTokens
	rec.SharedTokens = p.shared
	rec.OutputTokens.Requested = p.maxTokens
	return &call{url: rec.URL, body: body, rec: rec}, nil
}

// conversationLoop runs the row's users, each holding one conversation
// after another. It returns when dispatching stops (users still finish the
// turn they are in, tracked by wg; none starts another).
func (rr *rowRun) conversationLoop(ctx, inflight context.Context, wg *sync.WaitGroup) {
	for w := 0; w < rr.row.Load.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && rr.converse(ctx, inflight, nil) {
			}
		}()
	}
	select {
	case <-ctx.Done():
	case <-rr.stopped:
	}
}

// arrival is when an open-loop conversation was due, from the row's
// start, and how long it then waited for a max_concurrency slot: its first
// turn's schedule and queue time.
type arrival struct{ scheduled, queued time.Duration }

// conversationArrivals starts a conversation at each arrival of the row's
// rate, until dispatching stops. Each runs its turns in a goroutine of its
// own, tracked by wg.
func (rr *rowRun) conversationArrivals(ctx, inflight context.Context, wg *sync.WaitGroup) {
	l := rr.row.Load
	arr := newArrivals(l.Rate, l.Arrival, l.Burstiness, rr.wl.seed)
	var slots chan struct{}
	if l.MaxConcurrency > 0 {
		slots = make(chan struct{}, l.MaxConcurrency)
	}
	pace := newPacer()
	defer pace.close()
	for {
		due := rr.loadStart.Add(arr.next())
		if _, more := rr.peek(due); !more {
			rr.take(due) // records why the row stopped
			return
		}
		if !pace.sleepUntil(ctx, rr.stopped, due) {
			return
		}
		if slots != nil {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			case <-rr.stopped:
				return
			}
		}
		a := &arrival{scheduled: due.Sub(rr.start)}
		if slots != nil {
			a.queued = max(time.Since(due), 0)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if slots != nil {
				defer func() { <-slots }()
			}
			rr.converse(ctx, inflight, a)
		}()
	}
}

// converse holds one conversation to its end, and reports whether the
// user may start another (false once the row stops dispatching). first,
// for an open-loop conversation, is its arrival; nil for a closed-loop
// user, whose turns are due when it is ready.
func (rr *rowRun) converse(ctx, inflight context.Context, first *arrival) bool {
	var cv *conversation
	for {
		pass, probe := rr.gate.wait(ctx, rr.stopped)
		if !pass {
			rr.stopIfUnreachable()
			return false
		}
		t, ok := rr.take(time.Now())
		if !ok {
			rr.gate.done(probe)
			return false
		}
		if cv == nil {
			cv = rr.newConversation(t.seq)
		}
		cl, err := rr.prepareTurn(t, cv)
		if err != nil {
			rr.gate.done(probe)
			rr.fail(err)
			return false
		}
		cl.probe = probe
		cl.rec.ScheduledNS = time.Since(rr.start).Nanoseconds()
		if first != nil && cv.turn == 0 {
			cl.rec.ScheduledNS, cl.rec.QueueNS = first.scheduled.Nanoseconds(), first.queued.Nanoseconds()
		}
		reply := &replySink{}
		rr.fire(withReply(inflight, reply), cl)
		if cl.rec.Error != nil || len(reply.b) == 0 {
			return true // nothing to carry on from: the next conversation
		}
		rr.wl.replied(cv, string(reply.b))
		if cv.turn >= cv.turns {
			return true
		}
		if !rr.think(ctx) {
			return false
		}
	}
}

// think waits out the row's think time between a reply and the next turn;
// false when the row stopped meanwhile.
func (rr *rowRun) think(ctx context.Context) bool {
	d := rr.row.Conversation.ThinkTime.D()
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-rr.stopped:
	}
	return false
}

// replySink collects the text of a turn's answer (its content, not its
// reasoning, which chat APIs ask clients not to send back), for the next
// turn's history. The client fills it when the request's context holds
// one.
type replySink struct{ b []byte }

func (s *replySink) add(parts ...[]byte) {
	for _, p := range parts {
		s.b = append(s.b, p...)
	}
}

type replyKey struct{}

func withReply(ctx context.Context, s *replySink) context.Context {
	return context.WithValue(ctx, replyKey{}, s)
}

// replyOf is the sink of a request's context, or nil.
func replyOf(ctx context.Context) *replySink {
	s, _ := ctx.Value(replyKey{}).(*replySink)
	return s
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
