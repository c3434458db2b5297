package validity

import (
	"strconv"
	"strings"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

// Alignment is the check that a merged row's shards began it together
// (run --shard I/N --start-at). Like Complete it is no threshold and
// cannot be ignored: a row whose shards began it apart measured a load
// other than its own.
const Alignment = "alignment"

// LiveOnly are the checks only a live run can make: their figures (the
// client process's CPU use, its timer probe, the built-in server's own
// lateness and ground truth) are measured while the row runs and are not
// in its records, so a row summarised again from records (a rebuilt run,
// a merged one) lacks them. A merged row carries its shards' failures of
// these checks instead (metrics.MergedRow).
var LiveOnly = []string{ClientCPU, ClientStall, Simulator, StampError}

// The alignment limit: the larger of AlignmentFloor and AlignmentShare of
// the row's planned length (warmup_duration + duration).
//
// Why: with the shards' starts s apart, for s at the row's start only
// some shards send, and for s at its end only the others still do; the
// rest of the window carries the row's whole load. Over a row of length
// D the mean load the server saw is off by at most s/D (two stretches of
// s, each at about half the load on average), so s ≤ 1% of D keeps the
// union's load within 1% of the row's, a tenth of the load check's
// default tolerance. The floor: the shards' clocks agree only as well as
// NTP keeps them (a few to tens of milliseconds between nodes), and a
// shard launched by a scheduler begins its first row a little late on a
// busy node; 250 ms allows that, and for the shortest rows a shared start
// is for (10 s and up) it is still at most 2.5% of the load.
const (
	AlignmentFloor = 250 * time.Millisecond
	AlignmentShare = 0.01
)

// AlignmentLimit is how far apart a merged row's shards may have begun
// it: max(AlignmentFloor, AlignmentShare × its planned length). A row
// without a planned length (stopped by a request count) gets the floor.
func AlignmentLimit(row *schema.PlannedRow) time.Duration {
	if row == nil {
		return AlignmentFloor
	}
	d := row.WarmupDuration.D() + row.Duration.D()
	return max(AlignmentFloor, time.Duration(AlignmentShare*float64(d)))
}

// checkMerged makes a merged row invalid for each failure its shards'
// own live checks found (each said with its shard: "shard 2/4: ..."), and
// when its shards began it further apart than AlignmentLimit.
func checkMerged(row *schema.PlannedRow, m *metrics.MergedRow, cfg schema.ValidityPlan, fail func(string, string, string, ...any), note func(string, ...any)) {
	if m == nil {
		return
	}
	if len(m.Unmeasured) > 0 {
		var unmeasured []string
		for _, c := range LiveOnly {
			if !cfg.Ignores(c) {
				unmeasured = append(unmeasured, c)
			}
		}
		if len(unmeasured) > 0 {
			note("%s: not measured on shard %s: it stopped during the row without writing the row's summary, and only a live run measures the client's CPU use, its timer probe and the built-in server's own timing",
				strings.Join(unmeasured, ", "), joinInts(m.Unmeasured))
		}
	}
	for _, r := range m.ShardInvalid {
		fail(r.Check, r.Fix, "shard %d/%d: %s", r.Shard, r.Count, r.Message)
	}
	if m.StartSpreadNS == nil {
		return
	}
	spread, limit := time.Duration(*m.StartSpreadNS), AlignmentLimit(row)
	if spread > limit {
		fail(Alignment, "find why a shard began late (the shard's decision.md Shard line, its log: a row before it that overran its slot, a pod that started late, clocks out of step) and run again; a longer row, or a --start-at further ahead of the pods' start, tolerates more",
			"the shards began the row %v apart (limit %v, the larger of %v and %g%% of the row's planned length): for that long at each end only some shards sent, so the union's load is not the row's",
			spread.Round(time.Millisecond), limit.Round(time.Millisecond), AlignmentFloor, 100*AlignmentShare)
	}
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}
