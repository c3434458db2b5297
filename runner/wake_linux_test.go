package runner

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestPacerHasTimerfd: on Linux the pacer must get its timerfd, in the
// runtime's poller (newNetpollWake checks that the poller took it), or
// its wakes fall back to whole milliseconds without a word; and a sleep
// with it armed ends at its deadline, not before.
func TestPacerHasTimerfd(t *testing.T) {
	p := newPacer()
	defer p.close()
	if p.wake == nil {
		t.Fatal("no timerfd: the pacer would wake in whole milliseconds")
	}
	for range 20 {
		due := time.Now().Add(300 * time.Microsecond)
		if !p.sleepUntil(context.Background(), nil, due) {
			t.Fatal("sleepUntil gave up without being stopped")
		}
		if now := time.Now(); now.Before(due) {
			t.Fatalf("woke %v before the deadline", due.Sub(now))
		}
	}
}

// BenchmarkPacerWake measures how late the pacer wakes for deadlines
// 50 µs to 1.5 ms away in an otherwise idle process, on its timer alone
// and with the timerfd that wakes the runtime's poller (netpollWake).
// On an idle process Go's timers wake in whole milliseconds
// (runtime/netpoll_epoll.go); the timerfd is what brings the open loop's
// dispatch lag under a millisecond. Reports p50, p90 and p99 lateness.
func BenchmarkPacerWake(b *testing.B) {
	for _, wake := range []bool{false, true} {
		for _, d := range []time.Duration{50 * time.Microsecond, 200 * time.Microsecond, 700 * time.Microsecond, 1500 * time.Microsecond} {
			b.Run(fmt.Sprintf("timerfd=%v/in=%v", wake, d), func(b *testing.B) {
				p := newPacer()
				defer p.close()
				p.spins = false // the spin is for spare processors; measure the sleep
				if !wake {
					p.wake.close()
					p.wake = nil
				} else if p.wake == nil {
					b.Skip("no timerfd here")
				}
				var late []float64
				for b.Loop() {
					due := time.Now().Add(d)
					p.sleepUntil(context.Background(), nil, due)
					late = append(late, float64(time.Since(due).Microseconds()))
				}
				slices.Sort(late)
				q := func(x float64) float64 { return late[min(len(late)-1, int(x*float64(len(late))))] }
				b.ReportMetric(q(0.5), "late-p50-µs")
				b.ReportMetric(q(0.9), "late-p90-µs")
				b.ReportMetric(q(0.99), "late-p99-µs")
			})
		}
	}
}
