//go:build race

package engine

// raceEnabled shortens the calibration's measured window under the race
// detector, which slows the simulation tenfold without changing its result.
const raceEnabled = true
