package schema

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/sim/engine"
)

// TestPresetEnumMatchesEngine keeps the format's preset list and the
// engine's presets in step: a preset added to one must appear in the other.
func TestPresetEnumMatchesEngine(t *testing.T) {
	var enum string
	eachKey(func(path, _ string, f fieldInfo) {
		if path == "server.sim.preset" {
			enum = f.field.Tag.Get("enum")
		}
	})
	got := strings.Split(enum, ",")
	want := append(engine.PresetNames(), PresetFixed)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("server.sim.preset enum %v, engine presets plus fixed %v", got, want)
	}
}

// TestSimOverrides checks that every engine and front-end key reaches the
// engine configuration, and that physics_only clears what it promises.
func TestSimOverrides(t *testing.T) {
	p := simPlan(t, `server:
  target: builtin
  sim:
    preset: qwen3-0.6b-h200
    replicas: 8
    max_model_len: 8192
    seed: 7
    engine: {max_num_seqs: 64, max_num_batched_tokens: 4096, gpu_memory_utilization: 0.5, prefix_caching: false,
             step_overhead: 1ms, seq_overhead: 0s, bandwidth_efficiency: 0.6, flops_efficiency: 0.4, jitter: 0}
    front_end: {request_latency: 0s, token_cost: 10us, token_cost_per_stream: 5ns}
rows: [{id: a, concurrency: 1, requests: 1, input_tokens: 8, output_tokens: 8}]
`)
	s := p.Server.Sim
	if s.Model != "Qwen/Qwen3-0.6B" {
		t.Errorf("served model %q, want the preset's", s.Model)
	}
	c, err := s.EngineConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.Replicas != 8 || c.MaxModelLen != 8192 || c.Seed != 7 || c.MaxNumSeqs != 64 || c.MaxNumBatchedTokens != 4096 ||
		c.GPUMemoryUtilization != 0.5 || c.PrefixCaching || c.StepOverhead != time.Millisecond || c.SeqOverhead != 0 ||
		c.Efficiency.Bandwidth != 0.6 || c.Efficiency.FLOPs != 0.4 || c.Jitter != 0 ||
		c.FrontEnd.RequestLatency != 0 || c.FrontEnd.TokenCost != 10*time.Microsecond || c.FrontEnd.TokenCostPerStream != 5 {
		t.Errorf("overrides not applied: %+v", c)
	}

	phys := simPlan(t, `server: {target: builtin, sim: {physics_only: true}}
rows: [{id: a, concurrency: 1, requests: 1, input_tokens: 8, output_tokens: 8}]
`)
	c, err = phys.Server.Sim.EngineConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.StepOverhead != 0 || c.SeqOverhead != 0 || c.Jitter != 0 || c.FrontEnd != (engine.FrontEnd{}) || c.Model.Name != "llama-3.1-8b" {
		t.Errorf("physics_only left %+v", c)
	}
}

// TestSimFixed checks the fixed preset's defaults, and that engine-only
// settings are refused with it rather than silently ignored.
func TestSimFixed(t *testing.T) {
	p := simPlan(t, `server: {target: builtin, sim: {preset: fixed}}
rows: [{id: a, concurrency: 1, requests: 1, input_tokens: 8, output_tokens: 8}]
`)
	s := p.Server.Sim
	if s.Model != DefaultSimModel || s.MaxModelLen != DefaultMaxModelLen || s.TTFT.D() != DefaultSimTTFT || s.ITL.D() != DefaultSimITL || s.Personality != "vllm" || s.TokensPerEvent != 1 {
		t.Errorf("fixed defaults: %+v", s)
	}
	_, err := Parse("test.yaml", []byte("apiVersion: infermatrix/v1\nname: t\n"+`server: {target: builtin, sim: {preset: fixed, replicas: 2, engine: {max_num_seqs: 4}}}
rows: [{id: a, concurrency: 1, requests: 1, input_tokens: 8, output_tokens: 8}]
`), Options{})
	if err == nil || !strings.Contains(err.Error(), "replicas has no effect with preset fixed") || !strings.Contains(err.Error(), "engine has no effect") {
		t.Errorf("engine settings with preset fixed: %v", err)
	}
	tgi := simPlan(t, `server: {target: builtin, sim: {preset: tiny-fast, personality: tgi}}
rows: [{id: a, concurrency: 1, requests: 1, input_tokens: 8, output_tokens: 8}]
`)
	if tgi.Server.Sim.TokensPerEvent != 1 {
		t.Errorf("tgi tokens per event %d, want 1: TGI sends one token per event", tgi.Server.Sim.TokensPerEvent)
	}
}

func simPlan(t *testing.T, body string) *Plan {
	t.Helper()
	p, err := Parse("test.yaml", []byte("apiVersion: infermatrix/v1\nname: t\n"+body), Options{})
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	return p
}
