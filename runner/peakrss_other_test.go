//go:build !unix

package runner

// peakRSSMB has no figure here: the benchmarks then leave peak-rss-MB out.
func peakRSSMB() (float64, bool) { return 0, false }
