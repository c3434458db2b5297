package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// checkPool verifies a cluster's invariants: block reference counts equal
// the blocks requests hold and never go negative, the free queue holds
// exactly the unreferenced blocks, the prefix-cache map and block hashes
// agree, no replica idles while it has work, running requests always need
// a token, and waiting requests hold no blocks.
func checkPool(t *testing.T, c *Cluster, reqs []*Request, where string) {
	t.Helper()
	for _, rep := range c.replicas {
		p := rep.pool
		want := make([]int32, p.capacity)
		for _, r := range reqs {
			if r.replica != rep.idx {
				continue
			}
			for _, b := range r.blocks {
				want[b]++
			}
		}
		free := 0
		for b := range p.capacity {
			if p.refs[b] < 0 {
				t.Fatalf("%s: negative ref on block %d", where, b)
			}
			if p.refs[b] != want[b] {
				t.Fatalf("%s: block %d refs %d, requests hold %d", where, b, p.refs[b], want[b])
			}
			queued := p.prev[b] != -1
			if (p.refs[b] == 0) != queued {
				t.Fatalf("%s: block %d refs %d queued %v", where, b, p.refs[b], queued)
			}
			if p.refs[b] == 0 {
				free++
			}
		}
		// walk queue
		n := 0
		for b := p.next[p.head]; b != p.head; b = p.next[b] {
			n++
			if n > p.capacity {
				t.Fatalf("%s: queue cycle", where)
			}
		}
		if n != free || p.free != free {
			t.Fatalf("%s: free %d, queue %d, refs0 %d", where, p.free, n, free)
		}
		for h, b := range p.cached {
			if p.hash[b] != h {
				t.Fatalf("%s: cached[%x]=%d but hash %x", where, h, b, p.hash[b])
			}
		}
		for b := range p.capacity {
			if h := p.hash[b]; h != 0 && p.cached[h] != int32(b) {
				t.Fatalf("%s: block %d has hash not in map", where, b)
			}
		}
		if !rep.busy && len(rep.waiting)+len(rep.running) > 0 {
			t.Fatalf("%s: replica %d idle with %d waiting %d running", where, rep.idx, len(rep.waiting), len(rep.running))
		}
		for _, r := range rep.running {
			if r.state != stateRunning {
				t.Fatalf("%s: running list has state %d", where, r.state)
			}
			if needed(r) <= 0 && !(r.promptLen == 0 && r.generated == 0) {
				t.Fatalf("%s: running request needs %d (prompt %d, computed %d, generated %d)", where, needed(r), r.promptLen, r.computed, r.generated)
			}
		}
		for _, r := range rep.waiting {
			if r.state != stateWaiting || len(r.blocks) != 0 {
				t.Fatalf("%s: waiting request state %d blocks %d", where, r.state, len(r.blocks))
			}
		}
	}
}

// TestRandomWorkloadInvariants drives random configurations (small KV
// caches, tiny budgets and blocks, several replicas, caching on and off,
// front-end costs, instant mode) with random prompts that share prefixes,
// random cancels in every state, including from inside Deliver, and checks
// checkPool after every event, then that every request not canceled got
// all its tokens in order and that everything was released.
func TestRandomWorkloadInvariants(t *testing.T) {
	seeds := uint64(30)
	if testing.Short() || raceEnabled {
		seeds = 8
	}
	var totalPre uint64
	defer func() { t.Logf("%d seeds, %d preemptions", seeds, totalPre) }()
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 7))
		cfg := smallKV(t, 512+rng.IntN(4096))
		cfg.MaxModelLen = 512
		cfg.MaxNumSeqs = 1 + rng.IntN(8)
		cfg.MaxNumBatchedTokens = 1 + rng.IntN(600)
		cfg.BlockSize = []int{1, 4, 16}[rng.IntN(3)]
		cfg.Replicas = 1 + rng.IntN(3)
		cfg.PrefixCaching = rng.IntN(4) != 0
		if rng.IntN(2) == 0 {
			cfg.FrontEnd = FrontEnd{RequestLatency: time.Duration(rng.IntN(3)) * time.Millisecond, TokenCost: time.Duration(rng.IntN(3)) * 10 * time.Millisecond}
		}
		cfg.Instant = rng.IntN(8) == 0
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var reqs []*Request
		canceled := map[*Request]bool{}
		got := map[*Request]int{}
		for range 60 {
			plen := rng.IntN(300)
			out := 1 + rng.IntN(512-plen-1)
			if rng.IntN(3) == 0 {
				out = 1 + rng.IntN(min(20, 512-plen-1))
			}
			prompt := make([]int, plen)
			base := rng.IntN(3) * 1000
			for i := range prompt {
				prompt[i] = base + i
				if i > 100 && rng.IntN(50) == 0 {
					prompt[i] = rng.IntN(100000)
				}
			}
			r := &Request{Prompt: prompt, Output: out}
			r.Deliver = func(k int, at time.Duration) {
				if canceled[r] {
					t.Fatalf("delivered after cancel")
				}
				if k != got[r] {
					t.Fatalf("out of order %d %d", k, got[r])
				}
				got[r]++
				if rng.IntN(200) == 0 {
					v := reqs[rng.IntN(len(reqs))]
					c.Cancel(v)
					canceled[v] = true
				}
			}
			c.Submit(r)
			reqs = append(reqs, r)
			steps := rng.IntN(40)
			for i := 0; i < steps && c.Step(); i++ {
				checkPool(t, c, reqs, fmt.Sprintf("seed %d", seed))
				if rng.IntN(30) == 0 {
					v := reqs[rng.IntN(len(reqs))]
					c.Cancel(v)
					canceled[v] = true
					if rng.IntN(2) == 0 {
						c.Cancel(v)
					}
					checkPool(t, c, reqs, fmt.Sprintf("seed %d after cancel", seed))
				}
			}
		}
		n := 0
		for c.Step() {
			n++
			if n > 10_000_000 {
				t.Fatalf("seed %d: livelock", seed)
			}
			checkPool(t, c, reqs, fmt.Sprintf("seed %d drain", seed))
		}
		for _, r := range reqs {
			if !canceled[r] && got[r] != r.Output {
				t.Fatalf("seed %d: request got %d of %d tokens, state %d", seed, got[r], r.Output, r.state)
			}
		}
		st := c.Stats()
		totalPre += st.Preemptions
		if st.Running != 0 || st.Waiting != 0 || st.KVUsage != 0 || st.OpenStreams != 0 {
			t.Fatalf("seed %d: after drain %+v", seed, st)
		}
	}
}
