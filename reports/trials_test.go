package reports

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/runner"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

// repeatedRun runs a row of three trials and a plain row on the built-in
// server, and returns the run directory.
func repeatedRun(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := `apiVersion: infermatrix/v1
name: rep
server: {target: builtin, sim: {preset: fixed, ttft: 2ms, itl: 1ms}}
defaults: {input_tokens: 32, output_tokens: 8, warmup: 2, concurrency: 2, requests: 12, body: {ignore_eos: true}}
rows:
  - {id: rep, repeat: 3}
  - {id: once}
validity: {ignore: [client_cpu, client_stall, bursts, simulator, stamp_error, load, steady_state, samples]}
acceptance:
  - {name: interval, rows: [rep], expect: "upper.tpot.p50 < 100 && p(tpot, 75) < 100"}
`
	return runExperiment(t, dir, src)
}

// runExperiment writes src as dir/exp.yaml, runs it, and returns the run
// directory, dir/run.
func runExperiment(t *testing.T, dir, src string) string {
	t.Helper()
	file := filepath.Join(dir, "exp.yaml")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	plan, err := schema.Load(file, schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	if _, err := runner.Run(context.Background(), plan, runner.Options{Out: run}); err != nil {
		t.Fatal(err)
	}
	return run
}

// TestRepeatedRowReport: a repeated row reads back from its run directory
// with its trials' samples (p() judged, the stored summary reproduced),
// decision.md shows the pooled figures with their intervals and a line per
// trial, and a run killed before its summaries is rebuilt with the same
// trials and intervals. The plain row's record has no such section.
func TestRepeatedRowReport(t *testing.T) {
	run := repeatedRun(t)
	in, notes, err := judgeRun(t, run, RerenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range notes {
		if strings.Contains(n, "reproduce") || strings.Contains(n, "as stored") {
			t.Errorf("note: %s", n)
		}
	}
	rv := in.Decision.Row("rep")
	if rv == nil || len(rv.Rules) != 1 || !rv.Rules[0].Pass || rv.Verdict == verdict.Fail {
		t.Fatalf("rep: %+v", rv)
	}
	md := markdownOf(t, in)
	for _, re := range []string{
		`## Repeated rows`,
		"### `rep` \\(3 trials, 95% intervals\\)",
		`- TPOT p50 [0-9.]+ ms \[[0-9.]+, [0-9.]+\] \((3 trials|mean of 3 trials; pooled [0-9.]+ ms)\)`,
		`\| 3 \| 12 / 12 \|`,
	} {
		if !regexp.MustCompile(re).MatchString(md) {
			t.Errorf("decision.md lacks %s", re)
		}
	}
	// Every figure shown with an interval lies inside it: the trials'
	// mean leads, not the pooled figure, which for a tail can lie outside.
	for _, m := range regexp.MustCompile(`(?m)^- .*? ([0-9.]+)(?: [a-z/]+)? \[([0-9.]+), ([0-9.]+)\]`).FindAllStringSubmatch(md, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		lo, _ := strconv.ParseFloat(m[2], 64)
		hi, _ := strconv.ParseFloat(m[3], 64)
		if v < lo || v > hi {
			t.Errorf("%q: the figure lies outside its interval", m[0])
		}
	}
	if strings.Contains(md, "`once` (") {
		t.Error("the plain row has a repeated-row section")
	}
	want := in.Summary.Row("rep").Intervals.TPOT.P50

	// Killed before the summaries: rebuilt from the trials' own.
	for _, f := range []string{rundir.SummaryFile, rundir.RowFile("rep", rundir.SummaryFile), rundir.RowFile(rundir.TrialRow("rep", 2), rundir.SummaryFile)} {
		if err := os.Remove(filepath.Join(run, f)); err != nil {
			t.Fatal(err)
		}
	}
	in, _, err = judgeRun(t, run, RerenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs := in.Summary.Row("rep")
	if rs == nil || len(rs.Trials) != 3 || rs.Intervals == nil || !rs.Rebuilt {
		t.Fatalf("rebuilt rep: %+v", rs)
	}
	if got := rs.Intervals.TPOT.P50; got.N != 3 || got.Lower > want.Upper || got.Upper < want.Lower {
		t.Errorf("rebuilt tpot.p50 interval %+v; the run's was %+v", got, want)
	}
}
