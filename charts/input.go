// Package charts draws a judged run's plots (latency against throughput,
// server load, Pareto, CDFs, timeslices, TTFT against input length,
// predicted against measured TPOT) and the history's trend charts, as PNG
// and SVG that are the same bytes for the same input.
//
// It reads a run's plan, summary, decision (package verdict), analysis
// (package analysis) and records; it never imports reports or history,
// which embed and link its charts.
package charts

import (
	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

// Input is what the charts read of a judged run: reports builds it from
// its own input, so that charts need not know the decision record.
type Input struct {
	Plan     *schema.Plan
	Summary  *metrics.Summary
	Decision *verdict.Decision
	// Analysis places the sweeps' knees and operating points and holds
	// the predictions; nil draws the charts without them.
	Analysis *analysis.Analysis
	// Records calls fn for each per-request record of a row, in file
	// order (the CDF, timeslice and TTFT-against-input charts). It
	// streams: a million-request row is never in memory at once. Nil
	// when the records are not at hand.
	Records func(rowID string, fn func(*metrics.Record) error) error
}
