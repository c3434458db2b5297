package suggest

import (
	"reflect"
	"testing"
)

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"abc", "abc", 0},
		{"concurency", "concurrency", 1},
		{"cnocurrency", "concurrency", 1}, // transposition
		{"rate", "arte", 1},
		{"kitten", "sitting", 3},
		{"", "abc", 3},
	}
	for _, tt := range tests {
		if got := Distance(tt.a, tt.b); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d; want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestClosest(t *testing.T) {
	keys := []string{"concurrency", "rate", "requests", "duration", "input_tokens", "output_tokens"}
	tests := []struct {
		name string
		want []string
	}{
		{"concurency", []string{"concurrency"}},
		{"Rate", []string{"rate"}},
		{"input_token", []string{"input_tokens"}},
		{"zzzzzz", nil},
		{"tokens", []string{"input_tokens", "output_tokens"}}, // containment
	}
	for _, tt := range tests {
		got := Closest(tt.name, keys, 3)
		if len(got) == 0 && len(tt.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Closest(%q) = %q; want %q", tt.name, got, tt.want)
		}
	}
}

func TestQuote(t *testing.T) {
	if got := Quote([]string{"a", "b", "c"}); got != "`a`, `b` or `c`" {
		t.Errorf("Quote = %q", got)
	}
}
