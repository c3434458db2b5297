package reports

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/infermatrix/infermatrix/record"
	"github.com/infermatrix/infermatrix/verdict"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/telemetry"
)

// A run killed outright (SIGKILL, a second Ctrl-C, a full disk) leaves its
// records intact, since each is written whole the moment its request ends,
// but not the files written at the end: summary.json, and manifest.json's
// final state. This file rebuilds what it can from what is there, so that
// such a run can still be reported:
//
//   - summary.json: each row from its own rows/<id>/summary.json where that
//     is intact (written when the row ended), else summarised again from its
//     requests.jsonl, the way the runner summarises it (metrics.Aggregator,
//     with the run's settings); a row with no records did not run;
//   - manifest.json: from experiment.yaml, its hash file and the records.
//
// What only the live run knew is not made up: a row summarised from its
// records has no client self-check (validity says "not measured"), and a
// run whose end was not recorded is judged as cut short, INCOMPLETE.
// Nothing the run wrote is overwritten; the rebuild is done again on each
// report, and the decision record says it was rebuilt.

// rebuiltLead opens the sentence every rebuilt record carries by its
// verdict.
const rebuiltLead = "Rebuilt from records after the run stopped without writing its summaries"

// damaged reports whether err is a run file that is missing or cannot be
// decoded (torn by a kill or a full disk): what a rebuild stands in for.
// Any other failure (permissions, a format from another build) is not.
func damaged(err error) bool {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, &syn) || errors.As(err, &typ)
}

// whatIsWrong says in words how a file is damaged.
func whatIsWrong(name string, err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return name + " is missing"
	}
	return name + " is torn (it does not parse)"
}

// openRun opens a run directory as rundir.Open does, but takes one whose
// manifest is missing or torn: LoadRun rebuilds that from experiment.yaml.
func openRun(path string) (*rundir.Dir, error) {
	dir, err := rundir.Open(path)
	if err == nil || !damaged(err) {
		return dir, err
	}
	if fi, serr := os.Stat(path); serr != nil || !fi.IsDir() {
		return nil, err // not a directory at all: the error as it was
	}
	return &rundir.Dir{Path: path}, nil
}

// ownPlan parses the experiment the run was made with, checked against the
// hash the run recorded: the settings its rows were summarised with.
func ownPlan(dir *rundir.Dir, man *rundir.Manifest) (*schema.Plan, error) {
	b, err := os.ReadFile(filepath.Join(dir.Path, rundir.ExperimentFile))
	if err != nil {
		return nil, fmt.Errorf("read run: %w", err)
	}
	if got := sha256Hex(b); got != man.Experiment.SHA256 {
		return nil, fmt.Errorf("%w: %s in %s has sha256 %s, but the run recorded %s: it was edited after the run, and the run's summaries cannot be rebuilt with its settings",
			ErrInvalidExperiment, rundir.ExperimentFile, dir.Path, verdict.ShortCommit(got), verdict.ShortCommit(man.Experiment.SHA256))
	}
	return parseAsRun(filepath.Join(dir.Path, rundir.ExperimentFile), b, man, baselineOption(man, RerenderOptions{}))
}

// rebuildManifest puts a manifest together from what a run directory
// still holds. experiment.yaml says what was to be run (its hash file
// says it is the file the run wrote); the records say which rows ran and
// when. What the manifest alone recorded stays unknown and is said to be:
// the host and tool, the server the run found, a --target or --rows given
// on the command line, and whether the run finished.
func rebuildManifest(dir *rundir.Dir, why string) (*rundir.Manifest, string, error) {
	src, err := os.ReadFile(filepath.Join(dir.Path, rundir.ExperimentFile))
	if err != nil {
		return nil, "", fmt.Errorf("read run: %s: %s, and %s, which could stand in for it, cannot be read (%w): this is not a run directory, or nothing in it says what was run (a run writes both before its first request)",
			dir.Path, why, rundir.ExperimentFile, err)
	}
	sum := sha256Hex(src)
	if b, err := os.ReadFile(filepath.Join(dir.Path, rundir.HashFile)); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 && f[0] != sum {
			return nil, "", fmt.Errorf("%w: %s in %s has sha256 %s, but %s records %s: it was edited after the run, and without %s nothing else says what was run",
				ErrInvalidExperiment, rundir.ExperimentFile, dir.Path, verdict.ShortCommit(sum), rundir.HashFile, verdict.ShortCommit(f[0]), rundir.ManifestFile)
		}
	}
	file := filepath.Join(dir.Path, rundir.ExperimentFile)
	plan, err := schema.Parse(file, src, schema.Options{SkipFileChecks: true})
	if err != nil {
		return nil, "", err
	}
	man := &rundir.Manifest{
		Format: rundir.Format,
		Host:   rundir.Host{Name: "unknown (" + rundir.ManifestFile + " lost)"},
		Experiment: rundir.ExperimentInfo{
			Name: plan.Experiment.Name, Description: plan.Experiment.Description,
			File: file, SHA256: sum, Metadata: plan.Experiment.Metadata,
		},
		// Whether the run ended was recorded nowhere else: it is judged
		// as cut short.
		Status:    rundir.StatusRunning,
		Server:    rundir.ServerInfo{Declared: plan.Server},
		SLO:       plan.SLO,
		Semantics: plan.Semantics,
		Rows:      plan.Rows,
	}
	man.Tool.Version = "unknown"
	if plan.Server.Builtin {
		man.Server.Discovered.Engine = record.SimEngine
		man.Server.Discovered.Simulated = &rundir.Simulated{Preset: plan.Server.Sim.Preset, Replicas: plan.Server.Sim.Replicas}
	}
	// The run started no later than its first request.
	for _, r := range plan.Rows {
		_, _ = dir.ScanRecords(r.ID, func(rec *metrics.Record) error {
			if t := time.Unix(0, rec.StartUnixNS).UTC(); rec.StartUnixNS > 0 && (man.Started.IsZero() || t.Before(man.Started)) {
				man.Started = t
			}
			return errStop
		})
	}
	return man, why + ": the run's settings were read from " + rundir.ExperimentFile +
		", and the tool, host and server the run found are not known, nor any --target or --rows it was given", nil
}

// errStop ends a scan of records early.
var errStop = errors.New("stop")

// rebuildSummary puts summary.json together for a run that did not write
// it (or whose copy is torn): see the top of this file. plan is the run's
// own experiment, for the settings the rows were summarised with. notes
// say which rows were summarised again and which records lines were torn.
func rebuildSummary(dir *rundir.Dir, man *rundir.Manifest, plan *schema.Plan, why string) (*metrics.Summary, []string, error) {
	sum := &metrics.Summary{
		Format: metrics.SummaryFormat, Experiment: man.Experiment.Name,
		Percentiles: plan.Percentiles, SLO: man.SLO,
		Semantics: man.Semantics, SemanticsNotes: metrics.SemanticsNotes(man.Semantics, man.SLO),
	}
	// A run that recorded its end and that it completed (or failed) was
	// not cut short; any other was, whatever its rows say.
	sum.Interrupted = man.Status != rundir.StatusComplete && man.Status != rundir.StatusFailed
	status := metrics.RowInterrupted
	if man.Status == rundir.StatusComplete {
		status = metrics.RowComplete
	}
	api := orDefault(man.Server.Declared.API, plan.Server.API)
	var notes, fromRecords, notRun []string
	for i := range man.Rows {
		row := &man.Rows[i]
		rs, err := rowSummaryFile(dir, row.ID)
		if err == nil {
			sum.Rows = append(sum.Rows, *rs)
			continue
		}
		if !damaged(err) {
			return nil, nil, err
		}
		if row.Repeat > 1 && dir.Trials(row.ID) > 0 {
			re, tnotes, again, err := rebuildTrials(dir, row, rowOptions(plan, row, api, sum), status, plan)
			if err != nil {
				return nil, nil, err
			}
			notes = append(notes, tnotes...)
			sum.Rows = append(sum.Rows, re)
			if again {
				fromRecords = append(fromRecords, row.ID)
			}
			continue
		}
		if _, serr := os.Stat(dir.RecordsPath(row.ID)); errors.Is(serr, fs.ErrNotExist) {
			sum.Rows = append(sum.Rows, metrics.RowSummary{ID: row.ID, Base: row.Base, Status: metrics.RowNotRun})
			notRun = append(notRun, row.ID)
			continue
		}
		re, note, err := summariseRecords(dir, row, rowOptions(plan, row, api, sum), status, plan.Telemetry.Interval.D())
		if err != nil {
			return nil, nil, err
		}
		if note != "" {
			notes = append(notes, note)
		}
		re.Rebuilt = true
		sum.Rows = append(sum.Rows, re)
		fromRecords = append(fromRecords, row.ID)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s)", rebuiltLead, why)
	if len(fromRecords) > 0 {
		fmt.Fprintf(&b, "; rows summarised again from their records, without the client self-check that only the live run measures: %s", record.CodeList(fromRecords))
	}
	if len(notRun) > 0 {
		fmt.Fprintf(&b, "; no records, so not run: %s", record.CodeList(notRun))
	}
	if man.Status == rundir.StatusRunning {
		b.WriteString("; the run did not record its end, so it is judged as cut short")
	}
	b.WriteString(".")
	sum.Rebuilt = b.String()
	notes = append([]string{strings.ReplaceAll(sum.Rebuilt, "`", "")}, notes...)
	return sum, notes, nil
}

// rowSummaryFile reads a row's own summary.json, written when the row
// ended.
func rowSummaryFile(dir *rundir.Dir, id string) (*metrics.RowSummary, error) {
	b, err := os.ReadFile(filepath.Join(dir.Path, rundir.RowFile(id, rundir.SummaryFile)))
	if err != nil {
		return nil, err
	}
	var rs metrics.RowSummary
	if err := json.Unmarshal(b, &rs); err != nil {
		return nil, err
	}
	if rs.ID != id {
		return nil, &json.UnmarshalTypeError{Value: "row " + rs.ID, Field: "id"} // not this row's: as good as torn
	}
	return &rs, nil
}

// rowOptions are the settings a row is summarised with, as the runner
// sets them for the row (runner's runRow): the run's percentiles, SLOs,
// semantics and timeslice, the row's API and load.
func rowOptions(plan *schema.Plan, row *schema.PlannedRow, api string, sum *metrics.Summary) metrics.Options {
	opts := metrics.Options{Percentiles: sum.Percentiles, SLO: sum.SLO, Semantics: sum.Semantics, API: api,
		Timeslice: plan.Timeslice.D().Nanoseconds(), Pricing: plan.RowPricing(row)}
	if row.Load.Mode == schema.ModeRate {
		opts.RequestedRate = row.Load.Rate
	}
	opts.OpenLoop = row.Load.Mode == schema.ModeRate || row.Load.Mode == schema.ModeTrace
	opts.Ramp = row.Load.Ramp.Metrics()
	return opts
}

// summariseRecords summarises a row from its requests.jsonl and its
// telemetry.jsonl, as the runner summarises it while the row runs. note
// reports a torn last line, which is skipped.
func summariseRecords(dir *rundir.Dir, row *schema.PlannedRow, opts metrics.Options, status string, interval time.Duration) (metrics.RowSummary, string, error) {
	s, torn, err := summariseFiles(dir, row.ID, row.ID, row.Base, opts, status, interval)
	if err != nil {
		return metrics.RowSummary{}, "", err
	}
	note := ""
	if torn > 0 {
		note = fmt.Sprintf("%s: line %d is torn (a partial write when the run was killed); skipped",
			filepath.ToSlash(rundir.RowFile(row.ID, rundir.RecordsFile)), torn)
	}
	return s, note, nil
}

// summariseFiles summarises a row, or a trial of one (files is its folder
// under rows/), from what the run left on disk: every record, and the
// telemetry samples reduced over the same measured window with the same
// token totals as the live run reduced them. A row without telemetry.jsonl
// (telemetry off, or a run from before it existed) has no server or GPU
// figures; a torn last sample is skipped, as a torn record is.
func summariseFiles(dir *rundir.Dir, files, id, base string, opts metrics.Options, status string, interval time.Duration) (metrics.RowSummary, int, error) {
	agg := metrics.NewAggregator(opts)
	var totals telemetry.RecordTotals
	torn, err := dir.ScanRecords(files, func(r *metrics.Record) error {
		agg.Add(r)
		totals.Add(r)
		return nil
	})
	if err != nil {
		return metrics.RowSummary{}, 0, err
	}
	in := telemetry.ReduceInput{WindowStartNS: 0, WindowEndNS: -1, Records: &totals, Interval: interval}
	if a, b, ok := agg.Window(); ok {
		in.WindowStartNS, in.WindowEndNS = a, b
	}
	s := agg.Summary(id, base, status)
	f, err := os.Open(filepath.Join(dir.Path, rundir.RowFile(files, rundir.TelemetryFile)))
	if err != nil {
		return s, torn, nil
	}
	defer f.Close()
	samples, _ := telemetry.ReadSamples(f) // up to a torn line, if any
	if len(samples) > 0 {
		in.Client = &s.Metrics
		s.Server, s.GPU, s.Telemetry = telemetry.Reduce(samples, in)
	}
	return s, torn, nil
}
