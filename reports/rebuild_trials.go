package reports

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/telemetry"
)

// rebuildTrials puts a repeated row's summary together when the run did
// not write it (it was killed during or after the row's trials): each
// trial from its own summary.json where that is intact, otherwise from
// its records, then pooled as the run pools them (metrics.PoolTrials). A
// row with fewer trials on disk than it asked for is interrupted. notes
// report torn record lines; fromRecords says whether any trial was
// summarised again from its records.
func rebuildTrials(dir *rundir.Dir, row *schema.PlannedRow, opts metrics.Options, status string, plan *schema.Plan) (rs metrics.RowSummary, notes []string, fromRecords bool, err error) {
	n := dir.Trials(row.ID)
	trials := make([]metrics.RowSummary, 0, n)
	for k := 1; k <= n; k++ {
		part := rundir.TrialRow(row.ID, k)
		if t, err := trialSummaryFile(dir, row.ID, k); err == nil {
			trials = append(trials, *t)
			continue
		} else if !damaged(err) {
			return rs, nil, false, err
		}
		st := status
		if k == n && n < row.Repeat {
			st = metrics.RowInterrupted
		}
		t, torn, err := summariseFiles(dir, part, row.ID, row.Base, opts, st, plan.Telemetry.Interval.D())
		if err != nil {
			return rs, nil, false, err
		}
		if torn > 0 {
			notes = append(notes, fmt.Sprintf("%s: line %d is torn (a partial write when the run was killed); skipped",
				filepath.ToSlash(rundir.RowFile(part, rundir.RecordsFile)), torn))
		}
		t.Trial, t.Rebuilt = k, true
		trials = append(trials, t)
		fromRecords = true
	}
	if n < row.Repeat && status == metrics.RowComplete {
		status = metrics.RowInterrupted
	}
	read := func(k int, fn func(*metrics.Record) error) error {
		return dir.ReadRecords(rundir.TrialRow(row.ID, k), fn)
	}
	rs, err = metrics.PoolTrials(row.ID, row.Base, status, opts, trials, read, plan.Confidence)
	if err == nil {
		telemetry.PoolRow(&rs)
	}
	return rs, notes, fromRecords, err
}

// trialSummaryFile reads trial k's own summary.json, written when the
// trial ended.
func trialSummaryFile(dir *rundir.Dir, id string, k int) (*metrics.RowSummary, error) {
	b, err := os.ReadFile(filepath.Join(dir.Path, rundir.RowFile(rundir.TrialRow(id, k), rundir.SummaryFile)))
	if err != nil {
		return nil, err
	}
	var rs metrics.RowSummary
	if err := json.Unmarshal(b, &rs); err != nil {
		return nil, err
	}
	if rs.ID != id || rs.Trial != k {
		return nil, &json.UnmarshalTypeError{Value: fmt.Sprintf("row %s trial %d", rs.ID, rs.Trial), Field: "trial"} // not this trial's: as good as torn
	}
	return &rs, nil
}

// restoreTrials is restoreSamples for a repeated row: the row is pooled
// again from its trials' records (metrics.PoolTrials), so that p(metric,
// q) reads the pooled samples. The trials' own summaries are the stored
// ones, or with resummarize (other semantics) each trial's records
// summarised again, keeping the client self-check the live run measured.
func restoreTrials(dir *rundir.Dir, plan *schema.Plan, row *schema.PlannedRow, opts metrics.Options, rs *metrics.RowSummary, resummarize bool) []string {
	trials := append([]metrics.RowSummary(nil), rs.Trials...)
	if resummarize {
		for i := range trials {
			t := &trials[i]
			re, _, err := summariseFiles(dir, rundir.TrialRow(row.ID, t.Trial), t.ID, t.Base, opts, t.Status, plan.Telemetry.Interval.D())
			if err != nil {
				return []string{fmt.Sprintf("row %s: judged on summary.json as stored, where p(metric, q) reads only its percentiles: trial %d: %v", rs.ID, t.Trial, err)}
			}
			lag := re.SelfCheck.DispatchLag
			re.SelfCheck, re.SelfCheck.DispatchLag = t.SelfCheck, lag
			re.Trial, re.Error, re.Rebuilt, re.Merged = t.Trial, t.Error, t.Rebuilt, t.Merged
			re.Requests.Unsent, re.ScheduleStartNS = t.Requests.Unsent, t.ScheduleStartNS
			*t = re
		}
	}
	read := func(k int, fn func(*metrics.Record) error) error {
		return dir.ReadRecords(rundir.TrialRow(row.ID, k), fn)
	}
	level := plan.Confidence
	if rs.Intervals != nil && !resummarize {
		level = rs.Intervals.Level
	}
	re, err := metrics.PoolTrials(rs.ID, rs.Base, rs.Status, opts, trials, read, level)
	if err != nil {
		return []string{fmt.Sprintf("row %s: judged on summary.json as stored, where p(metric, q) reads only its percentiles: %v", rs.ID, err)}
	}
	telemetry.PoolRow(&re)
	re.Error, re.Rebuilt = rs.Error, rs.Rebuilt
	if resummarize {
		*rs = re
		return nil
	}
	if !sameJSON(&re, rs) {
		re.Timeslices = rs.Timeslices
	}
	if !sameJSON(asStored(&re, rs), rs) {
		return []string{fmt.Sprintf("row %s: its trials' records do not reproduce summary.json; judged on summary.json as stored, where p(metric, q) reads only its percentiles", rs.ID)}
	}
	*rs = re
	return nil
}
