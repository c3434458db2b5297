//go:build !unix

package runner

import "time"

// processCPU is not measured where getrusage does not exist; the
// self-check then leaves the CPU figures out.
func processCPU() (time.Duration, bool) { return 0, false }
