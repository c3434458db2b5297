//go:build race

package calibrate

// raceEnabled shrinks the fit's test under the race detector, which slows
// the replays tenfold without changing what they compute.
const raceEnabled = true
