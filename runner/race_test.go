//go:build race

package runner

// raceEnabled loosens timing bounds under the race detector, which slows
// the client several times over.
const raceEnabled = true
