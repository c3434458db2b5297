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

// Decimals is the number of decimals that suits a value's size: enough
// digits to compare rows, no false precision.
func Decimals(v float64) int {
	switch a := abs64(v); {
	case a < 1:
		return 3
	case a < 10:
		return 2
	case a < 1000:
		return 1
	default:
		return 0
	}
}

// Num formats one measurement with the precision its size suits; whole
// numbers (counts, mostly) print without decimals.
func Num(v float64) string {
	if v == float64(int64(v)) && abs64(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', Decimals(v), 64)
}

func abs64(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// Plural is the "s" a count of n things takes in English: none for one.
func Plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Sig writes a measured figure to about three significant digits, as the
// predictions and the diagnosis quote their evidence: 812, 29.9, 6.05,
// 0.351.
func Sig(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
