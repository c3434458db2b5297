//go:build race

package compare

// raceEnabled: tests that only compute (bootstraps, a calibration fit)
// skip under the race detector, which slows them sixfold with no
// goroutines to check; make test runs them again without it (Makefile).
const raceEnabled = true
