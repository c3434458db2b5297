package verdict

import (
	"strconv"
	"strings"
)

// pluralS is "s" for any count but one.
func pluralS(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// intList writes shard indexes as "2, 4".
func intList(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ", ")
}
