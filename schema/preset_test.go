package schema

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writePresetCase writes a preset file and an experiment naming it into a
// temporary directory and loads the experiment.
func writePresetCase(t *testing.T, preset, experiment string) (*Plan, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fitted.yaml"), []byte(preset), 0o644); err != nil {
		t.Fatal(err)
	}
	exp := filepath.Join(dir, "exp.yaml")
	if err := os.WriteFile(exp, []byte("apiVersion: infermatrix/v1\nname: t\n"+experiment), 0o644); err != nil {
		t.Fatal(err)
	}
	return Load(exp, Options{})
}

const fittedPreset = `base: qwen3-0.6b-h200
engine: {step_overhead: 4ms, bandwidth_efficiency: 0.5}
front_end: {request_cost: 3ms, token_cost: 7us}
calibration:
  source: runs/real
  experiment: sweep
  base: qwen3-0.6b-h200
  date: "2026-11-27T18:00:00Z"
  tool: test
  fitted_rows: [a, b]
  held_out_rows: [c]
  error:
    held_out: {ttft_p50_pct: 4.5, tpot_p50_pct: 2, output_tok_s_pct: 3}
`

// TestPresetFileOverrides checks the precedence a user relies on: the
// file's base is the preset, its keys override the base, and the
// experiment's own keys override the file; the calibration reaches the
// plan for the record.
func TestPresetFileOverrides(t *testing.T) {
	p, err := writePresetCase(t, fittedPreset, `server:
  target: builtin
  sim:
    preset_file: fitted.yaml
    front_end: {token_cost: 9us}
rows: [{id: a, concurrency: 1, requests: 1, input_tokens: 8, output_tokens: 8}]
`)
	if err != nil {
		t.Fatal(err)
	}
	s := p.Server.Sim
	if s.Preset != "qwen3-0.6b-h200" {
		t.Errorf("preset %q, want the file's base", s.Preset)
	}
	c, err := s.EngineConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.StepOverhead != 4*time.Millisecond || c.Efficiency.Bandwidth != 0.5 || c.FrontEnd.RequestCost != 3*time.Millisecond {
		t.Errorf("the file's keys were not applied: t0 %v η_bw %v request_cost %v", c.StepOverhead, c.Efficiency.Bandwidth, c.FrontEnd.RequestCost)
	}
	if c.FrontEnd.TokenCost != 9*time.Microsecond {
		t.Errorf("token_cost %v: the experiment's 9µs must win over the file's 7µs", c.FrontEnd.TokenCost)
	}
	if c.SeqOverhead != 50*time.Microsecond || c.Efficiency.FLOPs != 0.5 {
		t.Errorf("keys neither sets must keep the base's: t_seq %v η_f %v", c.SeqOverhead, c.Efficiency.FLOPs)
	}
	cal := s.Calibration
	if cal == nil || cal.Source != "runs/real" || cal.File != "fitted.yaml" || cal.Error.HeldOut.TTFTP50 == nil || *cal.Error.HeldOut.TTFTP50 != 4.5 {
		t.Errorf("calibration not carried to the plan: %+v", cal)
	}

	// A variant may name its own preset file.
	p, err = writePresetCase(t, fittedPreset, `server:
  target: builtin
  variants: [{name: base}, {name: fitted, sim: {preset_file: fitted.yaml}}]
rows: [{id: a, concurrency: 1, requests: 1, input_tokens: 8, output_tokens: 8}]
`)
	if err != nil {
		t.Fatal(err)
	}
	if v := p.Server.Variants; v[0].Sim.Preset != DefaultSimPreset || v[1].Sim.Preset != "qwen3-0.6b-h200" || v[1].Sim.Calibration == nil {
		t.Errorf("variants: %q, %q (calibration %v)", v[0].Sim.Preset, v[1].Sim.Preset, v[1].Sim.Calibration)
	}
}

// TestPresetFileProblems checks that a bad preset file is refused at load
// time, every problem at once, at the experiment's preset_file line with the
// file's own position and a hint.
func TestPresetFileProblems(t *testing.T) {
	cases := []struct {
		name, preset, sim string
		want              []string
	}{
		{"unknown key and bad value", "base: qwen3-0.6b-h200\nengine:\n  step_overhed: 4ms\n  bandwidth_efficiency: 2\n", "preset_file: fitted.yaml",
			[]string{"exp.yaml:6:18: server.sim.preset_file: fitted.yaml:3:3: engine.step_overhed: unknown key", "step_overhead",
				"fitted.yaml:4:25: engine.bandwidth_efficiency:"}},
		{"unknown base", "base: gpt-5\n", "preset_file: fitted.yaml", []string{"fitted.yaml:1:7: base: unknown engine preset \"gpt-5\"", "hint: name a built-in engine preset"}},
		{"missing base", "engine: {jitter: 0}\n", "preset_file: fitted.yaml", []string{"missing required key \"base\""}},
		{"missing file", "base: tiny-fast\n", "preset_file: nope.yaml", []string{"exp.yaml:6:18: server.sim.preset_file: cannot read preset file \"nope.yaml\"", "infermatrix calibrate"}},
		{"once for variants that inherit it", "base: qwen3-0.6b-h200\nengine: {jitter: -1}\n", "preset_file: fitted.yaml\n  variants: [{name: a}, {name: b, sim: {seed: 2}}]",
			[]string{"exp.yaml:6:18: server.sim.preset_file: fitted.yaml:2:18: engine.jitter:"}},
		{"contradicting preset", "base: tiny-fast\n", "{preset: qwen3-0.6b-h200, preset_file: fitted.yaml}", []string{"preset qwen3-0.6b-h200 contradicts the preset file's base tiny-fast"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sim := "\n    " + tc.sim
			if strings.HasPrefix(tc.sim, "{") {
				sim = " " + tc.sim
			}
			_, err := writePresetCase(t, tc.preset, "server:\n  target: builtin\n  sim:"+sim+"\nrows: [{id: a, concurrency: 1, requests: 1, input_tokens: 8, output_tokens: 8}]\n")
			if err == nil {
				t.Fatal("loaded")
			}
			if _, ok := err.(Problems); !ok {
				t.Fatalf("not a Problems error: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("missing %q in:\n%v", w, err)
				}
			}
			if n := strings.Count(err.Error(), "fitted.yaml:"); n > 2 {
				t.Errorf("the file's problems are repeated (%d mentions):\n%v", n, err)
			}
		})
	}
}
