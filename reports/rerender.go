package reports

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/infermatrix/infermatrix/record"
	"github.com/infermatrix/infermatrix/verdict"
	"github.com/infermatrix/infermatrix/workbook"

	"github.com/infermatrix/infermatrix/internal/buildinfo"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
)

// ErrInvalidExperiment marks a Rerender failure that is the experiment's
// fault rather than the tool's: the run's experiment.yaml no longer matches
// its recorded hash, or an edited experiment does not describe the rows the
// run measured. Problems in the file itself come as schema.Problems.
var ErrInvalidExperiment = errors.New("invalid experiment")

// RerenderOptions adjust Rerender.
type RerenderOptions struct {
	// Experiment is an experiment file to judge the run by instead of the
	// run's own experiment.yaml: its acceptance rules, validity
	// thresholds and hypotheses are evaluated again against the recorded
	// measurements, and its report formats decide which files are
	// written. Its rows must be the ones the run measured.
	Experiment string
	// Semantics, when set, summarises every row again from its records
	// under these definitions (metrics.SemInfermatrix, SemVLLM,
	// SemAIPerf) instead of the run's.
	Semantics string
	// Baseline, when set, judges the run against this baseline run (a
	// run directory, or a folder of runs whose newest complete run is
	// taken) instead of the one its manifest records.
	Baseline string
	// Now stamps the re-judged directory's name; zero means time.Now.
	Now time.Time
}

// RejudgedDir is the folder of a run directory that re-judgements go to,
// each in a folder of its own, so that the record the run wrote is never
// changed by a later judgement.
const RejudgedDir = "rejudged"

// Rerendered is what Rerender did.
type Rerendered struct {
	*Written
	// Dir is where the files went: the run directory, or a folder of its
	// rejudged/ for a re-judgement.
	Dir *rundir.Dir
	// Rejudged says the files went to a folder of rejudged/, and Why.
	Rejudged bool
	Why      string
	// Notes say where the re-rendering departs from the original run's:
	// settings of an edited experiment that the recorded summary does not
	// follow, rows whose records do not reproduce summary.json.
	Notes []string
}

// Rerender re-renders every artifact of a run directory from what the run
// recorded, without sending a request: it reads the experiment
// (experiment.yaml, or opts.Experiment), manifest.json, summary.json and
// the per-request records, and calls Write, so the files come out as the
// run wrote them (or, with an edited experiment, as its rules judge the
// same measurements).
//
// summary.json keeps each distribution's statistics, not its samples, and
// rounds them to six decimals. So each row is summarised again from its
// requests.jsonl with the run's settings; where that reproduces the stored
// summary exactly, the rebuilt one is used, which carries the raw samples
// p(metric, q) needs and the full precision the run rendered with. A row
// whose records do not reproduce it (edited, or written by another build)
// is judged on summary.json as stored, and a note says so.
//
// A judgement is never overwritten. With another experiment or other
// semantics, the files go to rejudged/<UTC time>-<label>/, whose record
// names the run's experiment and the one that judged it, with their
// hashes, at the top; the run's own decision files stay byte for byte as
// they were. Without either, the record is rendered again in place only
// where its verdicts come out as recorded (or none was recorded, as after
// a kill); a build that judges the run otherwise writes beside it too.
func Rerender(path string, opts RerenderOptions) (*Rerendered, error) {
	dir, err := openRun(path)
	if err != nil {
		return nil, err
	}
	in, notes, err := LoadRun(dir, opts)
	if err != nil {
		return nil, err
	}
	in.Decision = verdict.JudgeWith(in.Plan, in.Summary, in.Baseline)
	out := dir
	res := &Rerendered{Notes: notes}
	switch {
	case opts.Experiment != "" || opts.Semantics != "" || opts.Baseline != "":
		res.Rejudged, res.Why = true, "judged by another experiment, other semantics or another baseline"
	default:
		if old, ok := recordedVerdicts(dir); ok && old != verdictsOf(in.Decision) {
			res.Rejudged = true
			res.Why = "this build judges the run otherwise than the record it wrote (" + old + " → " + verdictsOf(in.Decision) + ")"
			in.JudgedBy = fmt.Sprintf("this record judges run %s again with infermatrix %s; the run's own record (%s) judged it %s, and is unchanged.",
				dir.Path, buildinfoVersion(), rundir.DecisionFile, old)
		}
	}
	if res.Rejudged {
		now := opts.Now
		if now.IsZero() {
			now = time.Now()
		}
		label := "rerender"
		switch {
		case opts.Experiment != "":
			label = verdict.ShortCommit(in.Plan.SHA256)
			if opts.Semantics != "" {
				label += "-" + opts.Semantics
			}
		case opts.Semantics != "":
			label = opts.Semantics
		case opts.Baseline != "":
			label = "baseline-" + in.Baseline.Info.ID
		}
		base := filepath.Join(dir.Path, RejudgedDir, now.UTC().Format(rundir.TimestampLayout)+"-"+label)
		sub := base
		for i := 2; ; i++ {
			if _, err := os.Stat(sub); os.IsNotExist(err) {
				break
			}
			sub = fmt.Sprintf("%s-%d", base, i)
		}
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", sub, err)
		}
		out = &rundir.Dir{Path: sub}
		if err := out.WriteJSON(rundir.SummaryFile, in.Summary); err != nil {
			return nil, err
		}
	} else {
		// Artifacts of formats the experiment no longer asks for would
		// contradict the new record: remove them.
		for _, stale := range staleArtifacts(in.Plan.Formats) {
			if err := os.RemoveAll(filepath.Join(dir.Path, stale)); err != nil {
				return nil, fmt.Errorf("remove %s: %w", stale, err)
			}
		}
	}
	w, err := Write(out, in)
	if w == nil {
		return nil, err
	}
	// A format that failed to render is reported beside the verdict,
	// which was written: see Write.
	res.Written, res.Dir = w, out
	return res, err
}

// recordedVerdicts reads the verdicts decision.json holds, as verdictsOf
// writes them; false when there is none (a run killed before its record).
func recordedVerdicts(dir *rundir.Dir) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dir.Path, DecisionJSON))
	if err != nil {
		return "", false
	}
	var d verdict.Decision
	if json.Unmarshal(b, &d) != nil {
		return "", false
	}
	return verdictsOf(&d), true
}

// verdictsOf is a decision's run and row verdicts in one line, to tell
// whether two judgements agree.
func verdictsOf(d *verdict.Decision) string {
	parts := []string{d.Verdict}
	for _, rv := range d.Rows {
		parts = append(parts, rv.ID+"="+rv.Verdict)
	}
	return strings.Join(parts, " ")
}

// LoadRun reads a run directory into the Input its decision record is
// rendered from, as Rerender does, and returns notes on where it departs
// from the run.
func LoadRun(dir *rundir.Dir, opts RerenderOptions) (*Input, []string, error) {
	man, err := dir.Manifest()
	lost := ""
	if err != nil {
		if !damaged(err) {
			return nil, nil, err
		}
		if man, lost, err = rebuildManifest(dir, whatIsWrong(rundir.ManifestFile, err)); err != nil {
			return nil, nil, err
		}
	}
	var notes []string
	sum, err := dir.Summary()
	switch {
	case err != nil && damaged(err):
		// Killed before the end (see rebuild.go): the summaries come
		// from the rows' own files and records.
		own, perr := ownPlan(dir, man)
		if perr != nil {
			return nil, nil, perr
		}
		why := whatIsWrong(rundir.SummaryFile, err)
		if lost != "" {
			why = lost + "; " + why
		}
		if sum, notes, err = rebuildSummary(dir, man, own, why); err != nil {
			return nil, nil, err
		}
	case err != nil:
		return nil, nil, err
	case lost != "":
		// The summaries are the run's own: only the manifest was lost.
		man.Status = map[bool]string{true: rundir.StatusInterrupted, false: rundir.StatusComplete}[sum.Interrupted]
		sum.Rebuilt = "Rebuilt without the run's manifest (" + lost + ")."
		notes = append(notes, sum.Rebuilt)
	}
	plan, planNotes, err := runPlan(dir, man, sum, opts)
	if err != nil {
		return nil, nil, err
	}
	notes = append(notes, planNotes...)
	if opts.Semantics != "" {
		plan.Semantics = opts.Semantics
		sum.Semantics, sum.SemanticsNotes = opts.Semantics, metrics.SemanticsNotes(opts.Semantics, sum.SLO)
	}
	notes = append(notes, restoreSamples(dir, plan, man, sum, opts.Semantics != "")...)
	in := &Input{Plan: plan, Manifest: man, Summary: sum, Records: recordsFor(dir, plan), RunDir: dir.Path}
	if in.Baseline, err = runBaseline(plan, man, opts); err != nil {
		return nil, nil, err
	}
	if opts.Experiment != "" || opts.Semantics != "" || opts.Baseline != "" {
		var b strings.Builder
		fmt.Fprintf(&b, "This record judges run %s, made with experiment %s (sha256 %s), ", dir.Path, orNone(man.Experiment.File), verdict.ShortCommit(man.Experiment.SHA256))
		if opts.Experiment != "" {
			fmt.Fprintf(&b, "by experiment %s (sha256 %s)", opts.Experiment, verdict.ShortCommit(plan.SHA256))
		} else {
			b.WriteString("by its own experiment")
		}
		if opts.Semantics != "" {
			fmt.Fprintf(&b, ", with every row summarised again from its records under semantics %s (the run used %s)", opts.Semantics, orDefault(man.Semantics, metrics.SemInfermatrix))
		}
		if opts.Baseline != "" {
			fmt.Fprintf(&b, ", against baseline run %s", in.Baseline.Info.Dir)
		}
		fmt.Fprintf(&b, ". The run's own record (%s in the run directory) is unchanged.", rundir.DecisionFile)
		in.JudgedBy = b.String()
	}
	return in, notes, nil
}

func buildinfoVersion() string { return buildinfo.Get().Version }

// staleArtifacts lists the files of report formats not in formats, which a
// re-render must not leave behind.
func staleArtifacts(formats []string) []string {
	byFormat := map[string]string{"csv": SummaryCSV, "html": ReportHTML, "xlsx": workbook.ResultsXLSX, "aiperf": AIPerfExport}
	var out []string
	for _, f := range []string{"csv", "html", "xlsx", "aiperf"} {
		if !slices.Contains(formats, f) {
			out = append(out, byFormat[f])
		}
	}
	return out
}

// runPlan loads the experiment a run is judged by and checks that it
// describes the rows the run measured.
func runPlan(dir *rundir.Dir, man *rundir.Manifest, sum *metrics.Summary, opts RerenderOptions) (*schema.Plan, []string, error) {
	var path string
	var data []byte
	if opts.Experiment != "" {
		b, err := os.ReadFile(opts.Experiment)
		if err != nil {
			// As for run and validate, a file that cannot be read is
			// an invalid experiment (exit 4), not a runtime failure.
			return nil, nil, fmt.Errorf("%w: %w", ErrInvalidExperiment, err)
		}
		path, data = opts.Experiment, b
	} else {
		b, err := os.ReadFile(filepath.Join(dir.Path, rundir.ExperimentFile))
		if err != nil {
			return nil, nil, fmt.Errorf("read run: %w", err)
		}
		if got := sha256Hex(b); got != man.Experiment.SHA256 {
			return nil, nil, fmt.Errorf("%w: %s in %s has sha256 %s, but the run recorded %s: it was edited after the run; pass the edited file with --experiment to judge the run by it",
				ErrInvalidExperiment, rundir.ExperimentFile, dir.Path, verdict.ShortCommit(got), verdict.ShortCommit(man.Experiment.SHA256))
		}
		// Parsed under the name it was run from, so that relative paths
		// in it (datasets, traces, tokenizers) resolve as they did and the
		// plan is the run's own.
		path, data = man.Experiment.File, b
		if path == "" {
			path = filepath.Join(dir.Path, rundir.ExperimentFile)
		}
	}
	plan, err := parseAsRun(path, data, man, baselineOption(man, opts))
	if err != nil {
		return nil, nil, err
	}

	// Only the rows the run measured (it may have run with --rows), each
	// as the run defined it.
	ran := map[string]*schema.PlannedRow{}
	for i := range man.Rows {
		ran[man.Rows[i].ID] = &man.Rows[i]
	}
	var rows []schema.PlannedRow
	var problems []string
	found := map[string]bool{}
	var skipped []string
	// A search row's probes stand for it (Plan.WithProbes).
	probes := map[string][]schema.PlannedRow{}
	for _, r := range man.Rows {
		if r.Probe != nil {
			probes[r.Probe.Search] = append(probes[r.Probe.Search], r)
			found[r.ID] = true
		}
	}
	for _, r := range plan.Rows {
		if r.Search != nil && len(probes[r.ID]) > 0 {
			rows = append(rows, r)
			continue
		}
		run, ok := ran[r.ID]
		if !ok {
			skipped = append(skipped, r.ID) // not run (--rows): its rules cannot pass
			continue
		}
		found[r.ID] = true
		if d := rowDiffs(run, &r); len(d) > 0 {
			problems = append(problems, fmt.Sprintf("row %s: %s differ%s from the run's", r.ID, strings.Join(d, ", "), map[bool]string{true: "s"}[len(d) == 1]))
		}
		rows = append(rows, r)
	}
	for _, r := range man.Rows {
		if !found[r.ID] {
			problems = append(problems, fmt.Sprintf("row %s: the run measured it, the experiment has no such row", r.ID))
		}
	}
	if len(problems) > 0 {
		return nil, nil, fmt.Errorf("%w: %s does not describe the rows this run measured:\n  %s",
			ErrInvalidExperiment, path, strings.Join(problems, "\n  "))
	}
	plan.Rows = rows
	plan.WithProbes(probes)
	plan.Skipped = append(skipped, plan.Skipped...)

	// What was measured stays as measured: goodput was counted against
	// the run's objectives, the statistics under its semantics and
	// percentiles. An edited file's differing settings are noted, not
	// applied.
	var notes []string
	if opts.Experiment != "" {
		if plan.SLO != man.SLO {
			notes = append(notes, fmt.Sprintf("%s sets other SLOs than the run (%s); goodput stays as measured against the run's (%s)",
				path, orNone(record.SLOText(plan.SLO)), orNone(record.SLOText(man.SLO))))
		}
		if sem := orDefault(plan.Semantics, metrics.SemInfermatrix); sem != orDefault(man.Semantics, metrics.SemInfermatrix) && opts.Semantics == "" {
			notes = append(notes, fmt.Sprintf("%s sets semantics %s; the run was summarised under %s, and stays so (pass --semantics %s to summarise it again under it)",
				path, sem, orDefault(man.Semantics, metrics.SemInfermatrix), sem))
		}
		if !slices.Equal(plan.Percentiles, sum.Percentiles) {
			notes = append(notes, fmt.Sprintf("%s asks for percentiles %v; the run's summary has %v", path, plan.Percentiles, sum.Percentiles))
		}
	}
	plan.SLO, plan.Semantics, plan.Percentiles = man.SLO, man.Semantics, sum.Percentiles
	return plan, notes, nil
}

// parseAsRun parses an experiment with the server override the run used
// (--target), which the manifest's declared server shows.
func parseAsRun(path string, data []byte, man *rundir.Manifest, baseline string) (*schema.Plan, error) {
	plan, err := schema.Parse(path, data, schema.Options{SkipFileChecks: true, Baseline: baseline})
	if err != nil {
		return nil, err
	}
	decl := man.Server.Declared
	target := ""
	switch {
	case decl.Builtin && !plan.Server.Builtin:
		target = "builtin"
	case !decl.Builtin && len(decl.URLs) > 0 && !slices.Equal(decl.URLs, plan.Server.URLs):
		target = decl.URLs[0] // --target takes one URL
	}
	if target == "" {
		return plan, nil
	}
	return schema.Parse(path, data, schema.Options{Target: target, SkipFileChecks: true, Baseline: baseline})
}

// rowDiffs names the settings in which an experiment's row differs from
// the row a run measured. The question is prose and may be reworded; file
// paths are compared by name, since an edited experiment elsewhere
// resolves them against another directory.
func rowDiffs(run, file *schema.PlannedRow) []string {
	a, b := rowFields(run), rowFields(file)
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		if k != "question" && !reflect.DeepEqual(a[k], b[k]) {
			out = append(out, k)
		}
	}
	return out
}

// rowFields is a row as JSON values, keyed as in the manifest.
func rowFields(r *schema.PlannedRow) map[string]any {
	b, err := json.Marshal(r)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return map[string]any{"error": err.Error()}
	}
	base := func(v any) any {
		if s, ok := v.(string); ok && strings.ContainsAny(s, `/\`) {
			return filepath.Base(s)
		}
		return v
	}
	m["tokenizer"] = base(m["tokenizer"])
	// Runs from before unique_prompts existed recorded none; the default
	// stands for them.
	if _, ok := m["unique_prompts"]; !ok {
		m["unique_prompts"] = schema.UniquePerRun
	}
	for _, k := range []string{"dataset", "trace"} {
		if o, ok := m[k].(map[string]any); ok {
			o["file"] = base(o["file"])
		}
	}
	return m
}

// restoreSamples summarises each row again from its records, with the
// settings the run used, and takes the rebuilt summary where it
// reproduces the stored one (see Rerender). The client's own load (CPU,
// scheduling delay) is not in the records, so the self-check keeps the
// stored figures.
//
// With resummarize set (other semantics than the run's), the rebuilt
// summary is taken whatever the stored one says: it is meant to differ.
func restoreSamples(dir *rundir.Dir, plan *schema.Plan, man *rundir.Manifest, sum *metrics.Summary, resummarize bool) []string {
	var notes []string
	api := orDefault(man.Server.Declared.API, plan.Server.API)
	for i := range sum.Rows {
		rs := &sum.Rows[i]
		row := plan.Row(rs.ID)
		if rs.Status == metrics.RowNotRun || row == nil || (rs.Rebuilt && !resummarize) {
			continue // a rebuilt row was summarised from its records already
		}
		if len(rs.Trials) > 0 {
			notes = append(notes, restoreTrials(dir, plan, row, rowOptions(plan, row, api, sum), rs, resummarize)...)
			continue
		}
		re, torn, err := summariseRecords(dir, row, rowOptions(plan, row, api, sum), rs.Status, plan.Telemetry.Interval.D())
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) || rs.Requests.Sent+rs.Requests.Warmup > 0 {
				notes = append(notes, fmt.Sprintf("row %s: judged on summary.json as stored, where p(metric, q) reads only its percentiles: %v", rs.ID, err))
			}
			continue
		}
		if torn != "" && !rs.Rebuilt {
			notes = append(notes, torn)
		}
		re.Rebuilt = rs.Rebuilt
		re.Error = rs.Error
		re.Merged = rs.Merged // what a merged run's shards measured live: not in the records
		if rs.Semantics == "" {
			re.Semantics = "" // a summary from before the setting existed
		}
		if rs.Errors.Examples == nil {
			// A summary from before error examples were kept: they are
			// read from the records, not measured, so take them.
			rs.Errors.Examples = re.Errors.Examples
		}
		lag := re.SelfCheck.DispatchLag
		re.SelfCheck = rs.SelfCheck
		re.SelfCheck.DispatchLag = lag
		re.Requests.Unsent = rs.Requests.Unsent // arrivals without a record
		re.ScheduleStartNS = rs.ScheduleStartNS // the dispatcher's, not in the records
		if resummarize {
			*rs = re
			continue
		}
		if !sameJSON(&re, rs) {
			// An edited experiment may slice time otherwise; the
			// timeslices are shown, never judged.
			re.Timeslices = rs.Timeslices
		}
		if !sameJSON(asStored(&re, rs), rs) {
			notes = append(notes, fmt.Sprintf("row %s: its records do not reproduce summary.json; judged on summary.json as stored, where p(metric, q) reads only its percentiles", rs.ID))
			continue
		}
		*rs = re
	}
	return notes
}

// asStored returns re as a summary written before the cost figures existed
// would hold it, when stored is one: without throughput per GPU and cost.
// Those are computed from the stored throughputs and the price, not
// measured, so a run from before them still reproduces, and is rendered
// with them.
func asStored(re, stored *metrics.RowSummary) *metrics.RowSummary {
	c := *re
	if stored.Throughput.OutputTokensPerSPerGPU == 0 {
		c.Throughput.OutputTokensPerSPerGPU = 0
	}
	if stored.Cost == nil {
		c.Cost = nil
	}
	if len(c.Trials) == len(stored.Trials) && len(c.Trials) > 0 {
		c.Trials = make([]metrics.RowSummary, len(re.Trials))
		for i := range re.Trials {
			c.Trials[i] = *asStored(&re.Trials[i], &stored.Trials[i])
		}
	}
	return &c
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func sameJSON(a, b any) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
