package runner

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// Backoff bounds while the server refuses connections: the first retry
// waits about backoffBase, each further failure doubles the wait, up to
// backoffMax; each wait is drawn from its upper half ("equal jitter"), so
// that many users do not knock in step.
const (
	backoffBase = 50 * time.Millisecond
	backoffMax  = 2 * time.Second
)

// gate keeps a row from hammering a server that refuses connections.
//
// A benchmark whose server dies mid-row must not turn into a tight loop of
// failed connections: a closed-loop user whose request fails at once sends
// the next at once, thousands a second, each a record on disk. So the first
// connection failure closes the gate: from then on, one request at a time
// may try (a probe), after an exponentially growing, jittered wait; the
// others wait at the gate. The first fresh connection, or the first
// response byte on any, opens it again (a kept-alive connection handed out
// proves nothing: a dead server's idle connections are handed out too).
// When nothing has connected for giveUp, the gate trips: the row stops,
// and the run stops with "server unreachable since T".
type gate struct {
	giveUp time.Duration

	mu       sync.Mutex
	down     bool
	since    time.Time // the first failure of the current outage
	failures int       // consecutive failures
	next     time.Time // when the next probe may go
	probing  bool      // a probe is in flight
	tripped  bool
	changed  chan struct{} // closed and replaced at every change of state
	rng      *rand.Rand
}

func newGate(giveUp time.Duration, seed uint64) *gate {
	return &gate{giveUp: giveUp, changed: make(chan struct{}), rng: rand.New(rand.NewPCG(seed, 0x6a7e))}
}

// notify wakes every waiter; g.mu must be held.
func (g *gate) notify() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// wait blocks until a request may be sent, and reports whether one may:
// false when ctx ends, stop is closed, or the gate tripped. probe says the
// request is the outage's probe, which must report back with connected or
// failed.
func (g *gate) wait(ctx context.Context, stop <-chan struct{}) (ok, probe bool) {
	for {
		g.mu.Lock()
		if g.tripped {
			g.mu.Unlock()
			return false, false
		}
		if !g.down {
			g.mu.Unlock()
			return true, false
		}
		now := time.Now()
		if !g.probing && !now.Before(g.next) {
			g.probing = true
			g.mu.Unlock()
			return true, true
		}
		changed := g.changed
		var t *time.Timer
		var timer <-chan time.Time
		if !g.probing {
			t = time.NewTimer(g.next.Sub(now))
			timer = t.C
		}
		g.mu.Unlock()
		quit := false
		select {
		case <-ctx.Done():
			quit = true
		case <-stop:
			quit = true
		case <-changed:
		case <-timer:
		}
		if t != nil {
			t.Stop()
		}
		if quit {
			return false, false
		}
	}
}

// done ends a probe that neither connected nor failed to connect (a
// request that failed some other way before a connection was reported),
// so that another may go.
func (g *gate) done(probe bool) {
	if !probe {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.probing {
		g.probing = false
		g.notify()
	}
}

// open reports, without waiting, whether a request may go now: the
// open-loop dispatcher's question, since an arrival that finds the server
// down is not sent later, out of its time. probe is as for wait.
func (g *gate) open() (ok, probe bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.tripped:
		return false, false
	case !g.down:
		return true, false
	case !g.probing && !time.Now().Before(g.next):
		g.probing = true
		return true, true
	}
	return false, false
}

// connected reports that a request got a connection: the server is up.
func (g *gate) connected() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.down {
		g.down, g.probing, g.failures = false, false, 0
		g.notify()
	}
}

// failed reports that a request could not connect. It returns whether the
// gate tripped: no connection for giveUp.
//
// Only the outage's first failure and its probes' failures set the wait:
// the requests that were already in flight when the server died fail in a
// burst, and counting each as a failed retry would push the first probe
// to backoffMax at once. And no wait runs past giveUp from the outage's
// start, so that the attempt that decides whether the gate trips goes then,
// not up to backoffMax later.
func (g *gate) failed(probe bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	first := !g.down
	if first {
		g.down, g.since, g.failures = true, now, 0
	}
	if probe {
		g.probing = false
	}
	if first || probe {
		g.failures++
		wait := backoffBase << min(g.failures-1, 16)
		wait = min(wait, backoffMax)
		wait = wait/2 + time.Duration(g.rng.Int64N(int64(wait/2)+1))
		g.next = now.Add(wait)
	}
	if !g.tripped && now.Sub(g.since) >= g.giveUp {
		g.tripped = true
	}
	if deadline := g.since.Add(g.giveUp); !g.tripped && g.next.After(deadline) {
		g.next = deadline
	}
	g.notify()
	return g.tripped
}

// outage returns when the current outage began and whether the gate
// tripped on it.
func (g *gate) outage() (since time.Time, tripped bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.since, g.tripped
}
