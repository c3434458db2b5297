package diagnosis

import (
	"math"
	"strconv"

	"github.com/infermatrix/infermatrix/internal/numfmt"
)

// sig quotes a figure to about three significant digits, as the
// prediction's evidence quotes them (numfmt.Sig): 6.05, 29.9, 812; a zero
// as 0.00.
func sig(v float64) string {
	if v == 0 {
		return "0.00"
	}
	return numfmt.Sig(v)
}

// ms is a time in milliseconds with its unit.
func ms(v float64) string { return sig(v) + " ms" }

// pct is a fraction as a percentage: whole points from 10%, one decimal
// below.
func pct(v float64) string {
	p := 100 * v
	if math.Abs(p) >= 10 {
		return strconv.FormatFloat(p, 'f', 0, 64) + "%"
	}
	return strconv.FormatFloat(p, 'f', 1, 64) + "%"
}

// ratio is a ratio to two decimals: 1.32.
func ratio(r float64) string { return strconv.FormatFloat(r, 'f', 2, 64) }

// count is a count: whole numbers with thousands separators (12,800),
// others as sig.
func count(v float64) string {
	if s, ok := numfmt.Grouped(v); ok {
		return s
	}
	return sig(v)
}

// level is a gauge of requests (waiting, running): whole numbers as they
// are, others to one decimal: 0, 0.2, 11, 7.9.
func level(v float64) string {
	if v == math.Trunc(v) {
		return count(v)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}
