package sim

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/infermatrix/infermatrix/sim/engine"
)

// engineTiming drives an engine.Cluster in real time: virtual time zero is
// the server's start, and each engine event happens when the wall clock
// reaches it. One goroutine (run) sleeps to the next event's deadline, so a
// step's tokens for every stream are released together, and the handlers,
// each blocked in wait, wake to write them. No handler sleeps on its own
// timer.
//
// Go's timers are coarse (about a millisecond on many Linux hosts), so the
// driver sleeps on a timer only until shortly before a deadline and spins,
// yielding the processor, for the rest. The slack adapts to the timer
// overshoot it observes, so it costs little CPU where timers are precise.
type engineTiming struct {
	mu      sync.Mutex
	cluster *engine.Cluster
	epoch   time.Time // virtual zero, with a monotonic reading
	wake    chan struct{}
	done    chan struct{}
	stopped bool
	closeMu sync.Once

	// lateness holds recent event lateness (seconds): how long after its
	// deadline each engine event was processed. Guarded by mu.
	lateness     [latenessRing]float64
	latenessNext int
	latenessN    int

	// gpu models the replicas' GPUs for /metrics; nil when the GPU has
	// no telemetry figures. Guarded by mu.
	gpu *gpuMonitor

	slack time.Duration // spin window before a deadline; driver goroutine only
}

const latenessRing = 4096

// errServerClosed is what a wait returns once the server is shutting down.
var errServerClosed = errors.New("sim: server closed")

func newEngineTiming(cfg engine.Config) (*engineTiming, error) {
	c, err := engine.New(cfg)
	if err != nil {
		return nil, err
	}
	t := &engineTiming{
		cluster: c,
		epoch:   time.Now(),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		slack:   time.Millisecond,
		gpu:     newGPUMonitor(c.Config(), c.Config().Replicas),
	}
	go t.run()
	return t, nil
}

func (t *engineTiming) virtual(now time.Time) time.Duration { return now.Sub(t.epoch) }

// advance processes every event due by now, recording how late each was,
// and lets the GPU model snapshot the cluster on its grid on the way. The
// caller holds mu.
func (t *engineTiming) advance(now time.Time) {
	v := t.virtual(now)
	advanceCluster(t.cluster, t.gpu, v, func(at time.Duration) {
		t.lateness[t.latenessNext] = (v - at).Seconds()
		t.latenessNext = (t.latenessNext + 1) % latenessRing
		t.latenessN = min(t.latenessN+1, latenessRing)
	})
}

func (t *engineTiming) kick() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// run is the driver goroutine.
func (t *engineTiming) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		t.mu.Lock()
		t.advance(time.Now())
		next, ok := t.cluster.Next()
		t.mu.Unlock()
		if !ok {
			select {
			case <-t.wake:
				continue
			case <-t.done:
				return
			}
		}
		deadline := t.epoch.Add(next)
		if d := time.Until(deadline) - t.slack; d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
				t.adapt(time.Until(deadline))
			case <-t.wake:
				timer.Stop()
				continue
			case <-t.done:
				return
			}
		}
		// Spin out the rest, yielding so that handlers writing the last
		// step's tokens are not starved. A wakeup means an admission may
		// have scheduled an earlier event: start over.
	spin:
		for time.Now().Before(deadline) {
			select {
			case <-t.done:
				return
			case <-t.wake:
				break spin
			default:
			}
			runtime.Gosched()
		}
	}
}

// adapt tunes the spin window from how early the timer left the driver
// before a deadline: a timer that fired late (remaining < 0) needs more
// slack, one that fired with room to spare needs less.
func (t *engineTiming) adapt(remaining time.Duration) {
	const floor, ceiling = 100 * time.Microsecond, 3 * time.Millisecond
	overshoot := t.slack - remaining // how late the timer fired
	target := 2*overshoot + floor
	// Move a quarter of the way, so one outlier does not swing it.
	t.slack += (target - t.slack) / 4
	t.slack = min(max(t.slack, floor), ceiling)
}

func (t *engineTiming) admit(a admission) tokenClock {
	ec := &engineClock{t: t, notify: make(chan struct{}, 1)}
	ec.req = &engine.Request{Prompt: a.prompt, Output: a.output, Generated: a.generated, Deliver: ec.deliver}
	if !t.submit(ec.req) {
		ec.closed = true
		return ec
	}
	t.kick()
	return ec
}

// submit hands r to the engine at the current time, reporting false when
// the server has stopped.
func (t *engineTiming) submit(r *engine.Request) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	now := time.Now()
	t.advance(now)
	t.cluster.Submit(r)
	// A request with no front-end latency reaches the engine at once,
	// and an idle replica starts its step now rather than at the
	// driver's next wakeup.
	t.advance(now)
	return true
}

func (t *engineTiming) stats() modelStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	// Bring the cluster to now (the driver has normally processed every
	// event due already), so that the GPU figures cover the time up to
	// the scrape: an idle cluster's clock otherwise stands still.
	t.advance(time.Now())
	s := t.cluster.Stats()
	late := make([]float64, t.latenessN)
	copy(late, t.lateness[:t.latenessN])
	st := modelStats{
		running: s.Running, waiting: s.Waiting, kvUsage: s.KVUsage,
		prefixQueries: s.PrefixQueries, prefixHits: s.PrefixHits, preemptions: s.Preemptions,
		stepLateness: late, stepLatenessSupported: true,
		queueTimeSupported: true,
	}
	if t.gpu != nil {
		st.gpus = t.gpu.read(t.cluster)
	}
	return st
}

func (t *engineTiming) close() {
	t.closeMu.Do(func() {
		t.mu.Lock()
		t.stopped = true
		t.mu.Unlock()
		close(t.done)
	})
}

// engineClock is one request's view of the engine.
type engineClock struct {
	t      *engineTiming
	req    *engine.Request
	notify chan struct{}
	closed bool // admitted after the server stopped
	// mu guards due. It is the clock's own lock, not t.mu, so that a
	// hundred handlers woken by one step do not queue on the lock the
	// driver holds while it wakes them.
	mu  sync.Mutex
	due []time.Duration // virtual release time of each delivered token
	// cachedN is the request's prefix-cache hit count as of its latest
	// delivered token, read from the engine under t.mu in deliver, so
	// that the handler can report it without taking the driver's lock.
	cachedN int
	// queue is the request's time in the engine's queue before it was
	// first scheduled, read with its first token (queueOK).
	queue   time.Duration
	queueOK bool
}

// deliver is the engine's callback, run by whoever advances the engine
// (under t.mu). Each delivery refreshes the cached count, which is fixed
// from the request's first admission (Info.CachedTokens): the first
// delivery already carries the final one.
func (c *engineClock) deliver(k int, at time.Duration) {
	info := c.req.Info()
	c.mu.Lock()
	c.due = append(c.due, at)
	c.cachedN = info.CachedTokens
	if k == 0 && info.Scheduled {
		c.queue, c.queueOK = info.QueueTime, true
	}
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

func (c *engineClock) wait(ctx context.Context, k int) (time.Time, error) {
	if c.closed {
		return time.Now(), errServerClosed
	}
	for {
		c.mu.Lock()
		if k < len(c.due) {
			due := c.t.epoch.Add(c.due[k])
			c.mu.Unlock()
			return due, nil
		}
		c.mu.Unlock()
		select {
		case <-c.notify:
		case <-ctx.Done():
			return time.Now(), ctx.Err()
		case <-c.t.done:
			return time.Now(), errServerClosed
		}
	}
}

func (c *engineClock) cached() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cachedN
}

// queued implements queueTimer.
func (c *engineClock) queued() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queue, c.queueOK
}

func (c *engineClock) release() {
	if c.closed {
		return
	}
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	c.mu.Lock()
	done := len(c.due) >= c.req.Output
	c.mu.Unlock()
	if !done {
		c.t.cluster.Cancel(c.req)
	}
}
