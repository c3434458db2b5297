package runner

import (
	"context"
	"sync"
	"time"
)

// prefillGate caps the requests waiting for their first token
// (prefill_concurrency, AIPerf's --prefill-concurrency). A request takes a
// slot just before it is sent and gives it back when its first token
// arrives, or when it ends without one (an error, a non-streamed
// response): at most K requests are ever between their send and their
// first token, which bounds the prefill work queued on the server, while
// requests past their first token decode freely.
//
// The wait for a slot is the request's queue time (Record.QueueNS), as
// for max_concurrency: a closed-loop user's send is late by it, and an
// open-loop arrival's too, counted from its due time, so dispatch lag
// stays the client's own lateness and the gate's is reported apart.
type prefillGate struct {
	slots chan struct{}
}

// newPrefillGate returns a gate of k slots, or nil for no cap.
func newPrefillGate(k int) *prefillGate {
	if k <= 0 {
		return nil
	}
	return &prefillGate{slots: make(chan struct{}, k)}
}

// acquire waits for a slot; false when ctx or stop ends the wait first
// (stop may be nil). waited reports whether a slot was not free at once.
func (g *prefillGate) acquire(ctx context.Context, stop <-chan struct{}) (ok, waited bool) {
	select {
	case g.slots <- struct{}{}:
		return true, false
	default:
	}
	select {
	case g.slots <- struct{}{}:
		return true, true
	case <-ctx.Done():
		return false, true
	case <-stop:
		return false, true
	}
}

// releaser returns the function that gives a held slot back, once however
// often it is called: at the first token, and again when the request ends.
func (g *prefillGate) releaser() func() {
	var once sync.Once
	return func() { once.Do(func() { <-g.slots }) }
}

// admitPrefill holds a closed-loop user's request until the prefill gate
// has a slot, recording the wait as its queue time; false when ctx ends
// the wait (the request is then not sent). It does not give up when the
// row stops dispatching: the request already holds its ticket, and a
// request-count row must send every ticket it handed out.
func (rr *rowRun) admitPrefill(ctx context.Context, cl *call) bool {
	if rr.prefill == nil {
		return true
	}
	q := time.Now()
	ok, waited := rr.prefill.acquire(ctx, nil)
	if !ok {
		return false
	}
	if waited {
		cl.Rec.QueueNS = time.Since(q).Nanoseconds()
	}
	cl.release = rr.prefill.releaser()
	return true
}
