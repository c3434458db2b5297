package reports

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
)

var update = flag.Bool("update", false, "rewrite reports/testdata/golden/ from the output")

// fixtureRun is a hand-made run directory: experiment.yaml, manifest.json,
// summary.json and rows/*/requests.jsonl, whose summaries are those of its
// records.
const fixtureRun = "testdata/run"

// goldenFiles are the artifacts compared with testdata/golden/.
var goldenFiles = []string{"decision.md", "summary.csv", "decision.json", AIPerfExport}

// TestGolden renders the fixture run directory through the same path as
// `infermatrix report` and compares the artifacts with the golden files.
// After an intended change to the output, regenerate them with
//
//	go test ./reports -run TestGolden -update
//
// and review the diff.
func TestGolden(t *testing.T) {
	run := copyRun(t, fixtureRun)
	res, err := Rerender(run, RerenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Notes) > 0 {
		t.Errorf("re-rendering the fixture gave notes; its records should reproduce its summary:\n%s", strings.Join(res.Notes, "\n"))
	}
	for _, name := range goldenFiles {
		got, err := os.ReadFile(filepath.Join(run, name))
		if err != nil {
			t.Errorf("%s was not written: %v", name, err)
			continue
		}
		golden := filepath.Join("testdata", "golden", name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Errorf("%v (run with -update to create it)", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s (run with -update if the change is intended):\n%s", name, golden, firstDiff(string(want), string(got)))
		}
	}
}

// firstDiff shows the first line where two texts differ.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return "line " + strconv.Itoa(i+1) + ":\n  want: " + a + "\n  got:  " + b
		}
	}
	return "(same lines; different line endings?)"
}

// copyRun copies a run directory into a temporary one, which the test may
// then re-render into.
func copyRun(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "run")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

var updateFixture = flag.Bool("update-fixture", false, "rewrite testdata/run/summary.json from its records")

// TestFixtureSummary keeps the fixture run's summary.json what its records
// give, so that re-rendering it needs no note. After a change to what a
// summary holds, rewrite it with
//
//	go test ./reports -run TestFixtureSummary -update-fixture
//
// The client's own figures (CPU, scheduling delay) are not in the records
// and keep their stored values.
func TestFixtureSummary(t *testing.T) {
	dir, err := rundir.Open(fixtureRun)
	if err != nil {
		t.Fatal(err)
	}
	in, notes, err := LoadRun(dir, RerenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !*updateFixture {
		if len(notes) > 0 {
			t.Errorf("the fixture's records do not reproduce its summary.json (rewrite it with -update-fixture):\n%s", strings.Join(notes, "\n"))
		}
		return
	}
	sum := in.Summary
	for i := range sum.Rows {
		rs := &sum.Rows[i]
		agg := metrics.NewAggregator(metrics.Options{Percentiles: sum.Percentiles, SLO: sum.SLO, Semantics: sum.Semantics,
			API: in.Manifest.Server.Declared.API, Timeslice: in.Plan.Timeslice.D().Nanoseconds(),
			OpenLoop: in.Plan.Row(rs.ID).Load.Mode != schema.ModeConcurrency, RequestedRate: in.Plan.Row(rs.ID).Load.Rate})
		if err := dir.ReadRecords(rs.ID, func(r *metrics.Record) error { agg.Add(r); return nil }); err != nil {
			t.Fatal(err)
		}
		re := agg.Summary(rs.ID, rs.Base, rs.Status)
		lag := re.SelfCheck.DispatchLag
		gaps, zero, share := re.SelfCheck.Gaps, re.SelfCheck.ZeroGaps, re.SelfCheck.ZeroGapShare
		re.SelfCheck = rs.SelfCheck
		re.SelfCheck.DispatchLag = lag
		re.SelfCheck.Gaps, re.SelfCheck.ZeroGaps, re.SelfCheck.ZeroGapShare = gaps, zero, share
		*rs = re
	}
	if err := dir.WriteJSON(rundir.SummaryFile, sum); err != nil {
		t.Fatal(err)
	}
	for i := range sum.Rows {
		if err := dir.WriteJSON(rundir.RowFile(sum.Rows[i].ID, rundir.SummaryFile), sum.Rows[i]); err != nil {
			t.Fatal(err)
		}
	}
}
