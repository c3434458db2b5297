package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/internal/cheapsse"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/reports"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/verdict"
	"github.com/xuri/excelize/v2"
)

// mainArgsEnv makes the test binary run the command line instead of the
// tests (see TestMain), so a test can kill a real `infermatrix run`
// process without building the binary.
const mainArgsEnv = "INFERMATRIX_TEST_MAIN_ARGS"

func TestMain(m *testing.M) {
	if os.Getenv(cheapEnv) != "" {
		os.Exit(cheapsse.Serve())
	}
	if args, ok := os.LookupEnv(mainArgsEnv); ok {
		os.Exit(Main(context.Background(), strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
	}
	code := m.Run()
	removeBuiltCLI()
	os.Exit(code)
}

// killedRun runs testdata/rerender.yaml to completion and returns its
// directory and summary.json; each case copies it and damages the copy as
// a kill, a full disk or a careless hand would.
func killedRun(t *testing.T) (string, map[string][]byte, *metrics.Summary) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "run")
	r := cli(t, context.Background(), "run", "testdata/rerender.yaml", "--out", out)
	if r.code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var sum metrics.Summary
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "summary.json"))), &sum); err != nil {
		t.Fatal(err)
	}
	return out, readTree(t, out), &sum
}

// asKilled makes a copy of a run's files look as a run killed during its
// last row leaves them: no summary.json, no decision record, no summary
// for the row it was in, and the manifest as written at the start.
func asKilled(t *testing.T, files map[string][]byte, lastRow string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for k, v := range files {
		switch {
		case k == "summary.json", k == "summary.csv", strings.HasPrefix(k, "decision."), k == "analysis.json",
			k == "report.html", k == "results.xlsx", k == "profile_export.jsonl", strings.HasPrefix(k, "plots/"),
			k == "rows/"+lastRow+"/summary.json":
			continue
		}
		out[k] = v
	}
	var man map[string]any
	if err := json.Unmarshal(files["manifest.json"], &man); err != nil {
		t.Fatal(err)
	}
	man["status"] = rundir.StatusRunning
	delete(man, "ended")
	b, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out["manifest.json"] = b
	return out
}

// tearLastLine cuts a records file mid-way through its last line, as a
// write stopped by SIGKILL or a full disk leaves it, and returns the line
// number torn.
func tearLastLine(t *testing.T, b []byte) ([]byte, int) {
	t.Helper()
	lines := bytes.Count(b, []byte("\n"))
	if lines < 2 {
		t.Fatalf("records with %d lines; want at least 2", lines)
	}
	last := bytes.LastIndexByte(b[:len(b)-1], '\n') + 1
	return b[:last+(len(b)-last)/2], lines
}

// sameFigures compares a row rebuilt from its records with the runner's
// own summary of it, leaving out what only the live run knew: the
// client's self-check (CPU, timers; the dispatch lag comes from the
// records and is compared), arrivals that never got a record, and the
// status and mark a rebuild gives.
func sameFigures(t *testing.T, orig metrics.RowSummary, re metrics.RowSummary) {
	t.Helper()
	if !re.Rebuilt {
		t.Errorf("row %s: not marked rebuilt", re.ID)
	}
	lag := re.SelfCheck.DispatchLag
	re.SelfCheck = orig.SelfCheck
	re.SelfCheck.DispatchLag = lag
	re.Requests.Unsent = orig.Requests.Unsent
	re.ScheduleStartNS = orig.ScheduleStartNS // the dispatcher's, in no record
	re.Status, re.Rebuilt = orig.Status, false
	a, _ := json.Marshal(orig)
	b, _ := json.Marshal(re)
	if !bytes.Equal(a, b) {
		t.Errorf("row %s rebuilt from its records differs from the run's own summary:%s", re.ID, lineDiff(bytes.ReplaceAll(a, []byte(","), []byte(",\n")), bytes.ReplaceAll(b, []byte(","), []byte(",\n"))))
	}
}

// TestReportRebuildsKilledRun damages copies of a real run's directory the
// ways a killed run leaves it, and checks that `report` rebuilds the
// summaries from the records, marks the record as rebuilt, judges the run
// INCOMPLETE with exit 130, reports a torn last line, and that every row
// rebuilt from untouched records has exactly the figures the runner
// summarised.
func TestReportRebuildsKilledRun(t *testing.T) {
	_, files, orig := killedRun(t)
	const last = "sweep/c=2"
	recs := "rows/" + last + "/requests.jsonl"

	t.Run("killed mid-row with a torn last line", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "run")
		killed := asKilled(t, files, last)
		// Only the row the run was in lost its summary; tear it too, so
		// that every row is summarised from its records.
		for _, id := range []string{"chat", "arrivals", "sweep/c=1"} {
			delete(killed, "rows/"+id+"/summary.json")
		}
		torn, line := tearLastLine(t, killed[recs])
		killed[recs] = torn
		writeTree(t, dir, killed)

		r := cli(t, context.Background(), "report", dir)
		if r.code != exitInterrupted {
			t.Fatalf("report: exit %d; want %d\n%s%s", r.code, exitInterrupted, r.stdout, r.stderr)
		}
		wantNote := "note: rows/sweep/c=2/requests.jsonl: line " + strconv.Itoa(line) + " is torn (a partial write when the run was killed); skipped"
		if !strings.Contains(r.stderr, wantNote) {
			t.Errorf("stderr lacks %q:\n%s", wantNote, r.stderr)
		}
		if !strings.Contains(r.stdout, "verdict: INCOMPLETE") {
			t.Errorf("stdout %q; want an INCOMPLETE verdict", r.stdout)
		}
		md := readFile(t, filepath.Join(dir, "decision.md"))
		verdictLine := md[strings.Index(md, "**Verdict: "):]
		verdictLine = verdictLine[:strings.Index(verdictLine, "\n")]
		for _, want := range []string{"**Verdict: INCOMPLETE.**", "Rebuilt from records after the run stopped without writing its summaries", "summary.json is missing", "the run did not record its end"} {
			if !strings.Contains(verdictLine, want) {
				t.Errorf("decision.md's verdict line lacks %q:\n%s", want, verdictLine)
			}
		}
		html := readFile(t, filepath.Join(dir, "report.html"))
		if !strings.Contains(html, "Rebuilt from records after the run stopped without writing its summaries") {
			t.Error("report.html does not say it was rebuilt")
		}
		if !xlsxSays(t, filepath.Join(dir, "results.xlsx"), "Metadata", "Rebuilt", "Rebuilt from records") {
			t.Error("results.xlsx's Metadata sheet does not say it was rebuilt")
		}
		var d verdict.Decision
		if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, "decision.json"))), &d); err != nil {
			t.Fatal(err)
		}
		if d.Verdict != verdict.Incomplete || !strings.HasPrefix(d.Rebuilt, "Rebuilt from records") {
			t.Errorf("decision.json: verdict %q, rebuilt %q; want incomplete, marked rebuilt", d.Verdict, d.Rebuilt)
		}
		for _, rv := range d.Rows {
			// The experiment ignores the other live-run checks.
			if !strings.Contains(strings.Join(rv.Validity.Notes, "\n"), "stamp_error: not measured: the row was rebuilt from its records") {
				t.Errorf("row %s: validity notes %q; want the live-run checks not measured", rv.ID, rv.Validity.Notes)
			}
		}
		// Nothing the run wrote was overwritten or added in its place.
		for _, f := range []string{"summary.json", "rows/chat/summary.json"} {
			if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
				t.Errorf("%s: %v; want it left missing", f, err)
			}
		}

		in, _, err := reports.LoadRun(&rundir.Dir{Path: dir}, reports.RerenderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !in.Summary.Interrupted {
			t.Error("the rebuilt summary of a killed run is not marked interrupted")
		}
		for _, id := range []string{"chat", "arrivals", "sweep/c=1"} {
			re := in.Summary.Row(id)
			if re.Status != metrics.RowInterrupted {
				t.Errorf("row %s: status %q; want %q (its end was not recorded)", id, re.Status, metrics.RowInterrupted)
			}
			sameFigures(t, *orig.Row(id), *re)
		}
		if got, want := in.Summary.Row(last).Requests.Sent+in.Summary.Row(last).Requests.Warmup, orig.Row(last).Requests.Sent+orig.Row(last).Requests.Warmup-1; got != want {
			t.Errorf("row %s: %d requests after tearing one; want %d", last, got, want)
		}
	})

	t.Run("killed between rows", func(t *testing.T) {
		// The last row never started: no records, so not run; the rows
		// before keep their own summaries, self-check included.
		dir := filepath.Join(t.TempDir(), "run")
		killed := asKilled(t, files, last)
		delete(killed, recs)
		writeTree(t, dir, killed)
		r := cli(t, context.Background(), "report", dir)
		if r.code != exitInterrupted {
			t.Fatalf("report: exit %d; want %d\n%s%s", r.code, exitInterrupted, r.stdout, r.stderr)
		}
		var d verdict.Decision
		if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, "decision.json"))), &d); err != nil {
			t.Fatal(err)
		}
		if rv := d.Row(last); rv == nil || rv.Verdict != verdict.NotRun {
			t.Errorf("row %s: %+v; want not run", last, rv)
		}
		if !strings.Contains(d.Rebuilt, "no records, so not run: `sweep/c=2`") {
			t.Errorf("rebuilt %q; want the row without records named", d.Rebuilt)
		}
		in, _, err := reports.LoadRun(&rundir.Dir{Path: dir}, reports.RerenderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"chat", "arrivals", "sweep/c=1"} {
			if rs := in.Summary.Row(id); rs.Rebuilt || rs.Status != metrics.RowComplete || rs.SelfCheck.Cores == 0 {
				t.Errorf("row %s: rebuilt %v, status %s, %d cores; want its own summary, complete, with its self-check", id, rs.Rebuilt, rs.Status, rs.SelfCheck.Cores)
			}
		}
	})

	t.Run("torn summary.json of a completed run", func(t *testing.T) {
		// A full disk, say: summary.json half written. The manifest says
		// the run completed, so the verdict stands, marked rebuilt.
		dir := filepath.Join(t.TempDir(), "run")
		writeTree(t, dir, files)
		sj := files["summary.json"]
		if err := os.WriteFile(filepath.Join(dir, "summary.json"), sj[:len(sj)/2], 0o644); err != nil {
			t.Fatal(err)
		}
		r := cli(t, context.Background(), "report", dir)
		if r.code != exitOK {
			t.Fatalf("report: exit %d; want %d\n%s%s", r.code, exitOK, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, "summary.json is torn (it does not parse)") {
			t.Errorf("stderr does not say summary.json is torn:\n%s", r.stderr)
		}
		md := readFile(t, filepath.Join(dir, "decision.md"))
		if !strings.Contains(md, "Rebuilt from records after the run stopped without writing its summaries (summary.json is torn") {
			t.Errorf("decision.md is not marked rebuilt:\n%s", md)
		}
	})

	t.Run("manifest.json lost too", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "run")
		killed := asKilled(t, files, last)
		delete(killed, "manifest.json")
		writeTree(t, dir, killed)
		r := cli(t, context.Background(), "report", dir)
		if r.code != exitInterrupted {
			t.Fatalf("report: exit %d; want %d\n%s%s", r.code, exitInterrupted, r.stdout, r.stderr)
		}
		md := readFile(t, filepath.Join(dir, "decision.md"))
		for _, want := range []string{"manifest.json is missing: the run's settings were read from experiment.yaml", "(SIMULATED)"} {
			if !strings.Contains(md, want) {
				t.Errorf("decision.md lacks %q", want)
			}
		}
		in, _, err := reports.LoadRun(&rundir.Dir{Path: dir}, reports.RerenderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sameFigures(t, *orig.Row(last), *in.Summary.Row(last))
	})

	t.Run("errors", func(t *testing.T) {
		// A bad line before the last was not written by a kill.
		dir := filepath.Join(t.TempDir(), "run")
		killed := asKilled(t, files, last)
		lines := bytes.SplitAfter(killed[recs], []byte("\n"))
		lines[1] = []byte("{\"id\":\"x\",\n")
		killed[recs] = bytes.Join(lines, nil)
		writeTree(t, dir, killed)
		r := cli(t, context.Background(), "report", dir)
		if r.code != exitRuntime || !strings.Contains(r.stderr, "requests.jsonl: line 2 is not a record") {
			t.Errorf("a corrupt middle line: exit %d, stderr %q; want %d naming line 2", r.code, r.stderr, exitRuntime)
		}

		// Without the manifest and experiment.yaml, nothing says what ran.
		dir = filepath.Join(t.TempDir(), "run")
		killed = asKilled(t, files, last)
		delete(killed, "manifest.json")
		delete(killed, "experiment.yaml")
		writeTree(t, dir, killed)
		r = cli(t, context.Background(), "report", dir)
		if r.code != exitRuntime || !strings.Contains(r.stderr, "manifest.json is missing, and experiment.yaml, which could stand in for it, cannot be read") {
			t.Errorf("no manifest, no experiment: exit %d, stderr %q; want %d and why", r.code, r.stderr, exitRuntime)
		}

		// An experiment.yaml edited after the run cannot stand in for
		// the manifest.
		dir = filepath.Join(t.TempDir(), "run")
		killed = asKilled(t, files, last)
		delete(killed, "manifest.json")
		killed["experiment.yaml"] = append(killed["experiment.yaml"], "# edited\n"...)
		writeTree(t, dir, killed)
		r = cli(t, context.Background(), "report", dir)
		if r.code != exitInvalid || !strings.Contains(r.stderr, "it was edited after the run") {
			t.Errorf("edited experiment.yaml: exit %d, stderr %q; want %d", r.code, r.stderr, exitInvalid)
		}
	})
}

// TestReportAfterSIGKILL kills a real `infermatrix run` process with
// SIGKILL in the middle of a row, and reports its run directory.
func TestReportAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a subprocess for a second or more")
	}
	out := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+strings.Join([]string{"run", "testdata/long.yaml", "--out", out}, "\x1f"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	recs := filepath.Join(out, "rows", "forever", "requests.jsonl")
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(recs)
		if bytes.Count(b, []byte("\n")) >= 20 {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("no 20 records after 60 s\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if _, err := os.Stat(filepath.Join(out, "summary.json")); !os.IsNotExist(err) {
		t.Fatalf("summary.json after SIGKILL: %v; want none", err)
	}

	r := cli(t, context.Background(), "report", out)
	if r.code != exitInterrupted {
		t.Fatalf("report: exit %d; want %d\n%s%s", r.code, exitInterrupted, r.stdout, r.stderr)
	}
	md := readFile(t, filepath.Join(out, "decision.md"))
	for _, want := range []string{"**Verdict: INCOMPLETE.**", "Rebuilt from records after the run stopped without writing its summaries (summary.json is missing", "**Interrupted.**"} {
		if !strings.Contains(md, want) {
			t.Errorf("decision.md lacks %q", want)
		}
	}
	in, _, err := reports.LoadRun(&rundir.Dir{Path: out}, reports.RerenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs := in.Summary.Row("forever")
	b, _ := os.ReadFile(recs)
	if whole := bytes.Count(b, []byte("\n")); rs.Status != metrics.RowInterrupted || rs.Requests.Sent+rs.Requests.Warmup != whole {
		t.Errorf("row forever: status %s, %d requests; want interrupted, and the %d whole records on disk", rs.Status, rs.Requests.Sent+rs.Requests.Warmup, whole)
	}
}

// xlsxSays reports whether a sheet of the workbook has a line whose first
// cell is key and whose second starts with value.
func xlsxSays(t *testing.T, path, sheet, key, value string) bool {
	t.Helper()
	f, err := excelize.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := f.GetRows(sheet)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if len(r) >= 2 && r[0] == key && strings.HasPrefix(r[1], value) {
			return true
		}
	}
	return false
}
