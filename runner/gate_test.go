package runner

import (
	"context"
	"errors"
	"path/filepath"
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

// TestServerDiesMidRow kills the server under a closed-loop row: the
// users back off instead of hammering, the run stops with "server
// unreachable" within about unreachable_after, and the records stay few.
// An open-loop row does the same, sending no arrival while the gate is
// closed.
func TestServerDiesMidRow(t *testing.T) {
	for _, tt := range []struct {
		load string
		// most is how many connection failures may be recorded: closed
		// loop, the users in flight and a probe at a time; open loop, the
		// arrivals dispatched before the first failure came back (a few
		// tens of ms at 2000 a second, more under the race detector)
		// and the probes. Without the gate the open loop alone would
		// record 2000 a second for all of unreachable_after.
		most int
	}{{"concurrency: 8", 40}, {"rate: {per_second: 2000}", 400}} {
		load := tt.load
		t.Run(load, func(t *testing.T) {
			inst, err := sim.Start(sim.Config{TTFT: 2 * time.Millisecond, ITL: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			p := planIn(t, dir, `server: {urls: [`+inst.BaseURL+`], unreachable_after: 500ms}
rows:
  - {id: doomed, requests: 1000000, `+load+`, input_tokens: 16, output_tokens: 4}
  - {id: after, requests: 10, concurrency: 1, input_tokens: 16, output_tokens: 4}
`, nil)
			time.AfterFunc(300*time.Millisecond, func() { inst.Close() })
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
			connect := 0
			for _, r := range recs {
				if r.Error != nil && r.Error.Class == metrics.ErrConnect {
					connect++
				}
			}
			// Before the kill: a few hundred good requests. After it:
			// those in flight, then one probe at a time with backoff.
			if connect > tt.most {
				t.Errorf("%d connection failures recorded (of %d records): the client hammered a dead server", connect, len(recs))
			}
			if m, _ := res.Dir.Manifest(); m.Status != "failed" || m.Error == "" {
				t.Errorf("manifest status %q error %q", m.Status, m.Error)
			}
		})
	}
}
