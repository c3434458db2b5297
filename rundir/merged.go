package rundir

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
