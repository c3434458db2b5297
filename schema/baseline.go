package schema

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/infermatrix/infermatrix/metrics"
)

// baseline resolves the run the experiment's rules compare against: the
// --baseline flag (relative to the working directory) or else the file's
// baseline key (relative to the file, like every path in it). It is kept
// as written, a run directory or a folder of runs (runs/<name>, whose
// newest complete run reports picks when the run is judged), so that the
// record can say which run that was.
//
// A rule or hypothesis that reads baseline.<metric> when neither is given
// could never be judged: that is a problem of the file, found here, at
// the column where it reads the baseline.
func (r *resolver) baseline(opts Options, plan *Plan) {
	switch {
	case opts.Baseline != "":
		plan.Baseline = filepath.Clean(opts.Baseline)
		r.checkBaselineDir("--baseline", opts.Baseline, plan.Baseline)
	case r.exp.Baseline != "":
		plan.Baseline = r.resolvePath(r.exp.Baseline)
		r.checkBaselineDir("baseline", r.exp.Baseline, plan.Baseline)
	}
	if plan.Baseline != "" {
		return
	}
	const hint = "pass --baseline RUN_DIR to run or report, or add baseline: runs/<name> (a run directory, or a folder of runs whose newest complete run is taken) to the file"
	r.eachExpect(func(path, src string) { r.baselineProblems(path, src, hint) })
}

// baselineProblems reports each place an expression reads the baseline.
func (r *resolver) baselineProblems(path, src, hint string) {
	r.useProblems(path, src, hint, metrics.BaselineUses, "reads the baseline run (%s), but this run has no baseline")
}

// useProblems reports each place uses finds in an expression (a part of
// the environment the run will not have), with msg naming it. An
// expression over the length limit is not parsed (checkExpr said so).
func (r *resolver) useProblems(path, src, hint string, uses func(string) []metrics.NameUse, msg string) {
	if src == "" || len(src) > MaxExprBytes {
		return
	}
	var probs []metrics.ExprProblem
	for _, u := range uses(src) {
		probs = append(probs, metrics.ExprProblem{From: u.From, To: u.To, Hint: hint, Message: fmt.Sprintf(msg, u.Text)})
	}
	r.exprProblems(path, src, probs)
}

// eachExpect calls fn with every rule's and hypothesis' expression and its
// key path.
func (r *resolver) eachExpect(fn func(path, src string)) {
	for i, a := range r.exp.Acceptance {
		fn(indexPath("acceptance", i)+".expect", a.Expect)
	}
	for i, h := range r.exp.Hypotheses {
		fn(indexPath("hypotheses", i)+".expect", h.Expect)
	}
}

// checkBaselineDir checks that the baseline names a directory. Whether it
// is a run, or a folder holding complete runs, is decided when it is read
// (reports), as a re-rendering reads it from the run's manifest instead.
func (r *resolver) checkBaselineDir(path, name, full string) {
	if r.skipFiles {
		return
	}
	hint := "name a run directory (runs/<name>/<time>) or a folder of runs (runs/<name>)"
	var msg string
	switch fi, err := os.Stat(full); {
	case err != nil:
		msg = fmt.Sprintf("baseline %q not found", name)
		if path == "baseline" {
			hint += "; the path is relative to the experiment file's directory"
		}
	case !fi.IsDir():
		kind := "a file"
		if !fi.Mode().IsRegular() {
			kind = fileKind(fi.Mode())
		}
		msg = fmt.Sprintf("baseline %q is %s, not a run directory", name, kind)
	default:
		return
	}
	if path == "baseline" {
		r.problem(path, hint, "%s", msg)
		return
	}
	// A flag has no place in the file, as --rows.
	r.d.problems = append(r.d.problems, Problem{File: r.d.file, Path: path, Message: msg, Hint: hint})
}
