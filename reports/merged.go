package reports

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/telemetry"
)

// SummariseRecords summarises every row of a run from its records and
// telemetry, with the run's settings, as a rebuild does (summariseFiles),
// ignoring any summary files: infermatrix merge writes the union of its
// shards' records into one directory and summarises that, so that every
// figure, percentiles included, is computed exactly from the union. A row
// without a records file did not run. status is the status each row that
// ran is given. A repeated row is summarised trial by trial from each
// trial's records (rows/<id>/trial-<k>/), then pooled as the run pools
// them (metrics.PoolTrials); its summary's Trials are each trial's, less
// their timeslices.
func SummariseRecords(dir *rundir.Dir, man *rundir.Manifest, plan *schema.Plan, status string) (*metrics.Summary, error) {
	sum := &metrics.Summary{
		Format: metrics.SummaryFormat, Experiment: man.Experiment.Name,
		Percentiles: plan.Percentiles, SLO: man.SLO, Virtual: man.Virtual,
		Semantics: man.Semantics, SemanticsNotes: metrics.SemanticsNotes(man.Semantics, man.SLO),
	}
	sum.Interrupted = status == metrics.RowInterrupted
	api := orDefault(man.Server.Declared.API, plan.Server.API)
	for i := range man.Rows {
		row := &man.Rows[i]
		if n := dir.Trials(row.ID); n > 0 {
			s, err := summariseTrialRecords(dir, row, rowOptions(plan, row, api, sum), status, plan, n)
			if err != nil {
				return nil, err
			}
			sum.Rows = append(sum.Rows, s)
			continue
		}
		if _, err := os.Stat(dir.RecordsPath(row.ID)); errors.Is(err, fs.ErrNotExist) {
			sum.Rows = append(sum.Rows, metrics.RowSummary{ID: row.ID, Base: row.Base, Status: metrics.RowNotRun})
			continue
		}
		s, _, err := summariseFiles(dir, row.ID, row.ID, row.Base, rowOptions(plan, row, api, sum), status, plan.Telemetry.Interval.D())
		if err != nil {
			return nil, err
		}
		sum.Rows = append(sum.Rows, s)
	}
	return sum, nil
}

// PlanOf parses the experiment a run directory holds, checked against
// the hash its manifest recorded, with the settings the run used: the
// plan a merge judges the merged run by.
func PlanOf(dir *rundir.Dir, man *rundir.Manifest) (*schema.Plan, error) { return ownPlan(dir, man) }

// summariseTrialRecords summarises each of a repeated row's n trials from
// its records and pools them, as the run does at the row's end (runner's
// poolRow). A row with fewer trials than it asked for is interrupted, so
// it is never judged valid on part of its trials.
func summariseTrialRecords(dir *rundir.Dir, row *schema.PlannedRow, opts metrics.Options, status string, plan *schema.Plan, n int) (metrics.RowSummary, error) {
	trials := make([]metrics.RowSummary, 0, n)
	for k := 1; k <= n; k++ {
		st := status
		if k == n && n < row.Repeat {
			st = metrics.RowInterrupted
		}
		t, _, err := summariseFiles(dir, rundir.TrialRow(row.ID, k), row.ID, row.Base, opts, st, plan.Telemetry.Interval.D())
		if err != nil {
			return metrics.RowSummary{}, fmt.Errorf("row %s trial %d: %w", row.ID, k, err)
		}
		t.Trial = k
		trials = append(trials, t)
	}
	if n < row.Repeat && status == metrics.RowComplete {
		status = metrics.RowInterrupted
	}
	read := func(k int, fn func(*metrics.Record) error) error {
		return dir.ReadRecords(rundir.TrialRow(row.ID, k), fn)
	}
	rs, err := metrics.PoolTrials(row.ID, row.Base, status, opts, trials, read, plan.Confidence)
	if err != nil {
		return metrics.RowSummary{}, fmt.Errorf("row %s: %w", row.ID, err)
	}
	telemetry.PoolRow(&rs)
	return rs, nil
}
