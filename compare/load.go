// Package compare compares two runs of an experiment: it matches their
// rows by id, says which rows were added, removed or changed in their
// workload (and never compares those as if equal), puts a confidence
// interval on the change of every headline metric of every matched row,
// calls a change a regression only when it is statistically significant
// and larger than a practical threshold, and lists what changed between
// the two runs' manifests (tool, experiment, server, host).
//
// Intervals come from the raw per-request records (rows/<id>/requests.jsonl),
// summarised again with the run's own metric definitions (metrics'
// Aggregator), so that a change in tpot.p95 is a change in the tpot.p95 the
// summaries print. docs/comparison.md is the method in prose.
//
// It reads run directories only (rundir); it does not import reports, which
// may import it.
package compare

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/validity"
)

// ErrNotComparable marks every reason two runs cannot be compared: a
// missing or unreadable file, runs of different experiments, no row in
// common. The command line exits 4 on it.
var ErrNotComparable = errors.New("cannot compare")

// decisionFile is reports' decision.json, read here for each row's
// validity (compare does not import reports).
const decisionFile = "decision.json"

// Run is one run directory, read for comparison.
type Run struct {
	Dir *rundir.Dir
	// Name is the run directory's own name (its UTC timestamp, or what
	// --out named it), which names the comparison's folder.
	Name     string
	Manifest *rundir.Manifest
	Summary  *metrics.Summary
	// Validity holds each row's validity verdict from decision.json, and
	// Verdicts each row's verdict there (pass, fail, invalid, not run…).
	Validity map[string]validity.Verdict
	Verdicts map[string]string

	runVerdict string // decision.json's verdict of the run
}

// decisionRows is the part of decision.json compare reads.
type decisionRows struct {
	Verdict string `json:"verdict"`
	Rows    []struct {
		ID       string           `json:"id"`
		Verdict  string           `json:"verdict"`
		Validity validity.Verdict `json:"validity"`
	} `json:"rows"`
}

// Load reads a run directory: its manifest, summary.json and decision.json.
// A run killed before it wrote its summaries has its records but not these;
// `infermatrix report` rebuilds them (compare does not, so that a
// comparison never rests on a summary nobody looked at), and the error says
// so.
func Load(path string) (*Run, error) {
	if _, err := os.Stat(filepath.Join(path, rundir.ManifestFile)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s is not a run directory (no %s)", ErrNotComparable, path, rundir.ManifestFile)
		}
		return nil, fmt.Errorf("%w: %w", ErrNotComparable, err)
	}
	d, err := rundir.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w; run `infermatrix report %s` first if the run was killed", ErrNotComparable, err, path)
	}
	m, err := d.Manifest()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotComparable, err)
	}
	for _, f := range []string{rundir.SummaryFile, decisionFile} {
		if _, err := os.Stat(filepath.Join(path, f)); err != nil {
			return nil, fmt.Errorf("%w: %s has no %s (the run stopped before writing it); run `infermatrix report %s` first", ErrNotComparable, path, f, path)
		}
	}
	s, err := d.Summary()
	if err != nil {
		return nil, fmt.Errorf("%w: %w; run `infermatrix report %s` first", ErrNotComparable, err, path)
	}
	b, err := os.ReadFile(filepath.Join(path, decisionFile))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotComparable, err)
	}
	var dec decisionRows
	if err := json.Unmarshal(b, &dec); err != nil {
		return nil, fmt.Errorf("%w: %s: %w; run `infermatrix report %s` to write it again", ErrNotComparable, filepath.Join(path, decisionFile), err, path)
	}
	r := &Run{Dir: d, Name: filepath.Base(filepath.Clean(path)), Manifest: m, Summary: s,
		Validity: map[string]validity.Verdict{}, Verdicts: map[string]string{}, runVerdict: dec.Verdict}
	for _, row := range dec.Rows {
		r.Validity[row.ID] = row.Validity
		r.Verdicts[row.ID] = row.Verdict
	}
	return r, nil
}

// planned returns the manifest's expanded row with this id, or nil.
func (r *Run) planned(id string) *schema.PlannedRow {
	for i := range r.Manifest.Rows {
		if r.Manifest.Rows[i].ID == id {
			return &r.Manifest.Rows[i]
		}
	}
	return nil
}

// semantics is the run's metric definitions: its summary's, else its
// manifest's, infermatrix's when neither names them (runs from before the
// setting).
func (r *Run) semantics() string {
	switch {
	case r.Summary != nil && r.Summary.Semantics != "":
		return r.Summary.Semantics
	case r.Manifest != nil && r.Manifest.Semantics != "":
		return r.Manifest.Semantics
	}
	return metrics.SemInfermatrix
}

// Resolve turns the command line's arguments into two run directories:
// two arguments are the base and the new run; one is a folder of runs of an
// experiment (runs/<name>), whose two newest runs, by the start time in
// their manifests, are compared. Symbolic links (runs/<name>/latest) and
// folders without a manifest (comparisons, anything else) are skipped.
func Resolve(args []string) (base, new string, err error) {
	switch len(args) {
	case 2:
		return args[0], args[1], nil
	case 1:
	default:
		return "", "", fmt.Errorf("want BASE_RUN NEW_RUN, or one folder of runs")
	}
	dir := args[0]
	if _, err := os.Stat(filepath.Join(dir, rundir.ManifestFile)); err == nil {
		return "", "", fmt.Errorf("%w: %s is one run; name a second run to compare it with, or the folder holding both", ErrNotComparable, dir)
	}
	runs, err := ListRuns(dir)
	if err != nil {
		return "", "", err
	}
	if len(runs) < 2 {
		return "", "", fmt.Errorf("%w: %s holds %d run%s; a comparison needs two", ErrNotComparable, dir, len(runs), plural(len(runs)))
	}
	return runs[len(runs)-2].Path, runs[len(runs)-1].Path, nil
}

// Listed is a run directory found in a folder of runs.
type Listed struct {
	Path     string
	Manifest *rundir.Manifest
}

// ListRuns lists the run directories directly inside dir, oldest first by
// the start time in their manifests (then by name, for runs started in the
// same instant). Symbolic links are skipped, so runs/<name>/latest does not
// list the newest run twice, and so are folders without a readable
// manifest.
func ListRuns(dir string) ([]Listed, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotComparable, err)
	}
	var out []Listed
	for _, e := range entries {
		if !e.IsDir() || e.Type()&fs.ModeSymlink != 0 {
			continue
		}
		p := filepath.Join(dir, e.Name())
		m, err := (&rundir.Dir{Path: p}).Manifest()
		if err != nil || m.Format != rundir.Format {
			continue
		}
		out = append(out, Listed{Path: p, Manifest: m})
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Manifest.Started, out[j].Manifest.Started
		if !a.Equal(b) {
			return a.Before(b)
		}
		return out[i].Path < out[j].Path
	})
	return out, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
