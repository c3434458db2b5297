package merge

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/validity"
)

// carry gives each merged row (each trial of a repeated one) what the
// union of the records cannot: the failures of the checks only a shard's
// live run makes (validity.LiveOnly), from the shard's own summary of the
// row, and how far apart the shards began it (--start-at). Validity reads
// both and makes the row invalid for either (validity's checkMerged).
func carry(sum *metrics.Summary, man *rundir.Manifest, shards []shard, plan *schema.Plan) error {
	for i := range sum.Rows {
		rs := &sum.Rows[i]
		if rs.Status == metrics.RowNotRun {
			continue
		}
		first := len(man.Rows) > 0 && man.Rows[0].ID == rs.ID
		if len(rs.Trials) == 0 {
			m, err := mergedRow(man.Merged, shards, plan.Validity, rs.ID, 0, first)
			if err != nil {
				return err
			}
			rs.Merged = m
			continue
		}
		for j := range rs.Trials {
			t := &rs.Trials[j]
			m, err := mergedRow(man.Merged, shards, plan.Validity, rs.ID, t.Trial, first)
			if err != nil {
				return err
			}
			t.Merged = m
		}
	}
	return nil
}

// mergedRow is one row's (trial > 0: one trial's) MergedRow; nil when
// there is nothing to carry.
func mergedRow(info *rundir.MergeInfo, shards []shard, cfg schema.ValidityPlan, rowID string, trial int, first bool) (*metrics.MergedRow, error) {
	m := &metrics.MergedRow{}
	if spread, ok := info.StartSpread(rowID, trial, first); ok {
		ns := spread.Nanoseconds()
		m.StartSpreadNS = &ns
	}
	part := rowID
	if trial > 0 {
		part = rundir.TrialRow(rowID, trial)
	}
	for _, s := range shards {
		own, err := shardRowSummary(s.dir, part)
		if err != nil {
			return nil, err
		}
		if own == nil {
			if _, err := os.Stat(s.dir.RecordsPath(part)); err == nil {
				// Killed during the row: what it measured live is lost.
				m.Unmeasured = append(m.Unmeasured, s.man.Shard.Index)
			}
			continue
		}
		if own.Status == metrics.RowNotRun {
			continue
		}
		var row *schema.PlannedRow
		for i := range s.man.Rows {
			if s.man.Rows[i].ID == rowID {
				row = &s.man.Rows[i]
			}
		}
		v := validity.Row(validity.Input{Row: row, Summary: own, Config: cfg})
		for _, r := range v.Reasons {
			if slices.Contains(validity.LiveOnly, r.Check) {
				m.ShardInvalid = append(m.ShardInvalid, metrics.ShardReason{
					Shard: s.man.Shard.Index, Count: s.man.Shard.Count, Check: r.Check, Message: r.Message, Fix: r.Fix})
			}
		}
	}
	if m.StartSpreadNS == nil && len(m.ShardInvalid) == 0 && len(m.Unmeasured) == 0 {
		return nil, nil
	}
	return m, nil
}

// shardRowSummary reads a shard's own summary of a row (or trial): nil
// when it has none, as a shard killed during the row has not.
func shardRowSummary(d *rundir.Dir, part string) (*metrics.RowSummary, error) {
	b, err := os.ReadFile(filepath.Join(d.Path, rundir.RowFile(part, rundir.SummaryFile)))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rs metrics.RowSummary
	if err := json.Unmarshal(b, &rs); err != nil {
		return nil, nil // torn by a kill: as good as absent
	}
	return &rs, nil
}
