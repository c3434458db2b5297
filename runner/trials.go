package runner

import (
	"fmt"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/telemetry"
)

// rowOptions are the settings a row's records are summarised with.
func (st *runState) rowOptions(row *schema.PlannedRow) metrics.Options {
	plan := st.plan
	opts := metrics.Options{Percentiles: plan.Percentiles, SLO: plan.SLO,
		Semantics: plan.Semantics, API: plan.RowAPI(row), Timeslice: plan.Timeslice.D().Nanoseconds(), Pricing: plan.RowPricing(row)}
	if row.Load.Mode == schema.ModeRate && row.Conversation == nil {
		// A conversation row's rate is of conversations; its requests
		// are their turns, and have no rate of their own to check.
		opts.RequestedRate = row.Load.Rate
		if st.shard.on() {
			// A shard is asked for every N-th arrival: 1/N of the rate.
			opts.RequestedRate /= float64(st.shard.Count)
		}
	}
	if row.Load.Mode == schema.ModeConcurrency && st.shard.on() && row.Load.Ramp == nil {
		if u := st.shard.split(row.Load.Concurrency); u != row.Load.Concurrency {
			opts.Users = u
		}
	}
	opts.OpenLoop = row.Load.Mode == schema.ModeRate || row.Load.Mode == schema.ModeTrace
	if st.dir != nil {
		// A long row's samples spill beside its requests.jsonl, on the
		// disk that already holds as much, not in a /tmp that may be
		// memory (tmpfs); the file is removed as soon as it is open.
		opts.SpillDir = st.dir.Path
	}
	opts.Ramp = row.Load.Ramp.Metrics()
	if opts.Ramp != nil && st.shard.on() {
		opts.Ramp.Share = 1 / float64(st.shard.Count)
	}
	return opts
}

// poolRow summarises a repeated row once its trials are over: the pooled
// figures, each trial's and the intervals (metrics.PoolTrials), written
// to rows/<id>/summary.json. A row with fewer trials than it asked for (a
// trial failed or was interrupted, or the run stopped before the row's
// last round) is marked interrupted, so it is never judged valid on part
// of its trials.
func (st *runState) poolRow(row *schema.PlannedRow, trials []metrics.RowSummary) metrics.RowSummary {
	status, errMsg := metrics.RowComplete, ""
	for _, t := range trials {
		switch {
		case t.Status == metrics.RowFailed && errMsg == "":
			status, errMsg = metrics.RowFailed, fmt.Sprintf("trial %d: %s", t.Trial, t.Error)
		case t.Status == metrics.RowInterrupted && status == metrics.RowComplete:
			status = metrics.RowInterrupted
		}
	}
	if status == metrics.RowComplete && len(trials) < row.Repeat {
		status = metrics.RowInterrupted
	}
	read := func(k int, fn func(*metrics.Record) error) error {
		return st.dir.ReadRecords(rundir.TrialRow(row.ID, k), fn)
	}
	s, err := metrics.PoolTrials(row.ID, row.Base, status, st.rowOptions(row), trials, read, st.plan.Confidence)
	if err != nil {
		s = metrics.RowSummary{ID: row.ID, Base: row.Base, Status: metrics.RowFailed, Trials: trials}
		errMsg = err.Error()
	}
	if err == nil {
		telemetry.PoolRow(&s)
	}
	if errMsg != "" {
		s.Status, s.Error = metrics.RowFailed, st.secrets.String(errMsg)
	}
	if err := st.dir.WriteJSON(rundir.RowFile(row.ID, rundir.SummaryFile), s); err != nil {
		st.logf("row %s: %v", row.ID, err)
	}
	return s
}
