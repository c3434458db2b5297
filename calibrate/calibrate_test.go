package calibrate

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/sim/engine"
)

// measuredRow plans one row of a fake measured run: a closed loop of
// users, or a Poisson rate, sending requests of varied lengths.
type measuredRow struct {
	id          string
	concurrency int
	rate        float64
	requests    int
	input       int
	output      int
}

// writeMeasuredRun writes a run directory as the runner would have, the
// server being the engine on cfg (the hidden parameters): the manifest,
// each row's records and summary, and the top-level summary.
func writeMeasuredRun(t *testing.T, cfg engine.Config, preset string, planned []measuredRow) string {
	t.Helper()
	dir, err := rundir.Create("", "", filepath.Join(t.TempDir(), "run"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	man := rundir.Manifest{Format: rundir.Format, Experiment: rundir.ExperimentInfo{Name: "hidden", SHA256: "abc"},
		Status: rundir.StatusComplete, Semantics: metrics.SemInfermatrix,
		Server: rundir.ServerInfo{Declared: schema.ServerPlan{API: "chat"}}}
	if preset != "" {
		man.Server.Discovered.Simulated = &rundir.Simulated{Preset: preset, Replicas: 1}
	}
	sum := metrics.Summary{Format: metrics.SummaryFormat, Experiment: "hidden"}
	var rows []*row
	for k, m := range planned {
		p := schema.PlannedRow{ID: m.id, Base: m.id, Streaming: true, Requests: m.requests, Warmup: 2}
		if m.rate > 0 {
			p.Load = schema.LoadPlan{Mode: schema.ModeRate, Rate: m.rate, Arrival: "poisson"}
		} else {
			p.Load = schema.LoadPlan{Mode: schema.ModeConcurrency, Concurrency: m.concurrency}
		}
		rw := &row{plan: p, api: "chat"}
		at := int64(0)
		for i := range m.requests + p.Warmup {
			// Lengths vary ±25% around the row's, as a dataset's do.
			f := 0.75 + 0.5*float64((i*37+k*11)%100)/100
			q := request{seq: int64(i), prompt: int(float64(m.input) * f), output: max(int(float64(m.output)*(1.75-f)), 2), warmup: i < p.Warmup}
			if m.rate > 0 {
				// A deterministic Poisson schedule.
				u := float64((i*7919+13)%1000+1) / 1001
				at += int64(-math.Log(u) / m.rate * 1e9)
				q.scheduled = at
			}
			rw.requests = append(rw.requests, q)
		}
		rows = append(rows, rw)
		man.Rows = append(man.Rows, p)
	}
	// One server serves the rows one after another, as a run's does.
	all, done := replayRun(cfg, rows)
	for i, rw := range rows {
		id, recs := rw.plan.ID, all[i]
		if done[i] < 1 {
			t.Fatalf("row %s: only %.0f%% of the hidden replay finished", id, 100*done[i])
		}
		w, err := dir.CreateRecords(id)
		if err != nil {
			t.Fatal(err)
		}
		for j, rec := range recs {
			rec.ID, rec.Row = fmt.Sprintf("%s-%d", id, j), id
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		s := summarise(recs, rw, man.Semantics)
		if err := dir.WriteJSON(rundir.RowFile(id, rundir.SummaryFile), s); err != nil {
			t.Fatal(err)
		}
		sum.Rows = append(sum.Rows, s)
	}
	if err := dir.WriteJSON(rundir.ManifestFile, man); err != nil {
		t.Fatal(err)
	}
	if err := dir.WriteJSON(rundir.SummaryFile, sum); err != nil {
		t.Fatal(err)
	}
	return dir.Path
}

// TestFitRecoversHiddenParameters is the check issue 14 names: a server
// whose step overhead, bandwidth efficiency and front-end request cost
// differ from the base preset, which the tool is not told, is calibrated
// from the base; the fitted preset, replayed, must land within 10% of the
// measured TTFT p50, TPOT p50 and output tokens/s on every row, the
// held-out ones included.
func TestFitRecoversHiddenParameters(t *testing.T) {
	base, _ := engine.LookupPreset("llama-3.1-8b-h100")
	hidden := base.Config
	hidden.StepOverhead = 2 * time.Millisecond          // base 0.5 ms
	hidden.Efficiency.Bandwidth = 0.55                  // base 0.8
	hidden.FrontEnd.RequestCost = 15 * time.Millisecond // base none
	hidden.FrontEnd.RequestCostPerToken = 2 * time.Microsecond
	// A sweep as a capacity plan runs one: closed loops from one user to
	// 32, and two Poisson rates, the same request shape throughout.
	var rows []measuredRow
	for _, c := range []int{1, 2, 4, 8, 16, 32} {
		rows = append(rows, measuredRow{id: fmt.Sprintf("c=%d", c), concurrency: c, requests: max(6*c, 48), input: 1024, output: 64})
	}
	rows = append(rows, measuredRow{id: "rate=2", rate: 2, requests: 30, input: 1024, output: 64},
		measuredRow{id: "rate=6", rate: 6, requests: 40, input: 1024, output: 64})
	evals := 300
	if raceEnabled {
		// Under the race detector, which slows the replays tenfold, four
		// rows (one held out) and fewer replays: the same check, smaller.
		// TestCalibrateVirtualTwin runs the whole path under it too.
		rows = []measuredRow{rows[0], rows[2], rows[4], rows[6]}
		rows[1].requests, rows[2].requests = 32, 64
		evals = 250
	}
	dir := writeMeasuredRun(t, hidden, "llama-3.1-8b-h100", rows)
	res, err := Run(dir, Options{Tool: "test", MaxEvals: evals})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	res.Table(&out)
	t.Logf("%d evaluations\n%s\n%s", res.Evals, out.String(), res.YAML())
	c := res.Preset.Calibration
	if len(c.HeldOutRows) == 0 || len(c.FittedRows)+len(c.HeldOutRows) != len(rows) {
		t.Errorf("fitted %v, held out %v: want every row, at least one held out", c.FittedRows, c.HeldOutRows)
	}
	for _, r := range c.Rows {
		for name, cell := range map[string]schema.CalibrationCell{"TTFT p50": r.TTFTP50, "TPOT p50": r.TPOTP50, "output tok/s": r.OutputTPS} {
			if cell.ErrorPct == nil || math.Abs(*cell.ErrorPct) > 10 {
				t.Errorf("row %s (held out %v) %s: error %v%%, want within 10%%", r.ID, r.HeldOut, name, num(cell.ErrorPct))
			}
		}
	}

	// The preset file it writes is what server.sim.preset_file reads,
	// and a run on it gets the fitted engine.
	expDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(expDir, "fitted.yaml"), res.YAML(), 0o644); err != nil {
		t.Fatal(err)
	}
	exp := filepath.Join(expDir, "exp.yaml")
	if err := os.WriteFile(exp, []byte(`apiVersion: infermatrix/v1
name: check
server: {target: builtin, sim: {preset_file: fitted.yaml}}
rows: [{id: a, concurrency: 1, requests: 1, input_tokens: 8, output_tokens: 8}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	plan, err := schema.Load(exp, schema.Options{})
	if err != nil {
		t.Fatalf("the written preset does not load:\n%v\n%s", err, res.YAML())
	}
	got, err := plan.Server.Sim.EngineConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got.StepOverhead != res.Config.StepOverhead || got.Efficiency != res.Config.Efficiency || got.FrontEnd != res.Config.FrontEnd {
		t.Errorf("loaded preset differs from the fit:\n got %+v\nwant %+v", got, res.Config)
	}
	if cal := plan.Server.Sim.Calibration; cal == nil || cal.Error.HeldOut.TTFTP50 == nil || len(cal.Rows) != 0 {
		t.Errorf("the plan's calibration summary: %+v", cal)
	}
}

// TestRefusals checks the runs calibrate refuses, and why: one whose rows
// all failed, and a real server's run without a base preset.
func TestRefusals(t *testing.T) {
	base, _ := engine.LookupPreset("llama-3.1-8b-h100")
	dir := writeMeasuredRun(t, base.Config, "", []measuredRow{{id: "a", concurrency: 2, requests: 6, input: 64, output: 8}})
	if _, err := Run(dir, Options{MaxEvals: 4}); !errors.Is(err, ErrNeedBase) || !strings.Contains(err.Error(), "--base") {
		t.Errorf("no base: %v", err)
	}
	if _, err := Run(dir, Options{Base: "tiny-fast", MaxEvals: 4}); !errors.Is(err, ErrNeedBase) {
		t.Errorf("base tiny-fast: %v", err)
	}
	if _, err := Run(dir, Options{Base: "llama-3.1-8b-h100", HoldOut: []string{"nope"}, MaxEvals: 4}); !errors.Is(err, ErrUsage) {
		t.Errorf("unknown --hold-out row: %v", err)
	}

	// Every row failed: the summary says so.
	sum := metrics.Summary{Format: metrics.SummaryFormat, Rows: []metrics.RowSummary{{ID: "a", Base: "a", Status: metrics.RowFailed}}}
	d := &rundir.Dir{Path: dir}
	if err := d.WriteJSON(rundir.SummaryFile, sum); err != nil {
		t.Fatal(err)
	}
	_, err := Run(dir, Options{Base: "llama-3.1-8b-h100", MaxEvals: 4})
	if !errors.Is(err, ErrNoUsableRows) || !strings.Contains(err.Error(), "a: status failed") {
		t.Errorf("all rows failed: %v", err)
	}
}

// TestFitNoise checks that the spread of time to first token sets the
// request path's noise (latency_spread), which the medians do not show.
func TestFitNoise(t *testing.T) {
	base, _ := engine.LookupPreset("qwen3-0.6b-h200")
	hidden := base.Config
	hidden.FrontEnd.RequestLatency = 30 * time.Millisecond // a request path the tail can show on
	hidden.FrontEnd.LatencySpread = 0.5
	dir := writeMeasuredRun(t, hidden, "qwen3-0.6b-h200", []measuredRow{
		{id: "c=4", concurrency: 4, requests: 80, input: 256, output: 64},
		{id: "c=16", concurrency: 16, requests: 120, input: 256, output: 64},
	})
	r, err := readRun(dir, Options{MaxRequests: DefaultMaxRequests})
	if err != nil {
		t.Fatal(err)
	}
	start := base.Config
	start.FrontEnd.RequestLatency = hidden.FrontEnd.RequestLatency
	pr := &problem{rows: r.rows, semantics: r.manifest.Semantics, space: newSpace(start, fitted), seeds: []uint64{0}}
	changed := pr.fitNoise(make([]float64, len(fitted)))
	got := pr.space.base.FrontEnd.LatencySpread
	t.Logf("changed %v: latency_spread %.3f in %d replays", changed, got, pr.evals)
	if math.Abs(got-0.5) > 0.1 {
		t.Errorf("latency_spread %.3f, want 0.5 ± 0.1", got)
	}
}

// TestCacheCheck checks that a row whose server-reported prefix-cache hit
// ratio the replay does not reproduce is called out: its prompts shared
// more than the records say, and its fit deserves less trust.
func TestCacheCheck(t *testing.T) {
	base, _ := engine.LookupPreset("llama-3.1-8b-h100")
	dir := writeMeasuredRun(t, base.Config, "llama-3.1-8b-h100", []measuredRow{
		{id: "a", concurrency: 2, requests: 8, input: 256, output: 8},
		{id: "b", concurrency: 4, requests: 8, input: 256, output: 8},
	})
	d := &rundir.Dir{Path: dir}
	sum, err := d.Summary()
	if err != nil {
		t.Fatal(err)
	}
	sum.Rows[1].Cache = metrics.Cache{Requests: 8, PromptTokens: 2048, CachedTokens: 1024, HitRatio: 0.5}
	if err := d.WriteJSON(rundir.SummaryFile, sum); err != nil {
		t.Fatal(err)
	}
	res, err := Run(dir, Options{MaxEvals: 4, Seeds: 1, HoldOut: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	var cache []string
	for _, c := range res.Checks {
		if strings.Contains(c, "prefix cache") {
			cache = append(cache, c)
		}
	}
	if len(cache) != 1 || !strings.HasPrefix(cache[0], "b: the server found 50% of prompt tokens in its prefix cache, the replay 0%") {
		t.Errorf("checks: %q", res.Checks)
	}
}

// TestNoiseCheck checks that a row too short for its figures to settle is
// called out: the simulator's own draws of the noise disagree by more than
// a fit could be held to.
func TestNoiseCheck(t *testing.T) {
	// The published 8×H200 deployment: a quarter-second request path
	// with a heavy tail (σ 0.44) dominates its time to first token.
	base, _ := engine.LookupPreset("qwen3-0.6b-8xh200")
	dir := writeMeasuredRun(t, base.Config, base.Name, []measuredRow{{id: "short", concurrency: 1, requests: 3, input: 256, output: 8}})
	res, err := Run(dir, Options{MaxEvals: 4, Seeds: 1, HoldOut: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Checks) == 0 || !strings.HasPrefix(res.Checks[0], "short: TTFT p50 varies from ") {
		t.Errorf("checks: %q", res.Checks)
	}
}
