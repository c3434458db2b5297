package rundir

import "time"

// MergeInfo records where a merged run's records came from (infermatrix
// merge), so that a reader can go back to each shard's own directory and
// see which part of the load is absent.
type MergeInfo struct {
	// Count is how many shards the distributed run had; PlanSHA256 the
	// global plan they all derived their share from.
	Count      int    `json:"count"`
	PlanSHA256 string `json:"plan_sha256"`
	// From lists each shard merged, in index order.
	From []MergedShard `json:"from"`
	// Missing lists the indexes of shards not merged (the merged run is
	// INCONCLUSIVE when there are any).
	Missing []int `json:"missing,omitempty"`
	// Absent says why, for each path merge --wait was given that held no
	// finished shard when the wait ended.
	Absent []AbsentShard `json:"absent,omitempty"`
}

// MergedShard is one shard a merged run was made from.
type MergedShard struct {
	Index int    `json:"index"`
	Dir   string `json:"dir"`
	// Status is the shard's own run status (complete, interrupted, ...).
	Status string `json:"status"`
	// StartSkewNS is how late the shard began its first row against
	// the shared start (--start-at), as the shard measured it: the
	// spread of these says how well the shards were aligned.
	StartSkewNS int64 `json:"start_skew_ns,omitempty"`
	// StartAt and RowStarts are the shard's own (ShardInfo): when the
	// shared start was, and how late the shard began each row against
	// the plan's instant for it.
	StartAt   *time.Time `json:"start_at,omitempty"`
	RowStarts []RowStart `json:"row_starts,omitempty"`
}

// LateNS is how late the shard began a row against its planned start
// under --start-at: trial > 0 names a repeated row's trial. It reads the
// shard's RowStarts (an entry named for the trial, rows/<id>/trial-<k>,
// or else the trial-th entry named for the row), and for the run's first
// row of a shard that recorded none, its StartSkewNS. false when the shard
// had no shared start or did not record the row.
func (s *MergedShard) LateNS(row string, trial int, first bool) (int64, bool) {
	if s.StartAt == nil {
		return 0, false
	}
	if len(s.RowStarts) == 0 {
		return s.StartSkewNS, first && trial <= 1
	}
	if trial > 0 {
		for _, r := range s.RowStarts {
			if r.Row == TrialRow(row, trial) {
				return r.LateNS, true
			}
		}
	}
	seen := 0
	for _, r := range s.RowStarts {
		if r.Row == row {
			if seen++; seen == max(trial, 1) {
				return r.LateNS, true
			}
		}
	}
	return 0, false
}

// StartSpread is how far apart the merged shards began a row (trial > 0:
// that trial of it) under --start-at: the latest shard's lateness minus
// the earliest's. first says the row is the run's first, whose lateness a
// shard without RowStarts recorded as its start skew. false when fewer
// than two shards recorded it.
func (m *MergeInfo) StartSpread(row string, trial int, first bool) (time.Duration, bool) {
	var lo, hi int64
	n := 0
	for i := range m.From {
		late, ok := m.From[i].LateNS(row, trial, first)
		if !ok {
			continue
		}
		if n == 0 || late < lo {
			lo = late
		}
		if n == 0 || late > hi {
			hi = late
		}
		n++
	}
	return time.Duration(hi - lo), n >= 2
}

// AbsentShard is a path merge was given that held no finished shard when
// its wait (merge --wait) ended: why the shard is missing.
type AbsentShard struct {
	// Index is the shard's index when the path held its manifest (a
	// shard still running); 0 when the path held no run directory, so
	// which shard it was to hold is not known.
	Index  int    `json:"index,omitempty"`
	Dir    string `json:"dir"`
	Reason string `json:"reason"`
}
