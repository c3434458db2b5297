package runner

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
)

// TestSelfCheckFromARealRun runs a short row against the built-in server
// and checks that its summary carries what the client measured of itself,
// the token check and the timeslices, and that the run records its
// semantics.
func TestSelfCheckFromARealRun(t *testing.T) {
	p := plan(t, `server: {target: builtin, sim: {preset: fixed, ttft: 2ms, itl: 1ms}}
defaults: {input_tokens: 32, output_tokens: 8, body: {ignore_eos: true}}
rows:
  - {id: closed, requests: 40, concurrency: 2}
report: {semantics: vllm, timeslice: 50ms}
`)
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	rs := res.Summary.Row("closed")
	c := rs.SelfCheck
	if c.Cores < 1 || c.CPUSeconds <= 0 || c.ClientCPU <= 0 || c.ClientCPU > 1.5 {
		t.Errorf("CPU: %v s, %v of %d cores; want a measured share of the cores", c.CPUSeconds, c.ClientCPU, c.Cores)
	}
	if c.ClockResolutionMS <= 0 || c.MeasurementErrorMS < c.ClockResolutionMS || c.MeasurementErrorMS < c.SchedDelayP99MS {
		t.Errorf("measurement error %v ms from clock %v ms and scheduling %v ms; want their sum", c.MeasurementErrorMS, c.ClockResolutionMS, c.SchedDelayP99MS)
	}
	if !c.SharedWithServer {
		t.Error("the built-in server shares the process, and the self-check does not say so")
	}
	if c.ClientBound != (c.ClientCPU >= metrics.CPUSaturation) {
		t.Errorf("client_bound %v at %.0f%% CPU of a closed-loop row", c.ClientBound, 100*c.ClientCPU)
	}
	// The built-in server counts with the row's tokenizer: no mismatch.
	tk := rs.Tokens
	if tk.Mismatch || tk.Input.Requests != 40 || tk.Input.Diff != 0 || tk.Output.Requests != 40 || tk.Output.Diff != 0 {
		t.Errorf("tokens = %+v; want 40 requests each side, no difference", tk)
	}
	// The slices add up to the row.
	var done int
	var tokens float64
	for _, s := range rs.Timeslices.Slices {
		done += s.Completed
		tokens += s.OutputTokens
	}
	if rs.Timeslices.WidthS != 0.05 || done != 40 || math.Abs(tokens-40*8) > 1e-6 {
		t.Errorf("timeslices: width %v, %d completed, %v tokens; want 0.05, 40 and 320", rs.Timeslices.WidthS, done, tokens)
	}
	if rs.Semantics != metrics.SemVLLM || res.Summary.Semantics != metrics.SemVLLM || res.Manifest.Semantics != metrics.SemVLLM {
		t.Errorf("semantics: row %q, summary %q, manifest %q; want vllm", rs.Semantics, res.Summary.Semantics, res.Manifest.Semantics)
	}
	// What is on disk says the same.
	var onDisk metrics.RowSummary
	b, err := os.ReadFile(filepath.Join(res.Dir.Path, rundir.RowFile("closed", rundir.SummaryFile)))
	if err != nil || json.Unmarshal(b, &onDisk) != nil || onDisk.SelfCheck.Cores != c.Cores || len(onDisk.Timeslices.Slices) != len(rs.Timeslices.Slices) {
		t.Errorf("rows/closed/summary.json: %v; self_check %+v", err, onDisk.SelfCheck)
	}
}
