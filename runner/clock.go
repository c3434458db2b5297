package runner

import (
	"context"
	"runtime"
	"time"
)

// pacer waits for dispatch deadlines. Go's timers can fire up to about a
// millisecond late (on an idle Linux process the runtime sleeps in epoll
// with millisecond resolution), which at thousands of requests per second
// sends requests late and bunched. On Linux a timerfd armed with the
// timer wakes the runtime at the deadline instead (netpollWake), and the
// pacer wakes within about 0.1 ms (BenchmarkPacerWake). Where the process
// has processors to spare (GOMAXPROCS of 3 or more), the pacer also sleeps
// only until shortly before a deadline and spins, yielding, for the rest;
// the spin window adapts to how late the timer actually fires.
//
// With fewer processors it only sleeps. A goroutine that spins
// keeps its processor busy, and the runtime then looks for sockets with
// data to read less often: on two cores, spinning cut the p99 dispatch lag
// but made the client stamp arriving tokens late by more (a p99 of 1.5 ms
// against 0.8 ms without it), and timing what arrives is what the tool is
// for. Dispatch lag is measured and reported either way.
type pacer struct {
	timer *time.Timer
	spin  time.Duration
	// spins is false where there is no processor to spare.
	spins bool
	// wake, where the platform has one, wakes the runtime's poller at
	// the timer's instant (nil otherwise).
	wake *netpollWake
}

const (
	minSpin = 50 * time.Microsecond
	maxSpin = 2 * time.Millisecond
)

func newPacer() *pacer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &pacer{timer: t, spin: time.Millisecond, spins: runtime.GOMAXPROCS(0) >= spareProcs, wake: newNetpollWake()}
}

// spareProcs is the GOMAXPROCS from which the pacer spins: one processor
// for the spin, and two for the requests it dispatches.
const spareProcs = 3

func (p *pacer) close() {
	p.timer.Stop()
	p.wake.close()
}

// sleepUntil waits until the wall clock reaches due, or until ctx ends or
// stop is closed, in which case it reports false.
func (p *pacer) sleepUntil(ctx context.Context, stop <-chan struct{}, due time.Time) bool {
	spin := p.spin
	if !p.spins {
		spin = 0
	}
	if d := time.Until(due) - spin; d > 0 {
		p.wake.arm(d)
		p.timer.Reset(d)
		select {
		case <-ctx.Done():
			p.timer.Stop()
			return false
		case <-stop:
			p.timer.Stop()
			return false
		case <-p.timer.C:
		}
		if p.spins {
			p.adapt(time.Until(due))
		}
	}
	for time.Now().Before(due) {
		select {
		case <-ctx.Done():
			return false
		case <-stop:
			return false
		default:
		}
		// Yield rather than hold the processor: a request that is due
		// must start on time too, and a pure spin starves them.
		runtime.Gosched()
	}
	return true
}

// adapt moves the spin window a quarter of the way towards twice the
// timer's last overshoot (plus minSpin), given how much time was left
// before the deadline when the timer fired.
func (p *pacer) adapt(left time.Duration) {
	overshoot := p.spin - left
	target := 2*overshoot + minSpin
	p.spin += (target - p.spin) / 4
	p.spin = min(max(p.spin, minSpin), maxSpin)
}
