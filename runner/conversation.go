package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/infermatrix/infermatrix/protocol"
	"github.com/infermatrix/infermatrix/workload"
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

// conversation is one user's chat in progress: its number in the row,
// its id in the run's records, and the history the workload builds its
// turns from.
type conversation struct {
	n  int64
	id string
	*workload.Conversation
}

// nextConversation numbers the row's next conversation. A conversation's
// number fixes its turns (its prompt, lengths and tag: newConversation),
// and under run --shard I/N conversation k belongs to shard k mod N + 1,
// kept whole there: shard I numbers its conversations I-1, I-1+N, ...,
// so that the shards' conversations together are the unsharded row's.
func (rr *rowRun) nextConversation() int64 {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.convs++
	m := rr.convs - 1
	if rr.shard.on() {
		return m*int64(rr.shard.Count) + int64(rr.shard.Index-1)
	}
	return m
}

// conversationID is unique in the run, like a record's id: the run, the
// row's index, the trial of a repeated row, and the conversation's number.
// A shard's conversations have numbers of their own (nextConversation):
// the ids of the shards' conversations do not collide in a merge, and
// match the unsharded run's but for the run id.
func (rr *rowRun) conversationID(n int64) string {
	if rr.trial > 0 {
		return fmt.Sprintf("%s-%d-t%d-c%d", rr.runID, rr.index, rr.trial, n)
	}
	return fmt.Sprintf("%s-%d-c%d", rr.runID, rr.index, n)
}

// convSeq is the sequence number conversation n's first turn is drawn
// from: after the warm prefixes, one per conversation, whatever requests
// the row sent before it.
func (rr *rowRun) convSeq(n int64) int64 { return rr.loadSeq() + n }

// openConversation starts the conversation an arrival opens (an open
// loop's, numbered by the global schedule), or, for a closed-loop user
// (first nil), the user's next one.
func (rr *rowRun) openConversation(first *arrival) *conversation {
	if first != nil {
		return rr.newConversation(first.conv)
	}
	return rr.newConversation(rr.nextConversation())
}

// newConversation starts conversation number n.
func (rr *rowRun) newConversation(n int64) *conversation {
	return &conversation{n: n, id: rr.conversationID(n), Conversation: rr.wl.NewConversation(n, rr.convSeq(n))}
}

// prepareTurn builds the request of the conversation's next turn.
func (rr *rowRun) prepareTurn(t ticket, cv *conversation) (*call, error) {
	t.seq = rr.promptSeq(t.seq)
	rec := rr.newRecord(t, 0)
	turn := cv.Turn()
	rec.ConversationID, rec.Turn = cv.id, &turn
	p := rr.wl.TurnPrompt(cv.Conversation, rr.convSeq(cv.n))
	body, err := rr.wl.Body(p, rr.row.Streaming)
	if err != nil {
		return nil, err
	}
	rec.InputTokens.Requested = p.Requested
	rec.InputTokens.Client = p.InTokens
	rec.SharedTokens = p.Shared
	rec.OutputTokens.Requested = p.MaxTokens
	if rr.templateTokens != nil {
		rec.TemplateTokens = rr.templateTokens(body)
	}
	return &call{Call: protocol.Call{URL: rec.URL, Body: body, Rec: rec}}, nil
}

// conversationLoop runs the row's users, each holding one conversation
// after another. It returns when dispatching stops (users still finish the
// turn they are in, tracked by wg; none starts another).
func (rr *rowRun) conversationLoop(ctx, inflight context.Context, wg *sync.WaitGroup) {
	for w := 0; w < rr.shard.split(rr.row.Load.Concurrency); w++ {
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
// turn's schedule and queue time. conv is its number, given in arrival
// order, which goroutines waiting for slots would not keep.
type arrival struct {
	scheduled, queued time.Duration
	conv              int64
}

// conversationArrivals starts a conversation at each arrival of the row's
// rate, until dispatching stops. Each runs its turns in a goroutine of its
// own, tracked by wg.
func (rr *rowRun) conversationArrivals(ctx, inflight context.Context, wg *sync.WaitGroup) {
	l := rr.row.Load
	arr := newArrivals(l.Rate, l.Arrival, l.Burstiness, rr.wl.Seed())
	// A shard holds every N-th conversation of the row's global arrivals,
	// at its global time (shard.go).
	next := rr.kept(func() (time.Duration, bool) { return arr.next(), true })
	var slots chan struct{}
	if c := rr.maxConcurrency(); c > 0 {
		slots = make(chan struct{}, c)
	}
	pace := newPacer()
	defer pace.close()
	rr.startLoadClock()
	for {
		at, _ := next()
		due := rr.loadStart.Add(at)
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
		a := &arrival{scheduled: due.Sub(rr.start), conv: rr.nextConversation()}
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
			cv = rr.openConversation(first)
		}
		cl, err := rr.prepareTurn(t, cv)
		if err != nil {
			rr.gate.done(probe)
			rr.fail(err)
			return false
		}
		cl.probe = probe
		cl.Rec.ScheduledNS = time.Since(rr.start).Nanoseconds()
		if first != nil && cv.Turn() == 0 {
			cl.Rec.ScheduledNS, cl.Rec.QueueNS = first.scheduled.Nanoseconds(), first.queued.Nanoseconds()
		}
		reply := &protocol.Reply{}
		rr.fire(protocol.WithReply(inflight, reply), cl)
		if cl.Rec.Error != nil || reply.Text() == "" {
			return true // nothing to carry on from: the next conversation
		}
		rr.wl.Replied(cv.Conversation, reply.Text())
		if cv.Over() {
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
