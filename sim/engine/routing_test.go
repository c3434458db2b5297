package engine

import (
	"testing"
	"time"
)

// TestRouteWeighsWaiting: a replica with one request waiting and one
// running (score 5) loses to one with three running (score 3), as vLLM's
// waiting × 4 + running score decides, where counting requests would pick
// the first.
func TestRouteWeighsWaiting(t *testing.T) {
	cfg := preset(t, "llama-3.1-8b-h100").PhysicsOnly()
	cfg.Replicas = 2
	c := newCluster(t, cfg)
	c.lb[0] = lbCount{waiting: 1, running: 1}
	c.lb[1] = lbCount{running: 3}
	if got := c.route().idx; got != 1 {
		t.Fatalf("routed to replica %d, want 1 (score 3 against 5)", got)
	}
	// The front end counts what it sent as waiting: replica 1 now scores
	// 7, so the next request goes to replica 0.
	if got := c.route().idx; got != 0 {
		t.Fatalf("second request routed to replica %d, want 0 (score 5 against 7)", got)
	}
}

// TestRouteBurstSpreads: requests arriving together, before any statistics
// are published, spread evenly over the replicas through the front end's
// own counts.
func TestRouteBurstSpreads(t *testing.T) {
	cfg := preset(t, "llama-3.1-8b-h100").PhysicsOnly()
	cfg.Replicas = 4
	c := newCluster(t, cfg)
	var reqs []*trace
	for i := range 12 {
		reqs = append(reqs, submit(c, ids(i*1000, 100), 50))
	}
	c.RunUntil(0)
	per := make([]int, cfg.Replicas)
	for _, r := range reqs {
		per[r.Info().Replica]++
	}
	for i, n := range per {
		if n != 3 {
			t.Fatalf("burst of 12 on 4 replicas: %v requests per replica, want 3 each (replica %d)", per, i)
		}
	}
}

// TestRouteStaleStatistics: the front end routes on counts published every
// StatsInterval. Replica 0 empties at 20 ms, but until the next publication
// at 100 ms the front end still sees its two requests and sends a new one
// to the busier replica 1; after it, new requests go to replica 0. With
// statistics published continuously the same request goes to replica 0 at
// once.
func TestRouteStaleStatistics(t *testing.T) {
	for _, interval := range []time.Duration{0, time.Nanosecond} {
		cfg := preset(t, "llama-3.1-8b-h100").PhysicsOnly()
		cfg.Replicas = 2
		cfg.StatsInterval = interval
		c := newCluster(t, cfg)
		a := submit(c, ids(0, 100), 1000)
		b := submit(c, ids(10_000, 100), 1000)
		d := submit(c, ids(20_000, 100), 1000)
		c.RunUntil(0)
		if a.Info().Replica != 0 || b.Info().Replica != 1 || d.Info().Replica != 0 {
			t.Fatalf("burst routed to %d, %d, %d; want 0, 1, 0", a.Info().Replica, b.Info().Replica, d.Info().Replica)
		}
		c.RunUntil(20 * time.Millisecond)
		c.Cancel(a.Request)
		c.Cancel(d.Request)
		late := submit(c, ids(30_000, 100), 10)
		c.RunUntil(c.Now())
		want := 1 // stale: replica 0 still looks loaded
		if interval == time.Nanosecond {
			want = 0
		}
		if got := late.Info().Replica; got != want {
			t.Errorf("stats interval %v: a request at 20 ms went to replica %d, want %d", c.Config().StatsInterval, got, want)
		}
		c.RunUntil(150 * time.Millisecond)
		after := submit(c, ids(40_000, 100), 10)
		c.RunUntil(c.Now())
		if got := after.Info().Replica; got != 0 {
			t.Errorf("stats interval %v: a request at 150 ms went to replica %d, want the idle replica 0", c.Config().StatsInterval, got)
		}
	}
}
