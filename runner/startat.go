package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
)

// ErrBadStart is wrapped by Run's error for a --start-at the plan cannot
// keep: a time in the past, or rows whose length no plan can fix.
var ErrBadStart = errors.New("bad start time")

// StartGap is the fixed gap between one row's planned slot and the next
// row's planned start under --start-at: room for what a row does outside
// its load (the first telemetry scrape, warm prefixes, writing its
// summary), so that a row that used its whole slot does not make the next
// one late on every shard.
const StartGap = 2 * time.Second

// StartPastTolerance is how far in the past --start-at may be: shards
// launched together by a scheduler start a few seconds apart, and one
// launched a little after the instant still joins the run, late by its
// skew, which the manifest records.
const StartPastTolerance = 5 * time.Second

// rowSlot is a row's planned length under --start-at: its warmup_duration,
// its duration and its grace period, the most the row can take once its
// load begins.
func rowSlot(r *schema.PlannedRow) time.Duration {
	return r.WarmupDuration.D() + r.Duration.D() + r.Grace.D()
}

// startProblems lists what makes a barrier-free schedule impossible. A row
// stopped only by a request count has no planned length (it lasts as long
// as the server takes to answer), so every row the run will start after it
// would have no planned start: such a row may only be the run's last.
// Search rows probe as long as the search takes: refused too.
func startProblems(plan *schema.Plan) []string {
	var out []string
	for i := range plan.Rows {
		r := &plan.Rows[i]
		last := i == len(plan.Rows)-1 && r.Trials() == 1
		switch {
		case r.Search != nil:
			out = append(out, fmt.Sprintf("row %s: a search row has no planned length", r.ID))
		case r.Duration == 0 && !last:
			out = append(out, fmt.Sprintf("row %s: a row without duration has no planned length, so the rows after it have no planned start; give it a duration (or make it the last row, run once)", r.ID))
		}
	}
	return out
}

// startClock starts each row at the instant the plan fixes (--start-at):
// row k at StartAt + Σ (slot + StartGap) of the rows run before it. Every
// shard computes the same instants from the same plan, so the shards stay
// aligned without a barrier: none waits for another.
type startClock struct {
	next  time.Time
	first bool
	// gap is StartGap (a test's shorter one).
	gap time.Duration
	// skew receives how late the first row began against StartAt.
	skew func(time.Duration)
	// started receives every row's start against its planned one, in run
	// order (the manifest's shard.row_starts); the first row's lateness
	// is the skew.
	started func(rundir.RowStart)
	logf    func(string, ...any)
}

// wait sleeps until row's planned start and moves the clock to the next
// row's; false when ctx ended first.
func (c *startClock) wait(ctx context.Context, r *schema.PlannedRow) bool {
	at := c.next
	c.next = c.next.Add(rowSlot(r) + c.gap)
	if d := time.Until(at); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
	late := max(time.Since(at), 0)
	if c.first {
		c.first = false
		c.skew(late)
	}
	if c.started != nil {
		c.started(rundir.RowStart{Row: r.ID, Planned: at.UTC(), LateNS: late.Nanoseconds()})
	}
	if late > c.gap {
		c.logf("row %s: started %v after its planned start %s (the row before overran its slot)", r.ID, late.Round(time.Millisecond), at.UTC().Format(time.RFC3339))
	}
	return true
}
