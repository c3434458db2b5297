package reports

import (
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

// baselineOption is the baseline a re-rendering loads the experiment
// with: --baseline, or else the one the run recorded (the run may have
// been given it by flag, when its file has no baseline key).
func baselineOption(man *rundir.Manifest, opts RerenderOptions) string {
	switch {
	case opts.Baseline != "":
		return opts.Baseline
	case man.Baseline != nil:
		return man.Baseline.Dir
	}
	return ""
}

// runBaseline is the baseline a re-rendering judges against: --baseline;
// else the one the manifest records, so that the record comes out as the
// run wrote it; else an edited experiment's (--experiment) baseline key.
func runBaseline(plan *schema.Plan, man *rundir.Manifest, opts RerenderOptions) (*verdict.Baseline, error) {
	switch {
	case opts.Baseline != "":
		return verdict.LoadBaseline(opts.Baseline)
	case man.Baseline != nil:
		return verdict.RecordedBaseline(man.Baseline), nil
	case plan.Baseline != "":
		return verdict.LoadBaseline(plan.Baseline)
	}
	return nil, nil
}
