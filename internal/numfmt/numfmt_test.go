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

func TestNum(t *testing.T) {
	for _, tt := range []struct {
		v    float64
		want string
	}{
		{3, "3"}, {-40, "-40"}, {2.5, "2.50"}, {0.1234, "0.123"}, {-12.34, "-12.3"},
		{1234.6, "1235"}, {1e15, "1000000000000000"}, {math.NaN(), "NaN"},
	} {
		if got := Num(tt.v); got != tt.want {
			t.Errorf("Num(%v) = %q; want %q", tt.v, got, tt.want)
		}
	}
}

func TestPlural(t *testing.T) {
	if Plural(1) != "" || Plural(0) != "s" || Plural(2) != "s" {
		t.Errorf("Plural(1, 0, 2) = %q, %q, %q; want \"\", s, s", Plural(1), Plural(0), Plural(2))
	}
}
