package runner

import (
	"errors"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// netpollWake makes the Go runtime wake at a given instant with the
// kernel's timer precision instead of a millisecond's.
//
// When every goroutine of the process is blocked, the runtime sleeps in
// epoll_wait until its next timer is due, and epoll_wait counts in whole
// milliseconds: a timer due in 200 µs fires after about 1 ms, a timer due in
// 1.5 ms after about 2 (runtime/netpoll_epoll.go rounds up to 1 ms, and
// down beyond). At thousands of arrivals a second most gaps are shorter
// than that, so on an idle client each one left up to a millisecond late,
// which was most of the open loop's dispatch lag on two cores (p90 1.1 ms).
//
// A timerfd armed for the same instant is registered with the runtime's
// poller: when it expires the kernel wakes epoll_wait at once, and the
// runtime, awake, finds the pacer's timer due and runs it. Nothing reads the
// timerfd: the poller is edge-triggered and every expiry wakes it, and what
// matters is the wake, not the count. Unlike a spin this costs nothing
// between arrivals, so it holds no processor that the goroutines reading
// streams need (see pacer).
type netpollWake struct {
	f  *os.File
	fd uintptr
}

// newNetpollWake returns nil where the timerfd cannot be made or the
// runtime's poller does not take it; the pacer then relies on its timer
// alone.
func newNetpollWake() *netpollWake {
	const clockMonotonic = 1 // CLOCK_MONOTONIC, the clock of Go's timers
	fd, _, errno := syscall.Syscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errno != 0 {
		return nil
	}
	f := os.NewFile(fd, "timerfd")
	// os.NewFile registers a non-blocking descriptor with the poller when
	// it can; a file outside the poller takes no deadline.
	if err := f.SetReadDeadline(time.Time{}); errors.Is(err, os.ErrNoDeadline) {
		_ = f.Close()
		return nil
	}
	return &netpollWake{f: f, fd: fd}
}

// itimerspec is the kernel's struct itimerspec.
type itimerspec struct {
	interval, value syscall.Timespec
}

// arm makes the poller wake d from now (d > 0), replacing any earlier
// instant. A wake that comes when nothing is due any more is harmless.
func (w *netpollWake) arm(d time.Duration) {
	if w == nil || d <= 0 {
		return
	}
	its := itimerspec{value: syscall.NsecToTimespec(d.Nanoseconds())}
	_, _, _ = syscall.Syscall6(syscall.SYS_TIMERFD_SETTIME, w.fd, 0, uintptr(unsafe.Pointer(&its)), 0, 0, 0)
}

func (w *netpollWake) close() {
	if w != nil {
		_ = w.f.Close()
	}
}
