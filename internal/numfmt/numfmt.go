// Package numfmt formats numbers for people, in the one way every record
// (decision.md, the diagnosis, the prediction table) writes them.
package numfmt

import (
	"math"
	"strconv"
)

// Grouped writes a whole number with thousands separators (403,888;
// -12,800) and reports true; for a number with a fraction, or one too large
// to be an exact integer, it returns "" and false, for the caller's own
// format.
func Grouped(v float64) (string, bool) {
	if v != math.Trunc(v) || math.Abs(v) >= 1e15 {
		return "", false
	}
	s := strconv.FormatInt(int64(math.Abs(v)), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if v < 0 {
		s = "-" + s
	}
	return s, true
}
