//go:build !linux

package runner

import "time"

// netpollWake is Linux's timerfd (wake_linux.go); elsewhere the pacer
// relies on its timer alone.
type netpollWake struct{}

func newNetpollWake() *netpollWake       { return nil }
func (w *netpollWake) arm(time.Duration) {}
func (w *netpollWake) close()            {}
