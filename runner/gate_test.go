package runner

import (
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/sim"
)

// TestGateBacksOffAndTrips drives the gate by hand: the first failure
// closes it, one probe at a time goes after a growing wait, a connection
// opens it, and an outage longer than giveUp trips it.
func TestGateBacksOffAndTrips(t *testing.T) {
	g := newGate(time.Hour, 1)
	if ok, probe := g.open(); !ok || probe {
		t.Fatal("a fresh gate is not open")
	}
	g.failed(false)
	if ok, _ := g.open(); ok {
		t.Fatal("open right after a failure: no backoff")
	}
	// The first wait is half to all of backoffBase.
	time.Sleep(backoffBase + 5*time.Millisecond)
	ok, probe := g.open()
	if !ok || !probe {
		t.Fatalf("after the backoff: open %v, probe %v; want one probe", ok, probe)
	}
	if ok, _ := g.open(); ok {
		t.Fatal("a second request went while a probe was out")
	}
	// Each failure doubles the wait, up to backoffMax: after 7 it is
	// capped, 1 to 2 s.
	for range 5 {
		g.failed(true)
		g.mu.Lock()
		g.next = time.Now() // skip the wait, keep the count
		g.mu.Unlock()
		if ok, probe := g.open(); !ok || !probe {
			t.Fatal("no probe after the wait")
		}
	}
	g.failed(true)
	g.mu.Lock()
	wait := time.Until(g.next)
	g.mu.Unlock()
	if wait < backoffMax/2-50*time.Millisecond || wait > backoffMax {
		t.Errorf("wait after 7 failures %v; want %v to %v", wait, backoffMax/2, backoffMax)
	}
	// A connection opens it for everyone, waiting or not.
	done := make(chan bool)
	go func() {
		ok, _ := g.wait(context.Background(), nil)
		done <- ok
	}()
	time.Sleep(20 * time.Millisecond)
	g.connected()
	select {
	case ok := <-done:
		if !ok {
			t.Error("the waiter was refused")
		}
	case <-time.After(time.Second):
		t.Fatal("the waiter was not woken by the connection")
	}

	short := newGate(30*time.Millisecond, 2)
	if short.failed(false) {
		t.Fatal("tripped on the first failure")
	}
	time.Sleep(40 * time.Millisecond)
	if !short.failed(false) {
		t.Fatal("no trip after giveUp without a connection")
	}
	if ok, _ := short.wait(context.Background(), nil); ok {
		t.Error("a tripped gate let a request through")
	}
}

// TestGateOutageBurst covers the moment a loaded server dies: the
// requests in flight all fail at once. That burst is one failure for the
// backoff, not hundreds (which would hold the first probe back for
// backoffMax), and however the waits grow, a probe goes at giveUp, so the
// run gives up on time and not a backoff later.
func TestGateOutageBurst(t *testing.T) {
	g := newGate(time.Hour, 3)
	for range 500 {
		g.failed(false)
	}
	g.mu.Lock()
	wait := time.Until(g.next)
	g.mu.Unlock()
	if wait > backoffBase {
		t.Errorf("first probe %v away after a burst of 500 failures; want at most %v", wait, backoffBase)
	}

	const giveUp = 300 * time.Millisecond
	g = newGate(giveUp, 4)
	g.failed(false)
	for range 10 { // a long outage's worth of probes, their waits at the cap
		g.mu.Lock()
		g.next = time.Now()
		g.mu.Unlock()
		if ok, probe := g.open(); !ok || !probe {
			t.Fatal("no probe after the wait")
		}
		g.failed(true)
	}
	g.mu.Lock()
	next, deadline := g.next, g.since.Add(giveUp)
	g.mu.Unlock()
	if next.After(deadline) {
		t.Fatalf("next probe %v after the outage's giveUp deadline", next.Sub(deadline))
	}
	time.Sleep(time.Until(deadline) + 5*time.Millisecond)
	ok, probe := g.open()
	if !ok || !probe {
		t.Fatal("no probe at giveUp")
	}
	if !g.failed(true) {
		t.Error("the probe at giveUp failed and the gate did not trip")
	}
}

// TestServerDiesMidRow kills the server under a closed-loop row: the
// users back off instead of hammering, the run stops with "server
// unreachable" within about unreachable_after, and the records stay few.
// An open-loop row does the same, sending no arrival while the gate is
// closed. The server dies once it has answered a number of the row's
// requests, not at a time, so that the row is under way however slowly
// the run before it started (the race detector on a busy machine takes
// longer than a fixed delay to reach the row).
func TestServerDiesMidRow(t *testing.T) {
	for _, tt := range []struct {
		load   string
		closed bool
	}{{"concurrency: 8", true}, {"rate: {per_second: 2000}", false}} {
		load := tt.load
		t.Run(load, func(t *testing.T) {
			s, err := sim.New(sim.Config{TTFT: 2 * time.Millisecond, ITL: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			ln, err := sim.Listen("127.0.0.1:0", false)
			if err != nil {
				t.Fatal(err)
			}
			// The server dies as a process does, at once: once it has
			// answered enough requests, no byte more leaves it, the
			// listener closes, and every connection breaks.
			const answered = 100
			dl := &dyingListener{Listener: ln}
			var n atomic.Int64
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				s.ServeHTTP(w, r)
				if r.URL.Path == "/v1/chat/completions" && n.Add(1) == answered {
					dl.die()
				}
			})}
			go func() { _ = srv.Serve(dl) }()
			defer srv.Close()
			dir := t.TempDir()
			p := planIn(t, dir, `server: {urls: [http://`+ln.Addr().String()+`/v1], unreachable_after: 500ms}
rows:
  - {id: doomed, requests: 1000000, `+load+`, input_tokens: 16, output_tokens: 4}
  - {id: after, requests: 10, concurrency: 1, input_tokens: 16, output_tokens: 4}
`, nil)
			start := time.Now()
			res, err := Run(context.Background(), p, Options{Out: filepath.Join(dir, "run")})
			took := time.Since(start)
			if !errors.Is(err, ErrServerUnreachable) {
				t.Fatalf("error %v; want ErrServerUnreachable", err)
			}
			if took > 5*time.Second {
				t.Errorf("the run took %v to give up; want about 0.8 s", took)
			}
			if res == nil || len(res.Summary.Rows) != 2 || res.Summary.Rows[0].Status != metrics.RowFailed || res.Summary.Rows[1].Status != metrics.RowNotRun {
				t.Fatalf("summary %+v; want the row failed and the next not run", res.Summary)
			}
			recs := records(t, res.Dir, "doomed")
			connect, good := 0, 0
			// learnt is when the first connection failure came back
			// (the row's clock): the gate closes then.
			learnt := int64(math.MaxInt64)
			for _, r := range recs {
				switch {
				case r.Error == nil:
					good++
				case r.Error.Class == metrics.ErrConnect:
					connect++
					learnt = min(learnt, r.StartNS+r.EndNS)
				}
			}
			if good < answered {
				t.Errorf("%d good records; the server answered %d before it died", good, answered)
			}
			if tt.closed {
				// The users in flight, then one probe at a time.
				if connect > 40 {
					t.Errorf("%d connection failures recorded (of %d records): the users hammered a dead server", connect, len(recs))
				}
			} else {
				// The arrivals sent before the first failure came back
				// depend on how fast this machine is (hundreds under the
				// race detector); after it, only probes may go. An
				// arrival is let through or not when it comes due, or
				// later when the dispatcher lags, so one due well after
				// the gate closed found it closed. Without the gate the
				// rest of unreachable_after would add hundreds.
				after := 0
				for _, r := range recs {
					if r.Error != nil && r.Error.Class == metrics.ErrConnect && r.ScheduledNS > learnt+(100*time.Millisecond).Nanoseconds() {
						after++
					}
				}
				if after > 20 {
					t.Errorf("%d connection failures due more than 100 ms after the first one came back (of %d, %d records): the dispatcher sent through a closed gate", after, connect, len(recs))
				}
				if row := res.Summary.Rows[0]; row.Requests.Unsent < 100 {
					t.Errorf("%d arrivals held back at the closed gate; want the outage's (hundreds)", row.Requests.Unsent)
				}
			}
			if m, _ := res.Dir.Manifest(); m.Status != "failed" || m.Error == "" {
				t.Errorf("manifest status %q error %q", m.Status, m.Error)
			}
		})
	}
}

// dyingListener hands out connections until die, which closes it and
// every connection it handed out, and makes their writes fail from then
// on: a server process gone at once, with no response finished after.
type dyingListener struct {
	net.Listener
	mu    sync.Mutex
	dead  bool
	conns []*dyingConn
}

type dyingConn struct {
	net.Conn
	l *dyingListener
}

func (l *dyingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	dc := &dyingConn{Conn: c, l: l}
	l.conns = append(l.conns, dc)
	return dc, nil
}

func (l *dyingListener) die() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead {
		return
	}
	l.dead = true
	_ = l.Listener.Close()
	for _, c := range l.conns {
		_ = c.Conn.Close()
	}
}

func (c *dyingConn) Write(b []byte) (int, error) {
	c.l.mu.Lock()
	dead := c.l.dead
	c.l.mu.Unlock()
	if dead {
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}
