// Package engine is the performance model behind infermatrix's simulated
// server: iteration-level continuous batching as vLLM V1 schedules it, with
// a paged KV cache, automatic prefix caching, preemption by recomputation,
// and step times from the roofline of a real model on a real GPU.
//
// The package is a discrete-event simulation on a virtual clock. It never
// sleeps and never reads the wall clock; a caller moves it forward with
// RunUntil or Step. Tests and the calibration run it as fast as the CPU
// allows and get bit-identical results from identical inputs; the HTTP
// server (package sim) drives the same code in real time, sleeping to each
// event's deadline.
//
// # Model
//
// Each replica runs one step at a time. A step's batch is chosen as vLLM V1
// does: running requests first, in admission order, each taking what it
// needs (one token for a decode, the rest of its prompt for a prefill in
// progress) up to the step's token budget (MaxNumBatchedTokens), preempting
// the newest running request when KV blocks run out; then, if nothing was
// preempted, waiting requests first-come-first-served while MaxNumSeqs,
// the budget and free blocks allow, starting from their prefix-cache hits.
//
// The step takes
//
//	T = (t0 + t_seq × sequences + max(linear ÷ (η_f × peak) + attention ÷ (η_attn × peak), bytes ÷ (η_bw × bandwidth))) × drift × jitter
//
// where linear FLOPs are 2 × non-embedding parameters per new token plus
// the output projection once per sampled token, attention is causal over
// each sequence's context at its own efficiency, and bytes are the
// streamed weights once (not the untied input embedding, which is only
// gathered) plus the KV cache of every scheduled sequence (roofline.Model's
// formulas). Every sequence that reaches the end of its known tokens in the
// step emits one token at the step's end. Drift is a replica's slow speed
// phase, jitter each step's own noise (both mean-one log-normal).
//
// The front end is one process shared by all replicas, as vLLM's API
// server is. A request first costs it RequestCost + RequestCostPerToken ×
// prompt tokens of work, then waits RequestLatency + RequestLatencyPerStream
// × open streams without occupying it, then reaches the engine; both are scaled by a per-request log-normal
// factor (LatencySpread), the heavy tail of time to first token. Emitted
// tokens pass the same process: each step's tokens cost TokenCost +
// TokenCostPerStream × open streams apiece, served one at a time in order.
// Requests and tokens share its queue, so a front end busy with output
// delays new requests, and the reverse. Each token is delivered to the
// caller when the front end has handled it.
package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Request is one generation request. The caller fills Prompt, Output and
// Deliver, submits it, and must not touch it again except through Cluster
// methods.
type Request struct {
	// Prompt holds the prompt's token ids. Only its length and its block
	// hashes matter; equal ids make equal blocks, so shared prefixes hit.
	Prompt []int
	// Output is the number of tokens to generate, at least 1.
	Output int
	// Generated, when set, holds the ids of the tokens the request will
	// generate (at least Output of them). The blocks they fill join the
	// prefix cache as their KV is computed, as vLLM caches a reply: the
	// next turn of a chat, whose prompt is this prompt and this reply,
	// finds both. Without it only prompt blocks are cached.
	Generated []int
	// Deliver, if set, is called during RunUntil or Step for every output
	// token as the front end releases it, in order, with the token's
	// index and the virtual time it is released.
	Deliver func(k int, at time.Duration)

	id        uint64
	arrival   time.Duration
	replica   int
	hashes    []uint64
	promptLen int
	computed  int // tokens whose KV is computed
	generated int // tokens the engine has emitted
	delivered int // tokens the front end has released
	blocks    []int32
	state     reqState
	cached    int // prompt tokens found in the prefix cache at its first admission
	// recached is what its latest readmission after a preemption found
	// cached (its own blocks, where they survived): counted in the
	// prefix-cache counters, not in what the request reports.
	recached  int
	preempted int
	firstAt   time.Duration // engine emission time of token 0

	queuedAt    time.Duration // when it reached the engine's waiting queue
	scheduledAt time.Duration // when the scheduler first admitted it
	scheduled   bool          // whether it has been admitted yet
}

type reqState uint8

const (
	stateNew reqState = iota
	stateWaiting
	stateRunning
	stateFinished // the engine emitted every token
	stateCanceled
)

// Info is what the engine knows about a request, for tests, logs and the
// server's request histograms.
type Info struct {
	Replica int
	// CachedTokens are the prompt tokens that hit the prefix cache at its
	// first admission, as vLLM V1 reports them (it sets num_cached_tokens
	// once): a preempted request finding its own blocks again is not a
	// cache hit its client asked for. RecachedTokens is what its latest
	// readmission found.
	CachedTokens   int
	RecachedTokens int
	Preemptions    int
	Generated      int
	Delivered      int
	// Scheduled says whether the scheduler has admitted the request, and
	// QueueTime is then how long it waited in the engine's queue before
	// its first admission (vLLM's queue time: from reaching the engine to
	// first scheduled; a readmission after preemption does not count).
	Scheduled bool
	QueueTime time.Duration
}

// Info reports r's progress.
func (r *Request) Info() Info {
	i := Info{Replica: r.replica, CachedTokens: r.cached, RecachedTokens: r.recached, Preemptions: r.preempted, Generated: r.generated, Delivered: r.delivered}
	if r.scheduled {
		i.Scheduled, i.QueueTime = true, r.scheduledAt-r.queuedAt
	}
	return i
}

// Stats is a snapshot of the whole deployment, summed over replicas.
type Stats struct {
	Running, Waiting int
	// KVUsage is the mean over replicas of the fraction of KV blocks in
	// use.
	KVUsage float64
	// PrefixQueries and PrefixHits count prompt tokens looked up in the
	// prefix cache and found there, as vLLM's counters of the same names.
	PrefixQueries, PrefixHits uint64
	Preemptions               uint64
	Steps                     uint64
	PromptTokens              uint64 // prompt tokens of requests past prefill, cached ones included, as vLLM counts them
	GenerationTokens          uint64 // tokens emitted by the engines
	OpenStreams               int    // requests submitted and not yet fully delivered
	KVCapacityTokens          int    // per replica

	// Replicas holds each replica's own accounting, in replica order.
	Replicas []ReplicaStats
}

// ReplicaStats is one replica's account of its GPU's work, for the
// simulator's GPU telemetry. The times are cumulative from the cluster's
// start to Now, the step in flight counted up to Now, so that a reader
// takes differences over any window it likes without the engine keeping
// history.
type ReplicaStats struct {
	Running, Waiting int
	KVUsage          float64 // fraction of the replica's KV blocks in use
	// Busy is the time a step was in flight: the sum of step durations.
	Busy time.Duration
	// MemoryTime is the time the memory bus was busy at peak bandwidth:
	// each step's bytes ÷ the GPU's peak bandwidth (η_bw not applied),
	// at most the step's duration, accrued evenly over the step.
	MemoryTime time.Duration
	// ComputeTime is likewise each step's FLOPs ÷ the GPU's peak FLOP/s
	// at the precision served, at most the step's duration.
	ComputeTime time.Duration
	// MemoryBytes is the device memory the replica holds: weights,
	// reserve and the whole KV pool. vLLM allocates the pool at start,
	// so this is flat whatever the load; KVUsage says how much of the
	// pool is in use.
	MemoryBytes float64
}

// Cluster is a simulated deployment. It is not safe for concurrent use; the
// real-time server serializes calls with a mutex.
type Cluster struct {
	cfg      Config
	replicas []*replica
	events   eventQueue
	now      time.Duration
	seq      uint64 // event tie-breaker, for determinism
	nextID   uint64
	rng      *rand.Rand

	// The front end's view of the replicas' load for routing: the counts
	// last published (at the start of tick lbTick, a multiple of
	// StatsInterval) plus the requests it routed since.
	lb     []lbCount
	lbTick int64

	open       int           // requests at the front end (submitted, not fully delivered or canceled)
	egressFree time.Duration // when the front end finishes its current work (requests and tokens)

	stats  Stats
	outBuf []delivery // a step's emitted tokens, reused when delivered at once

	// Precomputed step-time constants.
	weightBytes, kvPerToken, flopsPerToken float64
	logitsFLOPs, attnRate                  float64
	attnPerPos, bwRate, flopRate           float64
	peakBW, peakFLOPs                      float64 // the GPU's, for the accounting
	memoryBytes                            float64 // per replica: weights, reserve, KV pool
}

type replica struct {
	idx     int
	pool    *blockPool
	waiting []*Request // FIFO; preempted requests go back to the front
	running []*Request // admission order; the newest is preempted first
	busy    bool
	batch   []scheduled // the step in flight
	spare   []scheduled

	// Accounting of completed steps, and of the step in flight: its
	// start, duration, and the memory and compute time it is credited.
	doneBusy, doneMem, doneCompute time.Duration
	stepStart, stepDur             time.Duration
	stepMem, stepCompute           time.Duration

	// Drift: the replica's current speed factor and when it is drawn
	// again.
	drift      float64
	driftUntil time.Duration
}

// lbCount is one replica's load as the front end sees it.
type lbCount struct{ waiting, running int }

type scheduled struct {
	r      *Request
	n      int // tokens computed this step
	before int // tokens already computed
}

// New returns a cluster for cfg, or the reasons cfg cannot run.
func New(cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	cfg = cfg.withDefaults()
	c := &Cluster{
		cfg:           cfg,
		rng:           rand.New(rand.NewPCG(cfg.Seed, 0x5157)),
		weightBytes:   cfg.Model.StreamedWeightBytes(cfg.Precision),
		kvPerToken:    cfg.Model.KVBytesPerToken(cfg.Precision),
		flopsPerToken: cfg.Model.LinearFLOPsPerToken(),
		logitsFLOPs:   cfg.Model.LogitsFLOPs(),
		attnRate:      cfg.Efficiency.AttentionOrFLOPs() * cfg.GPU.PeakFLOPs(cfg.Precision),
		attnPerPos:    4 * float64(cfg.Model.Layers) * float64(cfg.Model.Heads) * float64(cfg.Model.HeadDim),
		bwRate:        cfg.Efficiency.Bandwidth * cfg.GPU.Bandwidth,
		flopRate:      cfg.Efficiency.FLOPs * cfg.GPU.PeakFLOPs(cfg.Precision),
		peakBW:        cfg.GPU.Bandwidth,
		peakFLOPs:     cfg.GPU.PeakFLOPs(cfg.Precision),
	}
	blocks := cfg.KVCapacity() / cfg.BlockSize
	c.memoryBytes = cfg.Model.WeightBytes(cfg.Precision) + cfg.ReserveBytes + float64(blocks*cfg.BlockSize)*c.kvPerToken
	for i := range cfg.Replicas {
		c.replicas = append(c.replicas, &replica{idx: i, pool: newBlockPool(blocks, cfg.BlockSize, cfg.PrefixCaching), drift: 1})
	}
	c.lb = make([]lbCount, cfg.Replicas)
	c.stats.KVCapacityTokens = blocks * cfg.BlockSize
	return c, nil
}

// Config returns the configuration the cluster runs, defaults applied.
func (c *Cluster) Config() Config { return c.cfg }

// Now is the virtual time the cluster has reached.
func (c *Cluster) Now() time.Duration { return c.now }

// Submit hands r to the front end at the current virtual time. The engine
// sees it when the front end has done its work on it (after what the front
// end was already doing) and RequestLatency has passed. It panics on a request that cannot be
// served (no output, or longer than MaxModelLen): the HTTP layer rejects
// those with a 400 before they get here.
func (c *Cluster) Submit(r *Request) {
	if r.state != stateNew {
		panic("engine: request submitted twice")
	}
	if r.Output < 1 || len(r.Prompt)+r.Output > c.cfg.MaxModelLen {
		panic(fmt.Sprintf("engine: request of %d+%d tokens does not fit max_model_len %d", len(r.Prompt), r.Output, c.cfg.MaxModelLen))
	}
	c.nextID++
	r.id = c.nextID
	r.arrival = c.now
	r.promptLen = len(r.Prompt)
	// Hash the prompt and the reply, as vLLM V1 extends a request's block
	// hashes as its output fills blocks: a preempted request's output
	// blocks stay in the prefix cache and its readmission finds them. The
	// last token's KV is never computed, so its block is never published;
	// hashing it costs nothing.
	ids := append(r.Prompt[:len(r.Prompt):len(r.Prompt)], r.Generated[:min(len(r.Generated), r.Output)]...)
	for k := len(ids) - r.promptLen; k < r.Output; k++ {
		ids = append(ids, c.replyToken(r.id, k))
	}
	r.hashes = blockHashes(ids, c.cfg.BlockSize)
	r.state = stateWaiting
	r.replica = -1
	c.open++
	c.stats.OpenStreams = c.open
	c.push(event{at: c.requestPath(r.promptLen), kind: evAdmit, req: r})
}

// replyToken stands in for token k of request id's reply when the caller
// does not know the reply's ids: negative, so no prompt holds it, and
// distinct per request, as two sampled replies are, so that one request's
// reply blocks are found only by the request itself (after a preemption).
func (c *Cluster) replyToken(id uint64, k int) int {
	return -1 - int(mix(id<<24^uint64(k))>>2)
}

// requestPath is when a request of prompt tokens submitted now reaches the
// engine: the front end's work on it, queued behind its backlog, then its
// latency, both scaled by the request's own log-normal factor.
func (c *Cluster) requestPath(prompt int) time.Duration {
	if c.cfg.Instant {
		return c.now
	}
	fe := c.cfg.FrontEnd
	f := 1.0
	if s := fe.LatencySpread; s > 0 {
		f = math.Exp(s*c.rng.NormFloat64() - s*s/2)
	}
	at := c.now
	if work := fe.RequestCost + time.Duration(prompt)*fe.RequestCostPerToken; work > 0 {
		at = max(at, c.egressFree) + scale(work, f)
		c.egressFree = at
	}
	return at + scale(fe.RequestLatency+time.Duration(c.open)*fe.RequestLatencyPerStream, f)
}

func scale(d time.Duration, f float64) time.Duration {
	if f == 1 {
		return d
	}
	return time.Duration(math.Round(float64(d) * f))
}

// Cancel withdraws r: the client went away. Its KV blocks are freed at once
// (or when its step in flight ends) and nothing more is delivered.
func (c *Cluster) Cancel(r *Request) {
	switch r.state {
	case stateCanceled:
		return
	case stateNew:
		r.state = stateCanceled
		return
	}
	if r.delivered < r.Output {
		c.open--
		c.stats.OpenStreams = c.open
	}
	prev := r.state
	r.state = stateCanceled
	if r.replica < 0 || prev == stateFinished {
		return // not routed yet, or the engine is done with it
	}
	rep := c.replicas[r.replica]
	rep.waiting = remove(rep.waiting, r)
	if prev == stateRunning {
		rep.running = remove(rep.running, r)
		if !inBatch(rep.batch, r) {
			rep.pool.release(r.blocks)
			r.blocks = r.blocks[:0]
		}
		// A request in the step in flight keeps its blocks until the
		// step ends, as the GPU is still writing them.
	}
}

func inBatch(b []scheduled, r *Request) bool {
	for _, s := range b {
		if s.r == r {
			return true
		}
	}
	return false
}

func remove(list []*Request, r *Request) []*Request {
	for i, x := range list {
		if x == r {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

// Next reports the time of the next event, if any.
func (c *Cluster) Next() (time.Duration, bool) {
	if len(c.events) == 0 {
		return 0, false
	}
	return c.events[0].at, true
}

// RunUntil processes every event due at or before t and moves the clock to
// t. Moving backwards is ignored.
func (c *Cluster) RunUntil(t time.Duration) {
	for len(c.events) > 0 && c.events[0].at <= t {
		c.step()
	}
	if t > c.now {
		c.now = t
	}
}

// Step processes the next event, moving the clock to it. It reports false
// when there is none.
func (c *Cluster) Step() bool {
	if len(c.events) == 0 {
		return false
	}
	c.step()
	return true
}

// Stats returns a snapshot of the deployment.
func (c *Cluster) Stats() Stats {
	s := c.stats
	s.Running, s.Waiting, s.KVUsage = 0, 0, 0
	s.Replicas = c.ReplicaStats(make([]ReplicaStats, 0, len(c.replicas)))
	for _, r := range s.Replicas {
		s.Running += r.Running
		s.Waiting += r.Waiting
		s.KVUsage += r.KVUsage
	}
	s.KVUsage /= float64(len(c.replicas))
	return s
}

// ReplicaStats appends each replica's accounting at Now to dst and returns
// it: Stats' Replicas without the allocation, for a caller that samples
// often.
func (c *Cluster) ReplicaStats(dst []ReplicaStats) []ReplicaStats {
	for _, rep := range c.replicas {
		r := ReplicaStats{
			Running: len(rep.running), Waiting: len(rep.waiting), KVUsage: rep.pool.usage(),
			Busy: rep.doneBusy, MemoryTime: rep.doneMem, ComputeTime: rep.doneCompute,
			MemoryBytes: c.memoryBytes,
		}
		if rep.busy && rep.stepDur > 0 {
			// The step in flight, credited in proportion to its
			// elapsed part: the accounting is continuous in time.
			el := min(max(c.now-rep.stepStart, 0), rep.stepDur)
			frac := float64(el) / float64(rep.stepDur)
			r.Busy += el
			r.MemoryTime += time.Duration(math.Round(float64(rep.stepMem) * frac))
			r.ComputeTime += time.Duration(math.Round(float64(rep.stepCompute) * frac))
		}
		dst = append(dst, r)
	}
	return dst
}

type eventKind uint8

const (
	evAdmit   eventKind = iota // a request reaches the engine
	evStepEnd                  // a replica's step ends
	evDeliver                  // the front end releases a batch of tokens
)

type event struct {
	at    time.Duration
	seq   uint64
	kind  eventKind
	req   *Request
	rep   *replica
	batch []delivery
}

type delivery struct {
	r *Request
	k int
}

// eventQueue is a binary min-heap ordered by time, then by push order. It
// is written out rather than built on container/heap, whose interface
// boxes every event in an allocation: the tiny-fast preset pushes one per
// step.
type eventQueue []event

func (q eventQueue) less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}

func (q *eventQueue) push(e event) {
	*q = append(*q, e)
	h := *q
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (q *eventQueue) pop() event {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = event{}
	h = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h.less(l, m) {
			m = l
		}
		if r < len(h) && h.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

func (c *Cluster) push(e event) {
	c.seq++
	e.seq = c.seq
	c.events.push(e)
}

func (c *Cluster) step() {
	e := c.events.pop()
	c.publishLoad(e.at)
	if e.at > c.now {
		c.now = e.at
	}
	switch e.kind {
	case evAdmit:
		if e.req.state == stateCanceled {
			return
		}
		rep := c.route()
		e.req.replica = rep.idx
		e.req.queuedAt = c.now
		rep.waiting = append(rep.waiting, e.req)
		if !rep.busy {
			c.startStep(rep)
		}
	case evStepEnd:
		c.endStep(e.rep)
	case evDeliver:
		c.deliver(e.batch)
	}
}

// route picks a replica as vLLM 0.11's data-parallel API server does
// (DPLBAsyncMPClient.get_core_engine_for_request in
// vllm/v1/engine/core_client.py): the lowest score waiting × 4 + running,
// scanning from replica 0 (one API server's start index) so that ties go
// to the lowest index, on counts up to StatsInterval old; it then counts
// the request as waiting on its replica itself, so that a burst between
// two publications spreads instead of piling onto the replica that looked
// idlest. It never learns of finished requests before the next
// publication. A waiting request weighs four running ones because it has
// no first token yet: the score steers new requests away from queues.
func (c *Cluster) route() *replica {
	if len(c.replicas) == 1 {
		return c.replicas[0]
	}
	best, low := 0, math.MaxInt
	for i, l := range c.lb {
		if score := 4*l.waiting + l.running; score < low {
			best, low = i, score
		}
	}
	c.lb[best].waiting++
	return c.replicas[best]
}

// publishLoad refreshes the front end's load view before an event at t: if
// a publication tick (a multiple of StatsInterval) has passed since the
// last one, the view becomes the replicas' counts as they stood at that
// tick, which are the counts now, since nothing happens between events.
// The ticks are lazy, so an idle cluster has no events left and Step
// reports false as before.
func (c *Cluster) publishLoad(t time.Duration) {
	if len(c.replicas) == 1 {
		return
	}
	tick := int64(t / c.cfg.StatsInterval)
	if tick <= c.lbTick {
		return
	}
	c.lbTick = tick
	for i, rep := range c.replicas {
		c.lb[i] = lbCount{waiting: len(rep.waiting), running: len(rep.running)}
	}
}

// needed is how many tokens r must compute before it can emit its next
// token: the rest of its prompt and of the tokens it already emitted.
func needed(r *Request) int { return r.promptLen + r.generated - r.computed }

// blocksFor is the number of blocks holding n tokens.
func (c *Cluster) blocksFor(n int) int { return (n + c.cfg.BlockSize - 1) / c.cfg.BlockSize }

// schedule picks the next step's batch, as vLLM V1's scheduler does.
func (c *Cluster) schedule(rep *replica) []scheduled {
	batch := rep.spare[:0]
	budget := c.cfg.MaxNumBatchedTokens
	preempted := false
	for i := 0; i < len(rep.running) && budget > 0; i++ {
		r := rep.running[i]
		n := min(needed(r), budget)
		if n <= 0 {
			continue
		}
		for {
			more := c.blocksFor(r.computed+n) - len(r.blocks)
			var ok bool
			if r.blocks, ok = rep.pool.alloc(max(more, 0), r.blocks); ok {
				break
			}
			// Out of blocks: preempt the newest running request.
			victim := rep.running[len(rep.running)-1]
			rep.running = rep.running[:len(rep.running)-1]
			c.preempt(rep, victim)
			preempted = true
			if victim == r {
				n = 0
				break
			}
		}
		if n == 0 {
			break
		}
		batch = append(batch, scheduled{r: r, n: n, before: r.computed})
		budget -= n
	}
	if preempted {
		return batch
	}
	for len(rep.waiting) > 0 && budget > 0 && len(rep.running) < c.cfg.MaxNumSeqs {
		r := rep.waiting[0]
		// Prefix-cache lookup: whole blocks only, and never the last
		// token, which must be computed to sample from.
		limit := (r.promptLen + r.generated - 1) / c.cfg.BlockSize
		r.blocks = rep.pool.lookup(r.hashes, limit, r.blocks[:0])
		r.computed = len(r.blocks) * c.cfg.BlockSize
		n := min(needed(r), budget)
		var ok bool
		if r.blocks, ok = rep.pool.alloc(c.blocksFor(r.computed+n)-len(r.blocks), r.blocks); !ok {
			// Admission is all or nothing, as vLLM's allocate_slots:
			// give back the cached blocks the lookup took. First come,
			// first served: nobody overtakes the head of the queue.
			rep.pool.release(r.blocks)
			r.blocks, r.computed = r.blocks[:0], 0
			break
		}
		if !r.scheduled {
			r.scheduled, r.scheduledAt = true, c.now
			r.cached = r.computed
		} else {
			r.recached = r.computed
		}
		// A readmission looks up its emitted tokens too: vLLM counts
		// every token of the request (num_tokens) as queried.
		c.stats.PrefixQueries += uint64(r.promptLen + r.generated)
		c.stats.PrefixHits += uint64(r.computed)
		rep.waiting = rep.waiting[1:]
		rep.running = append(rep.running, r)
		r.state = stateRunning
		batch = append(batch, scheduled{r: r, n: n, before: r.computed})
		budget -= n
	}
	return batch
}

// preempt returns r to the front of the waiting queue with its KV freed, as
// vLLM V1 does: its blocks go back to the pool tail first, the full ones
// (prompt and reply alike) still holding their content in the prefix cache.
// When readmitted it takes back whatever of them was not evicted meanwhile
// and recomputes the rest: at least the partial last block, at most
// everything.
func (c *Cluster) preempt(rep *replica, r *Request) {
	rep.pool.release(r.blocks)
	r.blocks = r.blocks[:0]
	r.computed = 0
	r.state = stateWaiting
	r.preempted++
	c.stats.Preemptions++
	rep.waiting = append([]*Request{r}, rep.waiting...)
}

func (c *Cluster) startStep(rep *replica) {
	batch := c.schedule(rep)
	if len(batch) == 0 {
		rep.busy = false
		rep.spare = batch
		return
	}
	rep.busy = true
	rep.batch = batch
	c.stats.Steps++
	dur, mem, compute := c.stepTime(rep, batch)
	rep.stepStart, rep.stepDur = c.now, dur
	rep.stepMem, rep.stepCompute = min(mem, dur), min(compute, dur)
	c.push(event{at: c.now + dur, kind: evStepEnd, rep: rep})
}

// stepTime is the model's core: fixed overheads plus the slower of the
// step's compute and its memory traffic. It also returns the step's memory
// time (bytes ÷ peak bandwidth) and compute time (FLOPs ÷ peak FLOP/s) at
// the GPU's peaks, for the accounting.
func (c *Cluster) stepTime(rep *replica, batch []scheduled) (dur, mem, compute time.Duration) {
	if c.cfg.Instant {
		return 0, 0, 0
	}
	linear, attn := 0.0, 0.0
	bytes := c.weightBytes
	for _, s := range batch {
		n, before := float64(s.n), float64(s.before)
		linear += c.flopsPerToken * n
		if s.n == needed(s.r) {
			linear += c.logitsFLOPs // it samples a token: its logits
		}
		attn += c.attnPerPos * (n*before + n*(n+1)/2)
		bytes += c.kvPerToken * (before + n)
	}
	sec := max(linear/c.flopRate+attn/c.attnRate, bytes/c.bwRate)
	sec += c.cfg.StepOverhead.Seconds() + c.cfg.SeqOverhead.Seconds()*float64(len(batch))
	if s := c.cfg.Drift; s > 0 {
		if c.now >= rep.driftUntil {
			rep.drift = math.Exp(s*c.rng.NormFloat64() - s*s/2)
			rep.driftUntil = c.now + seconds(c.rng.ExpFloat64()*c.cfg.DriftPeriod.Seconds())
		}
		sec *= rep.drift
	}
	if c.cfg.Jitter > 0 {
		s := c.cfg.Jitter
		sec *= math.Exp(s*c.rng.NormFloat64() - s*s/2)
	}
	return seconds(sec), seconds(bytes / c.peakBW), seconds((linear + attn) / c.peakFLOPs)
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

func (c *Cluster) endStep(rep *replica) {
	batch := rep.batch
	rep.batch = nil
	rep.doneBusy += rep.stepDur
	rep.doneMem += rep.stepMem
	rep.doneCompute += rep.stepCompute
	rep.busy = false // startStep below sets it again if there is work
	out := c.outBuf[:0]
	bs := c.cfg.BlockSize
	for _, s := range batch {
		r := s.r
		if r.state == stateCanceled {
			rep.pool.release(r.blocks)
			r.blocks = r.blocks[:0]
			continue
		}
		if r.state != stateRunning || r.computed != s.before {
			continue // preempted after being scheduled; cannot happen mid-step, kept defensive
		}
		was := r.computed
		r.computed += s.n
		// Publish newly completed blocks to the prefix cache: the
		// prompt's, and the reply's when its ids are known (hashes
		// covers what may be cached).
		for i := was / bs; i < r.computed/bs && i < len(r.hashes); i++ {
			rep.pool.publish(r.blocks[i], r.hashes[i])
		}
		if needed(r) > 0 {
			continue // a prefill chunk that did not finish the prompt
		}
		k := r.generated
		r.generated++
		c.stats.GenerationTokens++
		if k == 0 {
			r.firstAt = c.now
			c.stats.PromptTokens += uint64(r.promptLen)
		}
		out = append(out, delivery{r, k})
		if r.generated == r.Output {
			r.state = stateFinished
			rep.running = remove(rep.running, r)
			rep.pool.release(r.blocks)
			r.blocks = r.blocks[:0]
		}
	}
	rep.spare = batch[:0]
	if len(out) > 0 {
		if c.egress(out) {
			c.outBuf = out[:0] // delivered already: reuse it
		} else {
			c.outBuf = nil // events hold it until the front end is done
		}
	}
	c.startStep(rep)
}

// egress passes a step's tokens through the front end: one at a time, in
// the step's order, each released to its client when the front end has
// handled it, as an API server's output loop hands each request its output
// in turn. The front end starts on the step when it has finished what it
// was doing.
// It reports whether the tokens were delivered at once.
func (c *Cluster) egress(out []delivery) bool {
	fe := c.cfg.FrontEnd
	if c.cfg.Instant || (fe.TokenCost == 0 && fe.TokenCostPerStream == 0) {
		c.deliver(out)
		return true
	}
	at := max(c.now, c.egressFree)
	per := fe.TokenCost + time.Duration(c.open)*fe.TokenCostPerStream
	for i := range out {
		at += per
		c.push(event{at: at, kind: evDeliver, batch: out[i : i+1 : i+1]})
	}
	c.egressFree = at
	return false
}

func (c *Cluster) deliver(out []delivery) {
	for _, d := range out {
		r := d.r
		if r.state == stateCanceled {
			continue
		}
		r.delivered = d.k + 1
		if r.delivered == r.Output {
			c.open--
			c.stats.OpenStreams = c.open
		}
		if r.Deliver != nil {
			r.Deliver(d.k, c.now)
		}
	}
}

// Unloaded returns the time to first token and the mean time per output
// token of one request alone on a fresh deployment, without jitter, drift
// or latency spread (each at its mean): the floor under every loaded
// figure, and what a plan estimates durations with.
func Unloaded(cfg Config, prompt, output int) (ttft, tpot time.Duration, err error) {
	cfg.Jitter, cfg.Drift, cfg.FrontEnd.LatencySpread = 0, 0, 0
	c, err := New(cfg)
	if err != nil {
		return 0, 0, err
	}
	if output < 1 || prompt+output > c.cfg.MaxModelLen {
		return 0, 0, fmt.Errorf("engine: request of %d+%d tokens does not fit max_model_len %d", prompt, output, c.cfg.MaxModelLen)
	}
	var first, last time.Duration
	r := &Request{Prompt: make([]int, prompt), Output: output}
	for i := range r.Prompt {
		r.Prompt[i] = i // distinct blocks; the cache is empty anyway
	}
	r.Deliver = func(k int, at time.Duration) {
		if k == 0 {
			first = at
		}
		last = at
	}
	c.Submit(r)
	for c.Step() {
	}
	if output > 1 {
		tpot = (last - first) / time.Duration(output-1)
	}
	return first, tpot, nil
}
