package runner

import (
	"context"
	"runtime"
	"time"
)

// pacer waits for dispatch deadlines precisely and cheaply. Go's timers can
// fire up to about a millisecond late (on an idle Linux process the runtime
// sleeps in epoll with millisecond resolution), which at thousands of
// requests per second would send each request late and bunch them: not the
// arrival process the row asked for. So the pacer sleeps on a timer until
// shortly before a deadline and spins, yielding the processor, for the rest.
// The spin window adapts to how late the timer actually fires: on a busy
// process, where the runtime checks timers often, it shrinks and the spin
// costs little CPU; where timers are coarse it grows, up to maxSpin.
type pacer struct {
	timer *time.Timer
	spin  time.Duration
}

const (
	minSpin = 50 * time.Microsecond
	maxSpin = 2 * time.Millisecond
)

func newPacer() *pacer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &pacer{timer: t, spin: time.Millisecond}
}

func (p *pacer) close() { p.timer.Stop() }

// sleepUntil waits until the wall clock reaches due, or until ctx ends or
// stop is closed, in which case it reports false.
func (p *pacer) sleepUntil(ctx context.Context, stop <-chan struct{}, due time.Time) bool {
	if d := time.Until(due) - p.spin; d > 0 {
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
		p.adapt(time.Until(due))
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
