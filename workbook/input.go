// Package workbook writes results.xlsx: the summary, acceptance,
// predictions, telemetry, diagnosis, charts and every request of a judged
// run in one workbook, the same bytes for the same input.
//
// It reads a small Input that reports builds from its own, and the
// sentences it shares with decision.md and report.html from package
// record; it never imports reports, which calls it.
package workbook

import (
	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

// Input is what the workbook reads of a judged run: reports builds it from
// its own input, so that the workbook need not know how the record is
// rendered or written.
type Input struct {
	Plan     *schema.Plan
	Manifest *rundir.Manifest
	Summary  *metrics.Summary
	Decision *verdict.Decision
	// Analysis holds the sweeps and predictions; nil leaves them out, and
	// the diagnosis is then computed from the above.
	Analysis *analysis.Analysis
	// Records calls fn for each per-request record of a row, in file
	// order, for the request sheets. It streams: a million-request row is
	// never in memory at once. Nil when the records are not at hand.
	Records func(rowID string, fn func(*metrics.Record) error) error
	// JudgedBy names the experiment file (and its hash) that judged the
	// run when it is not the one the run was made with.
	JudgedBy string
	// Baseline is the run the rules' baseline.<metric> read; nil for none.
	Baseline *verdict.Baseline
}
