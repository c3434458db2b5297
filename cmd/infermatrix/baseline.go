package main

import (
	"errors"
	"fmt"

	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

// loadBaseline reads the baseline run a plan names (--baseline, or the
// file's baseline key), before anything is sent: a run whose rules could
// not be judged against it should not be made. Nil when there is none.
// A baseline that cannot be read is an invalid experiment (exit 4).
func loadBaseline(plan *schema.Plan) (*verdict.Baseline, *rundir.BaselineInfo, error) {
	if plan.Baseline == "" {
		return nil, nil, nil
	}
	b, err := verdict.LoadBaseline(plan.Baseline)
	if err != nil {
		return nil, nil, withCode(exitInvalid, fmt.Errorf("%w\nnothing was run", err))
	}
	info := b.Info
	return b, &info, nil
}

// baselineExit maps report's failure to read a baseline (--baseline, or
// the one the run recorded) to exit 4, as for run; nil for other errors.
func baselineExit(err error) error {
	if errors.Is(err, verdict.ErrBaseline) {
		return withCode(exitInvalid, fmt.Errorf("%w\nnothing was re-rendered", err))
	}
	return nil
}
