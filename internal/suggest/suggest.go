// Package suggest finds the names a mistyped name was probably meant to be,
// for "did you mean" hints in experiment-file and expression errors.
package suggest

import (
	"sort"
	"strings"
)

// Closest returns up to max candidates close to name, best first. A
// candidate qualifies when its edit distance is small relative to its length,
// or when one name contains the other (ttft_p95 → ttft); an empty result
// means no hint is better than a wrong one.
func Closest(name string, candidates []string, max int) []string {
	type scored struct {
		s string
		d int
	}
	lname := strings.ToLower(name)
	var out []scored
	seen := map[string]bool{}
	for _, c := range candidates {
		if c == name || seen[c] {
			continue
		}
		seen[c] = true
		lc := strings.ToLower(c)
		d := Distance(lname, lc)
		limit := 1 + len(lname)/3
		if limit > 3 {
			limit = 3
		}
		switch {
		case d <= limit:
		case len(lc) >= 3 && len(lname) >= 3 && (strings.Contains(lname, lc) || strings.Contains(lc, lname)):
			d = limit + 1 // containment ranks after near-misses
		default:
			continue
		}
		out = append(out, scored{c, d})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].d != out[j].d {
			return out[i].d < out[j].d
		}
		return out[i].s < out[j].s
	})
	if len(out) > max {
		out = out[:max]
	}
	names := make([]string, len(out))
	for i, s := range out {
		names[i] = s.s
	}
	return names
}

// Distance is the optimal-string-alignment edit distance: insertions,
// deletions, substitutions and adjacent transpositions each cost one, so
// "concurency" and "cuncurrency" are both one or two edits from the truth.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// Quote formats names as `a`, `b` or `c` for a hint.
func Quote(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "`" + n + "`"
	}
	switch len(q) {
	case 0:
		return ""
	case 1:
		return q[0]
	default:
		return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
	}
}
