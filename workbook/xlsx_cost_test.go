package workbook

import (
	"slices"
	"testing"

	"github.com/infermatrix/infermatrix/internal/recordfixture"
	"github.com/infermatrix/infermatrix/metrics"
)

// TestCostColumns: a priced run's Summary sheet ends with the cost columns
// decision.md shows, and an unpriced run's has none of them.
func TestCostColumns(t *testing.T) {
	r := recordfixture.Diagnosed(t)
	in := &Input{Plan: r.Plan, Manifest: r.Manifest, Summary: r.Summary, Decision: r.Decision, Analysis: r.Analysis, Records: r.Records}
	header := func() []string {
		rows, err := openXLSX(t, renderXLSX(t, in)).GetRows("Summary")
		if err != nil || len(rows) < 2 {
			t.Fatalf("Summary sheet: %v, %d lines", err, len(rows))
		}
		return rows[0]
	}
	if h := header(); slices.Contains(h, "$ per M output tokens") {
		t.Errorf("unpriced Summary header %q has cost columns", h)
	}
	sum := *r.Summary
	sum.Rows = slices.Clone(sum.Rows)
	for i := range sum.Rows {
		metrics.Price(&sum.Rows[i], metrics.Pricing{USDPerHour: 2.5, GPUs: 1})
	}
	in.Summary = &sum
	h := header()
	if len(h) < 5 || !slices.Equal(h[len(h)-5:], []string{"Price per hour ($)", "$ per M output tokens", "$ per M total tokens", "Output tokens per $", "Output tok/s per GPU"}) {
		t.Errorf("priced Summary header %q; want the cost columns last", h)
	}
}
