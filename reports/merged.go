package reports

import (
	"errors"
	"io/fs"
	"os"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
)

// SummariseRecords summarises every row of a run from its records and
// telemetry, with the run's settings, as a rebuild does (summariseFiles),
// ignoring any summary files: infermatrix merge writes the union of its
// shards' records into one directory and summarises that, so that every
// figure, percentiles included, is computed exactly from the union. A row
// without a records file did not run. status is the status each row that
// ran is given. Rows kept in trials (repeat) are not summarised here.
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
