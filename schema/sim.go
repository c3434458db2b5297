package schema

import (
	"errors"
	"fmt"
	"time"

	"github.com/infermatrix/infermatrix/sim/engine"
)

// PresetFixed is the simulator setting without an engine: a constant TTFT
// and ITL per request, whatever the load.
const PresetFixed = "fixed"

// Defaults of the built-in server.
const (
	DefaultSimPreset    = "llama-3.1-8b-h100"
	DefaultSimModel     = "infermatrix-sim" // served by fixed and tiny-fast
	DefaultMaxModelLen  = 32768             // fixed's context limit
	DefaultSimTTFT      = 20 * time.Millisecond
	DefaultSimITL       = 5 * time.Millisecond
	DefaultSimPersona   = "vllm"
	defaultRetryAfter   = time.Second
	defaultSimReplicas  = 1
	defaultSlowHeaders  = time.Second
	defaultFaultAfter   = 0
	simEnginePresetHint = "remove it, or choose an engine preset (" + "llama-3.1-8b-h100, qwen3-0.6b-h200, qwen3-0.6b-8xh200, tiny-fast)"
)

// EngineConfig builds the engine a preset and its overrides describe. It is
// the one mapping from the experiment format to the simulator's model, used
// both to validate a plan and to start the server.
func (s SimSettings) EngineConfig() (engine.Config, error) {
	p, ok := engine.LookupPreset(s.Preset)
	if !ok {
		return engine.Config{}, fmt.Errorf("unknown engine preset %q", s.Preset)
	}
	c := p.Config
	if s.MaxModelLen > 0 {
		c.MaxModelLen = s.MaxModelLen
	}
	if s.Replicas > 0 {
		c.Replicas = s.Replicas
	}
	c.Seed = uint64(s.Seed)
	e := s.Engine
	if e.MaxNumSeqs > 0 {
		c.MaxNumSeqs = e.MaxNumSeqs
	}
	if e.MaxNumBatchedTokens > 0 {
		c.MaxNumBatchedTokens = e.MaxNumBatchedTokens
	}
	if e.GPUMemoryUtilization > 0 {
		c.GPUMemoryUtilization = e.GPUMemoryUtilization
	}
	if e.PrefixCaching != nil {
		c.PrefixCaching = *e.PrefixCaching
	}
	if e.StepOverhead != nil {
		c.StepOverhead = e.StepOverhead.D()
	}
	if e.SeqOverhead != nil {
		c.SeqOverhead = e.SeqOverhead.D()
	}
	if e.BandwidthEfficiency > 0 {
		c.Efficiency.Bandwidth = e.BandwidthEfficiency
	}
	if e.FLOPsEfficiency > 0 {
		c.Efficiency.FLOPs = e.FLOPsEfficiency
	}
	if e.AttentionEfficiency > 0 {
		c.Efficiency.Attention = e.AttentionEfficiency
	}
	if e.Jitter != nil {
		c.Jitter = *e.Jitter
	}
	if e.Drift != nil {
		c.Drift = *e.Drift
	}
	if e.DriftPeriod != nil {
		c.DriftPeriod = e.DriftPeriod.D()
	}
	fe := s.FrontEnd
	if fe.RequestLatency != nil {
		c.FrontEnd.RequestLatency = fe.RequestLatency.D()
	}
	if fe.RequestLatencyPerStream != nil {
		c.FrontEnd.RequestLatencyPerStream = fe.RequestLatencyPerStream.D()
	}
	if fe.RequestCost != nil {
		c.FrontEnd.RequestCost = fe.RequestCost.D()
	}
	if fe.RequestCostPerToken != nil {
		c.FrontEnd.RequestCostPerToken = fe.RequestCostPerToken.D()
	}
	if fe.LatencySpread != nil {
		c.FrontEnd.LatencySpread = *fe.LatencySpread
	}
	if fe.TokenCost != nil {
		c.FrontEnd.TokenCost = fe.TokenCost.D()
	}
	if fe.TokenCostPerStream != nil {
		c.FrontEnd.TokenCostPerStream = fe.TokenCostPerStream.D()
	}
	if s.PhysicsOnly {
		c = c.PhysicsOnly()
	}
	return c, c.Validate()
}

// resolveSim fills the built-in server's defaults from its preset and
// reports settings that contradict it.
func (r *resolver) resolveSim(s *SimSettings) {
	if s.PresetFile != "" {
		r.presetFile(s)
	}
	if s.Preset == "" {
		s.Preset = DefaultSimPreset
	}
	if s.Personality == "" {
		s.Personality = DefaultSimPersona
	}
	if s.TokensPerEvent == 0 {
		s.TokensPerEvent = 1
	}
	r.resolveFaults(s.Faults)
	if s.Preset == PresetFixed {
		r.resolveFixed(s)
		return
	}
	for _, set := range []struct {
		key string
		on  bool
	}{{"ttft", s.TTFT != 0}, {"itl", s.ITL != 0}} {
		if set.on {
			r.problem("server.sim."+set.key, "remove it: the engine preset decides latencies; or set preset: fixed for a constant "+set.key,
				"%s applies to preset fixed only, and preset %s models its own latencies", set.key, s.Preset)
		}
	}
	p, ok := engine.LookupPreset(s.Preset)
	if !ok {
		return // the enum check has reported it
	}
	if s.Model == "" {
		s.Model = p.ServedModel
	}
	if s.MaxModelLen == 0 {
		s.MaxModelLen = p.Config.MaxModelLen
	}
	if s.Replicas == 0 {
		// The preset's deployment: one engine, or the eight of the
		// table qwen3-0.6b-8xh200 was fitted to.
		s.Replicas = max(p.Config.Replicas, defaultSimReplicas)
	}
	if _, err := s.EngineConfig(); err != nil {
		for _, e := range unjoin(err) {
			r.problem("server.sim", "adjust server.sim.engine or max_model_len; docs/simulator.md lists each preset's values", "%v", e)
		}
	}
}

func (r *resolver) resolveFixed(s *SimSettings) {
	if s.Model == "" {
		s.Model = DefaultSimModel
	}
	if s.MaxModelLen == 0 {
		s.MaxModelLen = DefaultMaxModelLen
	}
	if s.TTFT == 0 {
		s.TTFT = Duration(DefaultSimTTFT)
	}
	if s.ITL == 0 {
		s.ITL = Duration(DefaultSimITL)
	}
	engineOnly := []struct {
		key string
		on  bool
	}{
		{"replicas", s.Replicas > 1},
		{"physics_only", s.PhysicsOnly},
		{"engine", s.Engine != (SimEngine{})},
		{"front_end", s.FrontEnd != (SimFrontEnd{})},
	}
	for _, k := range engineOnly {
		if k.on {
			r.problem("server.sim."+k.key, simEnginePresetHint, "%s has no effect with preset fixed, which has no engine", k.key)
		}
	}
	if s.Replicas == 0 {
		s.Replicas = defaultSimReplicas
	}
}

func (r *resolver) resolveFaults(faults []SimFault) {
	sum := 0.0
	for i := range faults {
		f := &faults[i]
		sum += f.Probability
		path := fmt.Sprintf("server.sim.faults[%d]", i)
		switch f.Kind {
		case "429":
			if f.RetryAfter == 0 {
				f.RetryAfter = Duration(defaultRetryAfter)
			}
		case "slow_headers":
			if f.For == 0 {
				f.For = Duration(defaultSlowHeaders)
			}
		}
		if f.After != defaultFaultAfter && f.Kind != "error_event" && f.Kind != "truncate" && f.Kind != "reset" && f.Kind != "stall" {
			r.problem(path+".after", "remove it: only error_event, truncate, reset and stall happen mid-stream", "after has no effect on a %s fault", f.Kind)
		}
	}
	if sum > 1+1e-9 {
		r.problem("server.sim.faults", "lower the probabilities: each request gets at most one fault", "fault probabilities sum to %g, more than 1", sum)
	}
}

// unjoin splits an errors.Join result into its parts, so that each becomes
// its own problem line.
func unjoin(err error) []error {
	var j interface{ Unwrap() []error }
	if errors.As(err, &j) {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}

// Unloaded returns the built-in server's time to first token and time per
// output token for one request alone: the fixed preset's settings, or the
// engine's unloaded figures. Plans estimate durations with it.
func (s SimSettings) Unloaded(prompt, output int) (ttft, tpot time.Duration, err error) {
	if s.Preset == PresetFixed {
		return s.TTFT.D(), s.ITL.D(), nil
	}
	c, err := s.EngineConfig()
	if err != nil {
		return 0, 0, err
	}
	return engine.Unloaded(c, prompt, output)
}
