package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/rundir"
)

// baselineYAML is a small experiment on the built-in server, deterministic
// (physics_only: no jitter) so that the same decode speed gives the same
// TPOT. %BW% is the simulator's bandwidth efficiency, %RULES% its rules.
const baselineYAML = `apiVersion: infermatrix/v1
name: held
server: {target: builtin, sim: {preset: llama-3.1-8b-h100, physics_only: true, engine: {bandwidth_efficiency: %BW%}}}
defaults: {requests: 6, warmup: 1, concurrency: 1, input_tokens: 32, output_tokens: 12, body: {ignore_eos: true}}
rows:
  - id: chat
%RULES%
validity: {ignore: [samples, steady_state, load, client_cpu, dispatch_lag, client_stall, bursts, simulator]}
`

const heldRules = `acceptance:
  - name: no-slower
    expect: tpot.p95 < 1.10 * baseline.tpot.p95
`

func writeExperiment(t *testing.T, path, bw, rules, extra string) {
	t.Helper()
	y := strings.NewReplacer("%BW%", bw, "%RULES%", rules).Replace(baselineYAML) + extra
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRunAgainstBaseline is the check end to end: a run held to
// its baseline (tpot.p95 < 1.10 × baseline.tpot.p95) passes at the same
// decode speed, and fails (exit 3) with the simulator 20% slower
// (bandwidth_efficiency 0.8 → 0.64). The baseline is named by --baseline,
// then by the file's baseline key as a folder of runs, whose newest
// complete run it means; the manifest records it, and report judges again
// against the same run.
func TestRunAgainstBaseline(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the built-in server three times")
	}
	dir := t.TempDir()
	ctx := context.Background()
	base := filepath.Join(dir, "base.yaml")
	writeExperiment(t, base, "0.8", "", "")
	first := filepath.Join(dir, "runs", "held", "first")
	if r := cli(t, ctx, "run", base, "--out", first); r.code != exitOK {
		t.Fatalf("baseline run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	same := filepath.Join(dir, "same.yaml")
	writeExperiment(t, same, "0.8", heldRules, "")
	second := filepath.Join(dir, "second")
	r := cli(t, ctx, "run", same, "--baseline", first, "--out", second)
	if r.code != exitOK || !strings.Contains(r.stdout, "verdict: PASS") {
		t.Fatalf("same speed against the baseline: exit %d; want 0\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	md, err := os.ReadFile(filepath.Join(second, rundir.DecisionFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "## Baseline") || !strings.Contains(string(md), first) {
		t.Errorf("decision.md has no Baseline section naming %s", first)
	}

	// Slower decode, the baseline from the file's key: a folder of runs.
	slow := filepath.Join(dir, "slow.yaml")
	writeExperiment(t, slow, "0.64", heldRules, "baseline: runs/held\n")
	third := filepath.Join(dir, "third")
	r = cli(t, ctx, "run", slow, "--out", third)
	if r.code != exitAcceptance || !strings.Contains(r.stdout, "verdict: FAIL") {
		t.Fatalf("20%% slower against the baseline: exit %d; want 3\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	man, err := (&rundir.Dir{Path: third}).Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if man.Baseline == nil || man.Baseline.Dir != first || man.Baseline.Given != filepath.Join(dir, "runs", "held") || man.Baseline.ExperimentSHA256 == "" {
		t.Errorf("manifest baseline = %+v; want %s, picked from the folder", man.Baseline, first)
	}
	// report re-renders against the baseline the manifest recorded.
	if r := cli(t, ctx, "report", third); r.code != exitAcceptance {
		t.Errorf("report: exit %d; want 3 as the run\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// A file that reads the baseline without one is refused, naming the flag.
	if r := cli(t, ctx, "validate", same); r.code != exitInvalid || !strings.Contains(r.stderr, "--baseline") {
		t.Errorf("validate without a baseline: exit %d; want 4 with a hint\n%s", r.code, r.stderr)
	}
}

// TestReportFindsARelativeBaseline: a baseline named by a relative path is
// recorded absolute, so `report` run from another directory judges the
// run against the same baseline rather than calling it lost.
func TestReportFindsARelativeBaseline(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the built-in server twice")
	}
	dir := t.TempDir()
	ctx := context.Background()
	writeExperiment(t, filepath.Join(dir, "base.yaml"), "0.8", "", "")
	writeExperiment(t, filepath.Join(dir, "held.yaml"), "0.8", heldRules, "")
	t.Chdir(dir)
	if r := cli(t, ctx, "run", "base.yaml", "--out", "runs/held/first"); r.code != exitOK {
		t.Fatalf("baseline run: exit %d\n%s", r.code, r.stderr)
	}
	if r := cli(t, ctx, "run", "held.yaml", "--out", "runs/held/second", "--baseline", "runs/held/first"); r.code != exitOK {
		t.Fatalf("held run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	t.Chdir(t.TempDir())
	second := filepath.Join(dir, "runs", "held", "second")
	r := cli(t, ctx, "report", second)
	if r.code != exitOK || strings.Contains(r.stderr, "cannot be read") || strings.Contains(r.stdout, "rejudged") {
		t.Errorf("report from elsewhere: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
