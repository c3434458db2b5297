//go:build !race

package compare

// raceEnabled: see race_test.go.
const raceEnabled = false
