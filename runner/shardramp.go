package runner

import (
	"time"

	"github.com/infermatrix/infermatrix/schema"
)

// A ramped row under run --shard I/N: each step's load is divided as the
// row kind divides it. A rate ramp's arrivals are one global schedule
// (rampArrivals), thinned to every N-th arrival like any open loop's; a
// concurrency ramp's users are dealt out in turn (rampUsers). The steps keep the row's global times: every shard opens
// its step clock at the instant the unsharded row would (openShardRamp),
// not at its own first measured request, so that shards started together
// (--start-at) step together, and a shard's request is stamped with the
// step the unsharded run would have stamped it with.

// rampUsers is how many users the shard runs at each step of a
// concurrency ramp. The ramp's users are dealt out in turn, user w (from
// 0, in the order they join) to shard w mod N + 1, as an open loop's
// arrivals are: every shard's part of each step then only grows (users
// join, none leave) and the parts add up to the step's users. The even
// split of a closed loop (split) would not do: its part can shrink as the
// count grows (shard 3 of 5 runs 1 of 2 users, none of 3).
func (s Shard) rampUsers(levels []float64) []int {
	out := make([]int, len(levels))
	for i, lv := range levels {
		out[i] = s.strided(0, int(lv))
	}
	return out
}

// rampJoinStep is the step (from 1) at which the shard's user w (from 0)
// joins a concurrency ramp: the first whose part has more than w users.
func (rr *rowRun) rampJoinStep(w int) int {
	users := rr.shard.rampUsers(rr.ramp.plan.Levels)
	for k, u := range users {
		if u > w {
			return k + 1
		}
	}
	return len(users)
}

// openShardRamp opens a sharded ramped row's step clock at the row's
// global origin, once its load has started (loadStart is set). A rate
// ramp's origin is the due time of the row's first measured arrival in
// the global schedule, which this shard may not send; a concurrency
// ramp's, the end of its warmup_duration. A concurrency ramp with a
// warmup counted in requests has no fixed origin: its clock opens at the
// shard's own first measured request, as an unsharded row's does.
func (rr *rowRun) openShardRamp() {
	if rr.ramp == nil || !rr.shard.on() {
		return
	}
	r := rr.row
	switch {
	case r.Load.Mode == schema.ModeRate:
		if at, ok := rr.rampOrigin(); ok {
			rr.ramp.open(rr.loadStart.Add(at))
		}
	case r.Warmup == 0:
		rr.ramp.open(rr.loadStart.Add(r.WarmupDuration.D()))
	}
}

// rampOrigin is the offset from the load start of a rate ramp's first
// measured arrival: the first of the global schedule that take would not
// count as warmup.
func (rr *rowRun) rampOrigin() (time.Duration, bool) {
	r := rr.row
	next := rr.rampArrivals()
	warm := int64(rr.row.Warmup)
	// The warmup stretch holds at most this many arrivals (rampArrivals).
	limit := warm + int64(r.WarmupDuration.D().Seconds()*r.Load.Ramp.Levels[0]) + 2
	for i := int64(0); i <= limit; i++ {
		at, _ := next()
		if i >= warm && (r.WarmupDuration == 0 || at >= r.WarmupDuration.D()) {
			return at, true
		}
	}
	return 0, false
}
