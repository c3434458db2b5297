package runner

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/infermatrix/infermatrix/schema"
)

// modeRamp dispatches a ramped row (schema.RampPlan): its Load.Mode says
// which dimension the ramp raises.
const modeRamp = "ramp"

// rampClock is a ramped row's step clock. Steps count from the opening of
// the measured window, the first measured request's send (take), which is
// where the duration timer starts too: step k (from 1) runs from
// origin + (k−1)·step_duration, and the row stops at origin + steps ×
// step_duration. Warmup, before the origin, runs at the first step's load.
type rampClock struct {
	plan   *schema.RampPlan
	once   sync.Once
	origin time.Time     // written once, before opened is closed
	opened chan struct{} // closed when the measured window opens
}

func newRampClock(p *schema.RampPlan) *rampClock {
	if p == nil || len(p.Levels) == 0 || p.StepDuration <= 0 {
		return nil
	}
	return &rampClock{plan: p, opened: make(chan struct{})}
}

// open starts the clock at now, the first time it is called.
func (c *rampClock) open(now time.Time) {
	c.once.Do(func() {
		c.origin = now
		close(c.opened)
	})
}

// stepAt is the step in effect at t, from 1; past the last step, the last.
func (c *rampClock) stepAt(t time.Time) int {
	k := int(t.Sub(c.origin)/c.plan.StepDuration.D()) + 1
	return min(max(k, 1), len(c.plan.Levels))
}

// waitStep waits until step k (from 1) begins; false when ctx or stop ends
// the wait first.
func (c *rampClock) waitStep(ctx context.Context, stop <-chan struct{}, k int) bool {
	select {
	case <-c.opened:
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
	t := time.NewTimer(time.Until(c.origin.Add(time.Duration(k-1) * c.plan.StepDuration.D())))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-stop:
	}
	return false
}

// rampOver reports whether a ramped row's last step has ended at now: the
// duration timer stops the row then too, but a send due at that very
// instant could win the race and land past the last step.
func (rr *rowRun) rampOver(now time.Time) bool {
	c := rr.ramp
	if c == nil {
		return false
	}
	select {
	case <-c.opened:
		return !now.Before(c.origin.Add(c.plan.Total().D()))
	default:
		return false
	}
}

// rampStep is the step a ticket taken at now belongs to: 0 for warmup or a
// row without ramp. The first measured ticket opens the clock. rr.mu is
// held (take).
func (rr *rowRun) rampStep(now time.Time, warm bool) int {
	if rr.ramp == nil || warm {
		return 0
	}
	rr.ramp.open(now)
	return rr.ramp.stepAt(now)
}

// ramped dispatches a ramped row: users joining step by step, or arrivals
// whose rate rises step by step. Either way nothing drains between steps:
// the users of one step keep going into the next, and arrivals keep
// coming.
func (rr *rowRun) ramped(ctx, inflight context.Context, wg *sync.WaitGroup) {
	if rr.row.Load.Mode == schema.ModeRate {
		rr.openLoop(ctx, inflight, wg, rr.rampArrivals())
		return
	}
	users := rr.shard.rampUsers(rr.ramp.plan.Levels)
	for w := 0; w < users[len(users)-1]; w++ {
		// User w joins at the first step with more than w users (of
		// the shard's part, under --shard).
		first := rr.rampJoinStep(w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if first > 1 && !rr.ramp.waitStep(ctx, rr.stopped, first) {
				return
			}
			rr.user(ctx, inflight)
		}()
	}
	select {
	case <-ctx.Done():
	case <-rr.stopped:
	}
}

// rampArrivals is a rate ramp's schedule, offsets from the load start:
// the warmup at the first step's rate, then each step's arrivals at its
// own rate over exactly its step_duration, so that the step the runner
// stamps (from the due time) is the step whose rate drew the arrival.
// Each stretch is conditioned on its count (see arrivals.conditioned), so
// every step offers exactly its rate; past the last step, arrivals go on
// at its rate until the duration timer stops the row.
func (rr *rowRun) rampArrivals() func() (time.Duration, bool) {
	r, l := rr.row, rr.row.Load
	p := l.Ramp
	d := p.StepDuration.D()
	type stretch struct {
		at  time.Duration // start, from the load start
		arr *arrivals
		n   int // arrivals in the stretch; -1 for the open-ended last
	}
	draw := func(i int, rate float64, n int) *arrivals {
		a := newArrivals(rate, l.Arrival, l.Burstiness, rr.wl.Seed()+uint64(i+1)*0x9e3779b97f4a7c15)
		if n > 0 {
			a = a.conditioned(0, n)
		}
		return a
	}
	var plan []stretch
	var at time.Duration
	r0 := p.Levels[0]
	switch {
	case r.WarmupDuration > 0:
		n := int(math.Ceil(r.WarmupDuration.D().Seconds() * r0))
		plan = append(plan, stretch{0, draw(0, r0, n), n})
		at = r.WarmupDuration.D()
	case r.Warmup > 0:
		plan = append(plan, stretch{0, draw(0, r0, r.Warmup), r.Warmup})
		at = time.Duration(float64(r.Warmup) / r0 * float64(time.Second))
	}
	for i, rate := range p.Levels {
		n := int(math.Round(d.Seconds() * rate))
		plan = append(plan, stretch{at + time.Duration(i)*d, draw(i+1, rate, n), n})
	}
	last := p.Levels[len(p.Levels)-1]
	plan = append(plan, stretch{at + time.Duration(len(p.Levels))*d, draw(len(p.Levels)+1, last, 0), -1})
	cur, sent := 0, 0
	return func() (time.Duration, bool) {
		for plan[cur].n >= 0 && sent >= plan[cur].n {
			cur, sent = cur+1, 0
		}
		sent++
		return plan[cur].at + plan[cur].arr.next(), true
	}
}
