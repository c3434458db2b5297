package verdict

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/infermatrix/infermatrix/compare"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/validity"
)

// BaselineCheck is the validity reason of a row whose rules read the
// baseline run (baseline.tpot.p95) when its baseline row cannot be used:
// missing from the baseline, measured with another workload, or invalid
// there. Such a rule cannot be judged, so the row neither passes nor
// fails. It is not a threshold and cannot be ignored.
const BaselineCheck = "baseline"

// ErrBaseline marks a baseline that cannot be read: not a run directory,
// a folder without a complete run, a run without its summaries. Nothing
// can be judged against it, so run refuses to start (exit 4).
var ErrBaseline = errors.New("baseline")

// Baseline is the run a run's rules are held against, read for judging.
type Baseline struct {
	Info rundir.BaselineInfo
	run  *compare.Run
	// lost says why the baseline the run recorded could not be read
	// again (report, after it was moved or replaced): every rule that
	// reads it is then left unjudged with this reason.
	lost string
}

// LoadBaseline reads the baseline a path names: a run directory, or a
// folder of runs (runs/<name>), of which the newest complete run is taken.
// Newest is by the start time in each run's manifest, not by directory
// name or modification time, which copying (CI artifacts) changes; a run
// counts as complete when its manifest says so and its summary.json and
// decision.json are there. Symbolic links (runs/<name>/latest) are not
// followed, and folders without a manifest are skipped.
func LoadBaseline(path string) (*Baseline, error) {
	dir, given := filepath.Clean(path), ""
	// Recorded absolute: `report` re-reads the baseline the manifest
	// names, from wherever it is run.
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if _, err := os.Stat(filepath.Join(dir, rundir.ManifestFile)); err != nil {
		runs, err := compare.ListRuns(dir)
		if err != nil {
			return nil, fmt.Errorf("%w %s: %w", ErrBaseline, path, err)
		}
		dir, given = "", path
		for i := len(runs) - 1; i >= 0; i-- {
			if runs[i].Manifest.Status == rundir.StatusComplete && hasFiles(runs[i].Path, rundir.SummaryFile, DecisionJSON) {
				dir = runs[i].Path
				break
			}
		}
		if dir == "" {
			return nil, fmt.Errorf("%w %s: no complete run in it (%d run%s found); name a run directory, or run the experiment once without the baseline",
				ErrBaseline, path, len(runs), map[bool]string{true: "s"}[len(runs) != 1])
		}
	}
	run, err := compare.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrBaseline, dir, err)
	}
	m := run.Manifest
	return NewBaseline(run, rundir.BaselineInfo{
		Dir: dir, Given: given, ID: filepath.Base(dir), Started: m.Started, Tool: m.Tool,
		Experiment: m.Experiment.Name, ExperimentSHA256: m.Experiment.SHA256,
	}), nil
}

// NewBaseline holds rules against a run already loaded (compare.Load),
// described by info: LoadBaseline's result without its search, for callers
// (and tests) that built the run themselves.
func NewBaseline(run *compare.Run, info rundir.BaselineInfo) *Baseline {
	return &Baseline{run: run, Info: info}
}

// RecordedBaseline reads again the baseline a run recorded in its
// manifest, for `report`. A baseline that is gone, or was replaced by
// another run in the same place, does not stop the re-rendering: the
// rules that read it are left unjudged, saying why.
func RecordedBaseline(info *rundir.BaselineInfo) *Baseline {
	b, err := LoadBaseline(info.Dir)
	switch {
	case err != nil:
		return &Baseline{Info: *info, lost: fmt.Sprintf("the baseline run %s the run was judged against cannot be read: %v", info.Dir, err)}
	case !b.Info.Started.Equal(info.Started) || b.Info.ExperimentSHA256 != info.ExperimentSHA256:
		return &Baseline{Info: *info, lost: fmt.Sprintf("%s is no longer the baseline run the run was judged against (started %s, experiment sha256 %s; now %s, %s)",
			info.Dir, info.Started.Format("2006-01-02 15:04:05Z"), ShortCommit(info.ExperimentSHA256),
			b.Info.Started.Format("2006-01-02 15:04:05Z"), ShortCommit(b.Info.ExperimentSHA256))}
	}
	b.Info.Given = info.Given
	return b
}

func hasFiles(dir string, names ...string) bool {
	for _, n := range names {
		if fi, err := os.Stat(filepath.Join(dir, n)); err != nil || !fi.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// row returns the baseline's row with this id as a rule reads it, or why
// there is none to read: a baseline row that is missing, did not run,
// measured another workload than this run's row, or is invalid in the
// baseline's own record is not a baseline.
func (b *Baseline) row(plan *schema.Plan, s *metrics.Summary, id string) (*metrics.RowEnv, string) {
	switch {
	case b == nil:
		return nil, "no baseline run was given (run --baseline, or the experiment's baseline key)"
	case b.lost != "":
		return nil, b.lost
	}
	bs := b.run.Summary.Row(id)
	if bs == nil {
		return nil, fmt.Sprintf("the baseline run %s has no row %s", b.Info.ID, id)
	}
	if bs.Status == metrics.RowNotRun || bs.Status == metrics.RowFailed || bs.Requests.Completed == 0 {
		return nil, fmt.Sprintf("baseline row %s has no successful requests (%s)", id, bs.Status)
	}
	if ch := b.workloadChanges(plan, s, id); len(ch) > 0 {
		return nil, fmt.Sprintf("baseline row %s differs: %s", id, strings.Join(ch, "; "))
	}
	v, ok := b.run.Validity[id]
	switch {
	case !ok:
		return nil, fmt.Sprintf("the baseline's record has no validity verdict for row %s", id)
	case !v.Valid:
		return nil, fmt.Sprintf("baseline row %s is %s in its own record", id, v.Summary())
	}
	env := metrics.NewRowEnv(bs)
	return &env, ""
}

// workloadChanges lists, as "field base → new", the workload settings in
// which the baseline's row differs from this run's, by compare's rules
// (compare.WorkloadChanges): figures of different workloads are not
// comparable.
func (b *Baseline) workloadChanges(plan *schema.Plan, s *metrics.Summary, id string) []string {
	var base *schema.PlannedRow
	for i := range b.run.Manifest.Rows {
		if b.run.Manifest.Rows[i].ID == id {
			base = &b.run.Manifest.Rows[i]
		}
	}
	cur := plan.Row(id)
	if base == nil || cur == nil {
		return []string{"the baseline's manifest does not describe it"}
	}
	this := &compare.Run{Manifest: &rundir.Manifest{Server: rundir.ServerInfo{Declared: plan.Server}, Semantics: plan.Semantics, Rows: plan.Rows}, Summary: s}
	var out []string
	for _, c := range compare.WorkloadChanges(base, cur, b.run, this) {
		out = append(out, fmt.Sprintf("%s %s → %s", c.Field, c.Base, c.New))
	}
	return out
}

// readsBaseline reports whether an acceptance rule reads the baseline.
func readsBaseline(rule schema.AcceptanceRule) bool {
	return rule.Program != nil && len(metrics.BaselineUses(rule.Program.Source)) > 0
}

// BaselineRecord is the decision record's Baseline section: which run this
// one was held against, and for each row the headline figures then and
// now.
type BaselineRecord struct {
	rundir.BaselineInfo
	Rows []BaselineRow `json:"rows"`
}

// BaselineRow is one row's headline figures in the baseline and in this
// run. Unusable says why the two cannot be set side by side (the row is
// missing from the baseline, measured another workload, or is invalid
// there); Metrics is then empty.
type BaselineRow struct {
	ID       string           `json:"id"`
	Unusable string           `json:"unusable,omitempty"`
	Metrics  []BaselineMetric `json:"metrics,omitempty"`
}

// BaselineMetric is one headline figure then and now. Change is the
// relative change in percent, absent when the baseline figure is 0.
type BaselineMetric struct {
	Name   string   `json:"name"`
	Base   float64  `json:"base"`
	New    float64  `json:"new"`
	Change *float64 `json:"change_pct,omitempty"`
}

// BaselineHeadline names the figures the Baseline section sets side by
// side: what users feel, what the server delivers, and how often it fails.
var BaselineHeadline = []string{"ttft.p95", "tpot.p95", "itl.p95", "e2e.p95", "throughput.output_tokens_per_s", "errors.ratio"}

// baselineRecord sets each of this run's rows beside its baseline row.
func baselineRecord(b *Baseline, plan *schema.Plan, s *metrics.Summary, usable map[string]*metrics.RowEnv, why map[string]string) *BaselineRecord {
	rec := &BaselineRecord{BaselineInfo: b.Info}
	for i := range s.Rows {
		rs := &s.Rows[i]
		if rs.Status == metrics.RowNotRun || rs.Status == metrics.RowFailed {
			continue
		}
		br := BaselineRow{ID: rs.ID}
		be, ok := usable[rs.ID]
		if !ok {
			be, why[rs.ID] = b.row(plan, s, rs.ID)
		}
		if be == nil {
			br.Unusable = why[rs.ID]
			rec.Rows = append(rec.Rows, br)
			continue
		}
		ne := metrics.NewRowEnv(rs)
		for _, name := range BaselineHeadline {
			bv, err1 := metrics.Value(name, *be)
			nv, err2 := metrics.Value(name, ne)
			bf, ok1 := toFloat(bv)
			nf, ok2 := toFloat(nv)
			if err1 != nil || err2 != nil || !ok1 || !ok2 {
				continue
			}
			if d, _ := be.Dist(strings.Split(name, ".")[0]); strings.Contains(name, ".p") && d.Count == 0 {
				continue // no samples then (a non-streamed row has no ttft)
			}
			m := BaselineMetric{Name: name, Base: bf, New: nf}
			if bf != 0 && !math.IsInf(bf, 0) && !math.IsNaN(bf) {
				c := 100 * (nf - bf) / bf
				m.Change = &c
			}
			br.Metrics = append(br.Metrics, m)
		}
		rec.Rows = append(rec.Rows, br)
	}
	return rec
}

// baselineFix is what to do about a row whose baseline cannot be used.
const baselineFix = "hold the row against a run that measured the same workload validly (--baseline RUN_DIR), or rerun the baseline"

// markBaseline makes a row invalid for a baseline its rules read but
// cannot use.
func markBaseline(v *validity.Verdict, why string) {
	v.Valid = false
	v.Reasons = append(v.Reasons, validity.Reason{Check: BaselineCheck, Message: "its rules read the baseline run, but " + why, Fix: baselineFix})
}

// ShortCommit shortens a commit or sha256 to the 12 characters people
// compare by eye; every record writes hashes this way.
func ShortCommit(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
