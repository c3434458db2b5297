//go:build unix

package runner

import (
	"runtime"
	"syscall"
)

// peakRSSMB is this process's peak resident memory in MB; false where the
// system does not say. ru_maxrss is in KiB, but in bytes on Darwin.
func peakRSSMB() (float64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	kib := float64(ru.Maxrss)
	if runtime.GOOS == "darwin" {
		kib /= 1024
	}
	return kib / 1024, true
}
