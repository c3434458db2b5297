package runner

import (
	"fmt"
	"strings"
	"time"

	"github.com/infermatrix/infermatrix/schema"
)

// CheckDistributed reports, all at once, why a plan cannot run as n
// shards from a shared start (--shard I/N --start-at): what Run would
// refuse on every shard, found before any pod is scheduled
// (infermatrix k8s).
func CheckDistributed(plan *schema.Plan, n int) error {
	p := shardProblems(plan, Shard{Index: 1, Count: n})
	p = append(p, startProblems(plan)...)
	if len(p) > 0 {
		return fmt.Errorf("%w: %d problem%s for %d shards from a shared start:\n  %s", ErrBadShard, len(p), map[bool]string{true: "s"}[len(p) > 1], n, strings.Join(p, "\n  "))
	}
	return nil
}

// PlanLength is how long a plan's rows take from a shared start at most:
// every row's slot and the gap after it, as startClock schedules them. A
// last row stopped only by a request count has no planned length: bounded
// is then false and the length covers the rows before it.
func PlanLength(plan *schema.Plan) (length time.Duration, bounded bool) {
	bounded = true
	for i := range plan.Rows {
		r := &plan.Rows[i]
		if r.Duration == 0 {
			bounded = false
		}
		length += time.Duration(r.Trials()) * (rowSlot(r) + StartGap)
	}
	return length, bounded
}

// MaxGrace is the longest grace period of the plan's rows: how long a
// stopped run may still wait for requests in flight before its records
// are final.
func MaxGrace(plan *schema.Plan) time.Duration {
	var g time.Duration
	for i := range plan.Rows {
		g = max(g, plan.Rows[i].Grace.D())
	}
	return g
}
