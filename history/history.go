// Package history lists every run of an experiment in a folder in the
// order they ran, with each run's verdict, each row's headline metrics and
// what changed between consecutive runs, and draws a trend per metric:
// `infermatrix history runs/<name>`.
//
// It reads only what each run wrote (manifest.json, summary.json,
// decision.json), so it works on any folder of run directories: the runs of
// one experiment under runs/<name>/, or CI artifacts unpacked under names
// that say nothing of when they ran. Runs are therefore ordered by the
// start time their manifest records, never by folder name.
package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/infermatrix/infermatrix/compare"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/verdict"
)

// MaxDepth is how far below the folder run directories are looked for:
// runs/<name>/<run>/ is one level down; an artifact unpacked as
// <artifact>/<run>/ or <artifact>/<name>/<run>/ is two or three. A run
// directory is not looked into.
const MaxDepth = 3

// Options narrow a history.
type Options struct {
	// Rows keeps these rows only: a row id, or a swept row's base id for
	// all its points ("saturation" for saturation/c=1 … c=32).
	Rows []string
	// Last keeps the newest Last runs; 0 keeps all. The runs left out
	// still count in the positions (run 7 of 9 stays run 7), and the
	// first run kept says what changed since the run before it.
	Last int
}

// Headline metrics, in the order every output shows them.
var Metrics = []Metric{
	{Key: "ttft_p95", Name: "TTFT p95", Unit: "ms", Get: func(r *metrics.RowSummary) float64 { return r.Metrics.TTFT.P95 }, Dist: func(r *metrics.RowSummary) int { return r.Metrics.TTFT.Count }},
	{Key: "tpot_p95", Name: "TPOT p95", Unit: "ms", Get: func(r *metrics.RowSummary) float64 { return r.Metrics.TPOT.P95 }, Dist: func(r *metrics.RowSummary) int { return r.Metrics.TPOT.Count }},
	{Key: "e2e_p95", Name: "E2E p95", Unit: "ms", Get: func(r *metrics.RowSummary) float64 { return r.Metrics.E2E.P95 }, Dist: func(r *metrics.RowSummary) int { return r.Metrics.E2E.Count }},
	{Key: "output_tok_s", Name: "output tok/s", Unit: "tok/s", Get: func(r *metrics.RowSummary) float64 { return r.Throughput.OutputTokensPerS }},
	{Key: "error_ratio", Name: "error ratio", Unit: "", Get: func(r *metrics.RowSummary) float64 { return r.Errors.Ratio }},
}

// Metric is one headline metric: how to read it from a row's summary.
type Metric struct {
	Key, Name, Unit string
	Get             func(*metrics.RowSummary) float64
	// Dist, for a distribution, is its sample count: a percentile of no
	// samples is no value, not zero.
	Dist func(*metrics.RowSummary) int
}

// History is every run found, oldest first.
type History struct {
	Folder string
	Runs   []Run
	// Total is the number of runs found, before Options.Last.
	Total int
	// Rows are the row ids shown, in the order they first appear.
	Rows []string
	// Skipped are folders that hold a manifest.json but could not be
	// listed, with why.
	Skipped []Skipped
}

// Skipped is a folder left out of the history.
type Skipped struct {
	Dir, Why string
}

// Run is one run directory.
type Run struct {
	// Index is the run's position in time order, from 1, over every run
	// found (Options.Last does not renumber).
	Index int
	// Dir is the run directory; Rel its path from the folder.
	Dir, Rel string
	Started  time.Time
	Manifest *rundir.Manifest
	// Verdict is the decision record's (PASS, FAIL, INCONCLUSIVE,
	// INCOMPLETE), or, where there is none, what that means: "no record",
	// or for a run that never recorded its end "killed, run `infermatrix
	// report DIR`".
	Verdict string
	// Killed is set for a run that stopped without writing its summary:
	// its figures are rebuilt by `infermatrix report`.
	Killed bool
	// Rebuilt is set when the summaries were rebuilt from the records
	// after the run was killed.
	Rebuilt bool
	// Values holds each row's headline figures, by row id; a row the run
	// did not measure is absent.
	Values map[string]*RowValues
	// Changes say what differs from the run before, from the two
	// manifests; nil for the first run.
	Changes []compare.Change
	// Note says why a figure is missing (a summary that could not be
	// read), for the reader.
	Note string
}

// RowValues are one row's headline figures in one run.
type RowValues struct {
	// Values are indexed as Metrics; NaN where the row has no value
	// (no successful request measured the distribution).
	Values  []float64
	Invalid bool   // the decision record found the row's figures untrustworthy
	Verdict string // the row's own verdict (pass, fail, invalid, no rules, ...)
}

// Load reads every run under folder, oldest first.
func Load(folder string, opts Options) (*History, error) {
	st, err := os.Stat(folder)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("history: %s is not a folder", folder)
	}
	h := &History{Folder: folder}
	dirs, err := findRuns(folder)
	if err != nil {
		return nil, err
	}
	for _, d := range dirs {
		r, err := readRun(folder, d)
		if err != nil {
			h.Skipped = append(h.Skipped, Skipped{Dir: d, Why: err.Error()})
			continue
		}
		h.Runs = append(h.Runs, *r)
	}
	sort.SliceStable(h.Runs, func(i, j int) bool {
		a, b := h.Runs[i], h.Runs[j]
		if !a.Started.Equal(b.Started) {
			return a.Started.Before(b.Started)
		}
		return a.Rel < b.Rel
	})
	h.Runs = h.dropCopies()
	if len(h.Runs) == 0 {
		return h, fmt.Errorf("history: no run directory (a folder with a manifest.json) in %s", folder)
	}
	for i := range h.Runs {
		h.Runs[i].Index = i + 1
		if i > 0 {
			h.Runs[i].Changes = compare.ManifestChanges(h.Runs[i-1].Manifest, h.Runs[i].Manifest)
		}
	}
	h.Total = len(h.Runs)
	if opts.Last > 0 && opts.Last < len(h.Runs) {
		h.Runs = h.Runs[len(h.Runs)-opts.Last:]
	}
	rows, err := h.rowOrder(opts.Rows)
	if err != nil {
		return nil, err
	}
	h.Rows = rows
	return h, nil
}

// dropCopies leaves out a run found twice (the same run unpacked from two
// artifacts, or copied beside itself): same start, experiment and host.
// The copy is listed as skipped, so that nothing disappears unsaid.
func (h *History) dropCopies() []Run {
	var out []Run
	for _, r := range h.Runs {
		if n := len(out); n > 0 {
			p := out[n-1]
			if p.Started.Equal(r.Started) && !r.Started.IsZero() &&
				p.Manifest.Experiment.SHA256 == r.Manifest.Experiment.SHA256 && p.Manifest.Host == r.Manifest.Host {
				h.Skipped = append(h.Skipped, Skipped{Dir: r.Dir, Why: "the same run as " + p.Rel + " (same start, experiment and host)"})
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// rowOrder is the rows to show: each row id in the order it first
// appears (manifest order within a run, runs oldest first), narrowed to
// want.
func (h *History) rowOrder(want []string) ([]string, error) {
	var all []string
	seen := map[string]bool{}
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			all = append(all, id)
		}
	}
	for _, r := range h.Runs {
		for _, pr := range r.Manifest.Rows {
			add(pr.ID)
		}
		for _, id := range sortedKeys(r.Values) {
			add(id)
		}
	}
	if len(want) == 0 {
		return all, nil
	}
	var out []string
	for _, w := range want {
		found := false
		for _, id := range all {
			if id == w || strings.HasPrefix(id, w+"/") {
				found = true
				if !contains(out, id) {
					out = append(out, id)
				}
			}
		}
		if !found {
			return nil, &UnknownRowError{Row: w, Known: all}
		}
	}
	return out, nil
}

// UnknownRowError is a --rows entry no run has: a mistake on the command
// line, not in the runs.
type UnknownRowError struct {
	Row   string
	Known []string
}

func (e *UnknownRowError) Error() string {
	return fmt.Sprintf("no run has a row %q; rows: %s", e.Row, strings.Join(e.Known, ", "))
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]*RowValues) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// findRuns walks folder for run directories: folders holding a
// manifest.json, not looked into further. Symbolic links are not followed
// (runs/<name>/latest points at a run listed already), and neither are
// comparisons (compare-*), re-judgements (rejudged) or hidden folders,
// which hold other records of runs, not runs.
func findRuns(folder string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(folder, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if p == folder {
				return err
			}
			return nil // an unreadable subfolder holds no run we can read
		}
		if !e.IsDir() {
			return nil
		}
		name := e.Name()
		if p != folder && (name == "rejudged" || strings.HasPrefix(name, "compare-") || strings.HasPrefix(name, ".")) {
			return filepath.SkipDir
		}
		if _, err := os.Lstat(filepath.Join(p, rundir.ManifestFile)); err == nil {
			dirs = append(dirs, p)
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(folder, p)
		if rel != "." && strings.Count(rel, string(filepath.Separator))+1 >= MaxDepth {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return dirs, nil
}

// readRun reads one run directory. A manifest that cannot be read is an
// error (the run cannot be placed in time); a summary or decision record
// that cannot be read leaves figures or verdict out and says why.
func readRun(folder, path string) (*Run, error) {
	d := &rundir.Dir{Path: path}
	m, err := d.Manifest()
	if err != nil {
		return nil, fmt.Errorf("manifest.json cannot be read, so the run cannot be placed in time (%w); `infermatrix report %s` rebuilds it from experiment.yaml", err, path)
	}
	if m.Format != rundir.Format {
		return nil, fmt.Errorf("run directory format %q, this build reads %q", m.Format, rundir.Format)
	}
	rel, _ := filepath.Rel(folder, path)
	r := &Run{Dir: path, Rel: rel, Started: m.Started, Manifest: m, Values: map[string]*RowValues{}}

	sum, serr := d.Summary()
	dec, derr := readDecision(path)
	switch {
	case derr == nil:
		r.Verdict = strings.ToUpper(dec.Verdict)
		r.Rebuilt = dec.Rebuilt != ""
	case errors.Is(serr, fs.ErrNotExist) && m.Status == rundir.StatusRunning:
		r.Killed = true
		r.Verdict = fmt.Sprintf("killed, run `infermatrix report %s`", path)
	case errors.Is(derr, fs.ErrNotExist):
		r.Verdict = "no record"
	default:
		r.Verdict = "no record"
		r.Note = "decision.json cannot be read: " + derr.Error()
	}
	if serr != nil {
		if !errors.Is(serr, fs.ErrNotExist) && r.Note == "" {
			r.Note = "summary.json cannot be read: " + serr.Error()
		}
		return r, nil
	}
	for i := range sum.Rows {
		rs := &sum.Rows[i]
		if rs.Requests.Sent == 0 && rs.Metrics.E2E.Count == 0 {
			continue // the row did not run
		}
		v := &RowValues{Values: make([]float64, len(Metrics))}
		for k, mt := range Metrics {
			v.Values[k] = mt.Get(rs)
			if mt.Dist != nil && mt.Dist(rs) == 0 {
				v.Values[k] = nan
			}
		}
		if dec != nil {
			if rv := dec.Row(rs.ID); rv != nil {
				v.Verdict = rv.Verdict
				v.Invalid = !rv.Validity.Valid
			}
		}
		r.Values[rs.ID] = v
	}
	return r, nil
}

var nan = math.NaN()

func readDecision(dir string) (*verdict.Decision, error) {
	b, err := os.ReadFile(filepath.Join(dir, verdict.DecisionJSON))
	if err != nil {
		return nil, err
	}
	var d verdict.Decision
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", verdict.DecisionJSON, err)
	}
	return &d, nil
}
