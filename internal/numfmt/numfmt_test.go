package numfmt

import (
	"math"
	"testing"
)

func TestGrouped(t *testing.T) {
	for _, tt := range []struct {
		v    float64
		want string
		ok   bool
	}{
		{0, "0", true}, {999, "999", true}, {1000, "1,000", true}, {403888, "403,888", true},
		{-12800, "-12,800", true}, {1234567, "1,234,567", true},
		{2.5, "", false}, {1e15, "", false}, {math.NaN(), "", false},
	} {
		got, ok := Grouped(tt.v)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Grouped(%v) = %q, %v; want %q, %v", tt.v, got, ok, tt.want, tt.ok)
		}
	}
}
