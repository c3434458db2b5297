package metrics

// MergedRow is what a merged run's row (infermatrix merge) keeps of its
// shards beyond their records: the union of the records gives every
// figure again, but not what each shard measured of itself while it ran,
// nor whether the shards began the row together. Both can make the merged
// row's figures untrustworthy, so validity reads them here.
type MergedRow struct {
	// ShardInvalid are the reasons a shard's own summary of the row was
	// invalid for, among the checks only a live run can make (the
	// client's CPU use, its timer probe, the built-in server's timing,
	// the client's stamps against the server's ground truth): a rebuild
	// from the union's records cannot make them again, and a shard that
	// measured itself rather than the server spoils the union.
	ShardInvalid []ShardReason `json:"shard_invalid,omitempty"`
	// StartSpreadNS is how far apart the shards began the row under
	// --start-at (the latest shard's lateness minus the earliest's), nil
	// when fewer than two shards recorded when they began it. While the
	// first shards have begun and the last has not, and again at the end,
	// only some shards send, so the union's load is not the row's.
	StartSpreadNS *int64 `json:"start_spread_ns,omitempty"`
	// Unmeasured lists the shards (by index) that sent the row but have
	// no summary of it (killed during it): their live checks could not be
	// made, which validity notes rather than pass in silence.
	Unmeasured []int `json:"unmeasured,omitempty"`
}

// ShardReason is one failed validity check of one shard's own row.
type ShardReason struct {
	// Shard and Count place the shard: shard 2 of 4.
	Shard int `json:"shard"`
	Count int `json:"count"`
	// Check, Message and Fix are the shard's own failed check, as
	// validity reported it.
	Check   string `json:"check"`
	Message string `json:"message"`
	Fix     string `json:"fix"`
}
