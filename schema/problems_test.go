package schema

import (
	"errors"
	"testing"
)

// problemsText parses src as test.yaml and returns its problems, one a
// line with their hints, failing the test unless the file is refused with
// Problems: the tests of each section's checks read what a user reads.
func problemsText(t *testing.T, src string) string {
	t.Helper()
	_, err := Parse("test.yaml", []byte(src), Options{})
	var probs Problems
	if !errors.As(err, &probs) {
		t.Fatalf("Parse: %v; want problems", err)
	}
	return probs.Error()
}
