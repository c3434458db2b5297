package metrics

import (
	"encoding/json"
	"fmt"
	"slices"
)

// TrialReader reads trial k's records (k from 1) in file order, calling fn
// for each.
type TrialReader func(k int, fn func(*Record) error) error

// PoolTrials summarises a repeated row from its trials: the pooled
// figures of every trial's measured requests together, each trial's own
// summary (RowSummary.Trials) and the intervals over the trials
// (RowSummary.Intervals, at level; 0 means DefaultConfidence).
//
// trials are the trials' own summaries, in order, as the run wrote them
// (with what the live run measured of the client) or as rebuilt from
// their records; read gives each trial's records again for the pooled
// distributions.
//
// Each trial's timeline starts at its own zero, so the pooled aggregator
// places the trials end to end: trial k's records are shifted so that its
// first measured dispatch falls at the last measured end of trial k−1. The
// pooled window is then the sum of the trials' windows, and the pooled
// throughputs are all measured requests (or tokens) over that sum, as if
// the trials had been one long row without their warmups and the pauses
// between them. Warmup records are left out of the pooled aggregator
// altogether (each trial's own summary counts them), so that one trial's
// warmup, shifted onto the one before, cannot count as in flight there;
// the pooled in-flight figures are the trials' own, mean weighted by
// window and the largest maximum. The client's self-check figures are the
// worst trial's.
func PoolTrials(id, base, status string, opts Options, trials []RowSummary, read TrialReader, level float64) (RowSummary, error) {
	type span struct {
		first, last int64
		any         bool
	}
	spans := make([]span, len(trials))
	for i := range trials {
		sp := &spans[i]
		err := read(i+1, func(r *Record) error {
			if r.Warmup {
				return nil
			}
			d, e := r.StartNS-r.QueueNS, r.StartNS+r.EndNS
			if !sp.any {
				sp.first, sp.last, sp.any = d, e, true
			}
			sp.first, sp.last = min(sp.first, d), max(sp.last, e)
			return nil
		})
		if err != nil {
			return RowSummary{}, fmt.Errorf("trial %d: %w", i+1, err)
		}
	}
	agg := NewAggregator(opts)
	var at int64 // where the next trial's first measured dispatch goes
	warmups := 0
	for i := range trials {
		sp := spans[i]
		shift := at - sp.first
		err := read(i+1, func(r *Record) error {
			if r.Warmup {
				warmups++
				return nil
			}
			c := *r
			c.StartNS += shift
			c.ScheduledNS += shift
			agg.Add(&c)
			return nil
		})
		if err != nil {
			return RowSummary{}, fmt.Errorf("trial %d: %w", i+1, err)
		}
		if sp.any {
			at += sp.last - sp.first
		}
	}
	s := agg.Summary(id, base, status)
	s.Requests.Warmup = warmups
	var weighted, window float64
	s.InFlight = InFlight{}
	for i := range trials {
		t := &trials[i]
		s.Requests.Unsent += t.Requests.Unsent
		weighted += t.InFlight.Mean * t.WindowS
		window += t.WindowS
		s.InFlight.Max = max(s.InFlight.Max, t.InFlight.Max)
		s.Rebuilt = s.Rebuilt || t.Rebuilt
		worstClient(&s.SelfCheck, &t.SelfCheck, i+1)
	}
	if window > 0 {
		s.InFlight.Mean = round6(weighted / window)
	}
	s.Trials = make([]RowSummary, len(trials))
	for i, t := range trials {
		t.Trial = i + 1
		// The trial's timeslices stay in its own summary.json; the row's
		// pooled ones span every trial.
		t.Timeslices = Timeslices{}
		t.Trials, t.Intervals = nil, nil
		// As written to summary.json: the intervals are computed from
		// the figures as stored (Dist rounds them), so that a run
		// directory re-rendered later gives the same intervals to the
		// last digit.
		b, err := json.Marshal(t)
		if err == nil {
			err = json.Unmarshal(b, &s.Trials[i])
		}
		if err != nil {
			return RowSummary{}, fmt.Errorf("trial %d: %w", i+1, err)
		}
	}
	s.Intervals = TrialIntervals(s.Trials, level)
	return s, nil
}

// worstClient folds a trial's client self-check into the pooled one: the
// largest of each figure the live run measured, and the trial's notes,
// each saying which trial.
func worstClient(p, t *SelfCheck, k int) {
	p.ClientCPU = max(p.ClientCPU, t.ClientCPU)
	p.CPUSeconds += t.CPUSeconds
	p.Cores = max(p.Cores, t.Cores)
	p.HostCPU = max(p.HostCPU, t.HostCPU)
	p.MeasurementErrorMS = max(p.MeasurementErrorMS, t.MeasurementErrorMS)
	p.ClockResolutionMS = max(p.ClockResolutionMS, t.ClockResolutionMS)
	p.SchedDelayP99MS = max(p.SchedDelayP99MS, t.SchedDelayP99MS)
	p.SharedWithServer = p.SharedWithServer || t.SharedWithServer
	p.TimerLatenessP99MS = max(p.TimerLatenessP99MS, t.TimerLatenessP99MS)
	p.SimLatenessP99MS = max(p.SimLatenessP99MS, t.SimLatenessP99MS)
	p.SimFlushes += t.SimFlushes
	p.StampErrorP99MS = max(p.StampErrorP99MS, t.StampErrorP99MS)
	p.StampErrors += t.StampErrors
	p.ClientBound = p.ClientBound || t.ClientBound
	for _, n := range t.Notes {
		note := fmt.Sprintf("trial %d: %s", k, n)
		if !slices.Contains(p.Notes, note) {
			p.Notes = append(p.Notes, note)
		}
	}
}
