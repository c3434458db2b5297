package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
)

// TestCalibrateExitCodes checks what calibrate refuses and with which
// code: a missing -o and an unknown --base are usage errors (2), a path
// that is not a run directory a runtime error (1); and sim refuses a
// preset file it cannot read before it listens.
func TestCalibrateExitCodes(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"calibrate", dir}, exitUsage, "-o PRESET.yaml is required"},
		{[]string{"calibrate", dir, "-o", filepath.Join(dir, "p.yaml"), "--base", "gpt-5"}, exitUsage, "not an engine preset"},
		{[]string{"calibrate", filepath.Join(dir, "nope"), "-o", filepath.Join(dir, "p.yaml")}, exitRuntime, "manifest"},
		{[]string{"sim", "--preset-file", filepath.Join(dir, "nope.yaml")}, exitUsage, "preset file"},
	} {
		r := cli(t, context.Background(), tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s", tc.args, r.code, tc.code, tc.want, r.stderr)
		}
	}
}

// TestCalibrateVirtualTwin is issue 14's check end to end: a run of the
// built-in server with parameters the tool is not told (more step
// overhead, slower bandwidth, a slower front end), on the virtual clock, is
// calibrated from the base preset; the same experiment on the fitted
// preset file, on the virtual clock, lands within 10% of the measured TTFT
// p50, TPOT p50 and output tokens/s on every row.
func TestCalibrateVirtualTwin(t *testing.T) {
	if raceEnabled {
		t.Skip("computation only: make test runs it in its second pass, without the race detector, which slows it sixfold")
	}
	if testing.Short() {
		t.Skip("a fit of four rows takes tens of seconds")
	}
	dir := t.TempDir()
	rows := `defaults: {warmup: 4, input_tokens: 512, output_tokens: 48, body: {ignore_eos: true}}
rows:
  - id: sweep
    sweep: {concurrency: [1, 4, 8, 16]}
    duration: 15s
  - id: arrivals
    rate: {per_second: 6, arrival: poisson}
    requests: 90
`
	hidden := `apiVersion: infermatrix/v1
name: hidden
server:
  target: builtin
  sim:
    preset: llama-3.1-8b-h100
    engine: {step_overhead: 2ms, bandwidth_efficiency: 0.55}
    front_end: {request_cost: 10ms, request_cost_per_token: 2us}
` + rows
	twin := `apiVersion: infermatrix/v1
name: twin
server: {target: builtin, sim: {preset_file: twin.yaml}}
` + rows
	for name, body := range map[string]string{"hidden.yaml": hidden, "twin-run.yaml": twin} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	measured, fitted := filepath.Join(dir, "measured"), filepath.Join(dir, "fitted")
	if r := cli(t, ctx, "run", filepath.Join(dir, "hidden.yaml"), "--virtual", "--out", measured, "--progress", "lines"); r.code != exitOK {
		t.Fatalf("measured run: exit %d\n%s", r.code, r.stderr)
	}
	r := cli(t, ctx, "calibrate", measured, "-o", filepath.Join(dir, "twin.yaml"), "--max-evals", "200")
	if r.code != exitOK {
		t.Fatalf("calibrate: exit %d\n%s", r.code, r.stderr)
	}
	t.Logf("calibrate:\n%s", r.stdout)
	if r := cli(t, ctx, "run", filepath.Join(dir, "twin-run.yaml"), "--virtual", "--out", fitted, "--progress", "lines"); r.code != exitOK {
		t.Fatalf("run on the fitted preset: exit %d\n%s", r.code, r.stderr)
	}
	want, got := readSummary(t, measured), readSummary(t, fitted)
	for _, m := range want.Rows {
		g := got.Row(m.ID)
		if g == nil {
			t.Errorf("row %s missing from the fitted run", m.ID)
			continue
		}
		for _, c := range []struct {
			name       string
			meas, simd float64
		}{
			{"TTFT p50", m.Metrics.TTFT.P50, g.Metrics.TTFT.P50},
			{"TPOT p50", m.Metrics.TPOT.P50, g.Metrics.TPOT.P50},
			{"output tok/s", m.Throughput.OutputTokensPerS, g.Throughput.OutputTokensPerS},
		} {
			if e := 100 * (c.simd - c.meas) / c.meas; math.IsNaN(e) || math.Abs(e) > 10 {
				t.Errorf("row %s %s: measured %.4g, fitted preset %.4g (%+.1f%%), want within 10%%", m.ID, c.name, c.meas, c.simd, e)
			}
		}
	}
	if dec := readFile(t, filepath.Join(fitted, "decision.md")); !strings.Contains(dec, "calibrated against "+measured) {
		t.Errorf("the decision record does not give the calibration:\n%s", dec[:min(len(dec), 1500)])
	}
}

func readSummary(t *testing.T, run string) *metrics.Summary {
	t.Helper()
	var s metrics.Summary
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(run, "summary.json"))), &s); err != nil {
		t.Fatal(err)
	}
	return &s
}
