package runner

import (
	"context"
	"runtime"
	"time"
)

// spinWindow is how long before a dispatch deadline the dispatcher stops
// sleeping on a timer and spins instead. Go's timers fire up to about a
// millisecond late on many Linux hosts; an open-loop row at thousands of
// requests per second would otherwise send each one late by that much, and
// bunch them, which is exactly the arrival process the row did not ask for.
const spinWindow = 1500 * time.Microsecond

// sleepUntil waits until the wall clock reaches due, or until one of the
// channels is closed (ctx ends, the row stops), in which case it reports
// false. It sleeps on timer while the deadline is far and spins, yielding
// the processor, for the last spinWindow, so that dispatch is late by
// microseconds rather than by a timer's granularity. timer is reused
// across calls by one goroutine.
func sleepUntil(ctx context.Context, stop <-chan struct{}, timer *time.Timer, due time.Time) bool {
	if d := time.Until(due) - spinWindow; d > 0 {
		timer.Reset(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-stop:
			timer.Stop()
			return false
		case <-timer.C:
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
		runtime.Gosched()
	}
	return true
}
