package engine

import (
	"math"
	"testing"
	"time"
)

// TestAccountingBandwidthBound runs one short-prompt request through a
// physics-only Llama 8B on an H100, where every step is bandwidth-bound: the
// replica is busy from admission to its last token, the memory bus is busy
// η_bw of that time (bytes ÷ peak bandwidth over bytes ÷ (η_bw × peak)), and
// the compute time is the FLOPs over the peak.
func TestAccountingBandwidthBound(t *testing.T) {
	cfg := preset(t, "llama-3.1-8b-h100").PhysicsOnly()
	c := newCluster(t, cfg)
	const prompt, output = 16, 40
	tr := submit(c, ids(0, prompt), output)
	drain(c)
	st := c.Stats()
	if len(st.Replicas) != 1 {
		t.Fatalf("%d replica stats, want 1", len(st.Replicas))
	}
	r := st.Replicas[0]
	last := tr.at[output-1]
	if r.Busy != last {
		t.Errorf("busy %v, want the time to the last token %v (steps back to back from admission at 0)", r.Busy, last)
	}
	if got, want := float64(r.MemoryTime)/float64(r.Busy), cfg.Efficiency.Bandwidth; math.Abs(got-want) > 1e-6 {
		t.Errorf("memory time ÷ busy %.7f, want η_bw %v", got, want)
	}
	// Linear FLOPs dominate: 2 × non-embedding params per computed token
	// (the prompt, then one per decode step) plus the logits of each of
	// the output tokens sampled; attention adds under 1% here.
	linear := (cfg.Model.LinearFLOPsPerToken()*float64(prompt+output-1) + cfg.Model.LogitsFLOPs()*output) / cfg.GPU.PeakFLOPs(cfg.Precision)
	if got := r.ComputeTime.Seconds(); got < linear || got > 1.01*linear {
		t.Errorf("compute time %.6fs, want %.6fs plus attention's under 1%%", got, linear)
	}
	// Idle time adds nothing.
	c.RunUntil(c.Now() + time.Second)
	if again := c.Stats().Replicas[0]; again.Busy != r.Busy || again.MemoryTime != r.MemoryTime || again.ComputeTime != r.ComputeTime {
		t.Errorf("an idle second moved the accounting from %+v to %+v", r, again)
	}
}

// TestAccountingMidStep checks that the step in flight counts up to now, in
// proportion: the accounting is continuous, so a window ending mid-step
// sees the part of the step inside it.
func TestAccountingMidStep(t *testing.T) {
	cfg := preset(t, "llama-3.1-8b-h100").PhysicsOnly()
	c := newCluster(t, cfg)
	submit(c, ids(0, 16), 3)
	c.Step() // admission: the first step starts at 0
	end, ok := c.Next()
	if !ok || end <= 0 {
		t.Fatalf("no step in flight after admission (next %v, %v)", end, ok)
	}
	c.RunUntil(end / 2)
	r := c.Stats().Replicas[0]
	if r.Busy != end/2 {
		t.Errorf("busy %v halfway through a step of %v, want %v", r.Busy, end, end/2)
	}
	c.RunUntil(end)
	full := c.Stats().Replicas[0]
	if full.Busy != end {
		t.Errorf("busy %v at the step's end, want %v", full.Busy, end)
	}
	if half := float64(r.MemoryTime) / float64(full.MemoryTime); math.Abs(half-0.5) > 1e-6 {
		t.Errorf("memory time halfway is %.7f of the step's, want 0.5", half)
	}
}

// TestAccountingMemoryFlat checks the memory a replica holds: weights,
// reserve and the whole KV pool, allocated at start, so the same idle and
// under load.
func TestAccountingMemoryFlat(t *testing.T) {
	cfg := preset(t, "llama-3.1-8b-h100")
	cfg.Replicas = 2
	c := newCluster(t, cfg)
	want := cfg.Model.WeightBytes(cfg.Precision) + cfg.ReserveBytes + float64(cfg.KVCapacity())*cfg.Model.KVBytesPerToken(cfg.Precision)
	idle := c.Stats()
	for i := range 8 {
		submit(c, ids(i*1000, 500), 20)
	}
	c.RunUntil(50 * time.Millisecond)
	busy := c.Stats()
	if busy.KVUsage == 0 {
		t.Fatal("no KV in use under load")
	}
	for _, st := range []Stats{idle, busy} {
		for i, r := range st.Replicas {
			if r.MemoryBytes != want {
				t.Errorf("replica %d holds %.0f bytes, want weights + reserve + KV pool = %.0f", i, r.MemoryBytes, want)
			}
		}
	}
	if want > cfg.GPUMemoryUtilization*cfg.GPU.MemoryBytes {
		t.Errorf("%.0f bytes held exceed gpu_memory_utilization × memory", want)
	}
}

// TestAccountingInstant checks that an instant engine, whose steps take no
// time, accounts none.
func TestAccountingInstant(t *testing.T) {
	c := newCluster(t, preset(t, "tiny-fast"))
	for i := range 10 {
		submit(c, ids(i*100, 50), 10)
	}
	drain(c)
	r := c.Stats().Replicas[0]
	if r.Busy != 0 || r.MemoryTime != 0 || r.ComputeTime != 0 {
		t.Errorf("instant engine accounted %+v", r)
	}
}

// TestQueueTime checks vLLM's queue time: from reaching the engine to first
// scheduled. With one sequence at a time the second request waits for the
// first to finish.
func TestQueueTime(t *testing.T) {
	cfg := preset(t, "llama-3.1-8b-h100").PhysicsOnly()
	cfg.MaxNumSeqs = 1
	c := newCluster(t, cfg)
	a := submit(c, ids(0, 32), 5)
	b := submit(c, ids(1000, 32), 5)
	if b.Info().Scheduled {
		t.Fatal("scheduled before reaching the engine")
	}
	drain(c)
	ia, ib := a.Info(), b.Info()
	if !ia.Scheduled || ia.QueueTime != 0 {
		t.Errorf("first request: scheduled %v after %v in the queue, want at once", ia.Scheduled, ia.QueueTime)
	}
	if !ib.Scheduled || ib.QueueTime != a.at[4] {
		t.Errorf("second request: scheduled %v after %v in the queue, want %v (the first's last token)", ib.Scheduled, ib.QueueTime, a.at[4])
	}
}
