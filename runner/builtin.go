package runner

import (
	"bytes"
	"fmt"
	"os"
	"sync"

	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/sim"
	"github.com/infermatrix/infermatrix/sim/engine"
)

// BuiltinConfig maps the experiment format's server.sim settings to the
// simulated server's configuration. Both `infermatrix run` (target builtin)
// and `infermatrix sim` go through it, so a flag and a YAML key mean the
// same thing. Settings straight from a validated plan pass through
// unchanged; settings built from flags get the plan's defaults here.
func BuiltinConfig(s schema.SimSettings) (sim.Config, error) {
	if s.Preset == "" {
		s.Preset = schema.DefaultSimPreset
	}
	cfg := sim.Config{
		Model:          s.Model,
		MaxModelLen:    s.MaxModelLen,
		Seed:           s.Seed,
		Personality:    s.Personality,
		TokensPerEvent: s.TokensPerEvent,
		EOSMeanTokens:  s.EOSMeanTokens,
	}
	for _, f := range s.Faults {
		cfg.Faults = append(cfg.Faults, sim.FaultRule{
			Kind: sim.FaultKind(f.Kind), Probability: f.Probability,
			After: f.After, For: f.For.D(), RetryAfter: f.RetryAfter.D(),
		})
	}
	if s.Preset == schema.PresetFixed {
		if cfg.Model == "" {
			cfg.Model = schema.DefaultSimModel
		}
		cfg.TTFT, cfg.ITL = s.TTFT.D(), s.ITL.D()
		return cfg, nil
	}
	p, ok := engine.LookupPreset(s.Preset)
	if !ok {
		return sim.Config{}, fmt.Errorf("unknown simulator preset %q (have %v and %s)", s.Preset, engine.PresetNames(), schema.PresetFixed)
	}
	if cfg.Model == "" {
		cfg.Model = p.ServedModel
	}
	ec, err := s.EngineConfig()
	if err != nil {
		return sim.Config{}, fmt.Errorf("simulator preset %s: %w", s.Preset, err)
	}
	cfg.Engine = &ec
	cfg.MaxModelLen = ec.MaxModelLen
	return cfg, nil
}

// truthSink receives the built-in server's ground-truth log. The server
// starts before the run directory exists (the run directory is created
// only once the server answered), so lines written before attach are
// buffered; in practice there are none, since discovery generates nothing.
type truthSink struct {
	mu  sync.Mutex
	f   *os.File
	buf bytes.Buffer
	err error
	// row, when set, also gets every line: the row running now checks its
	// stamps against them.
	row *truthCollector
}

// collect starts collecting lines for a new row, and returns its
// collector.
func (t *truthSink) collect() *truthCollector {
	c := &truthCollector{lines: map[string]truthLine{}}
	t.mu.Lock()
	t.row = c
	t.mu.Unlock()
	return c
}

func (t *truthSink) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.row != nil {
		t.row.line(p) // each Write is one line (sim's truthWriter)
	}
	if t.f == nil {
		return t.buf.Write(p)
	}
	n, err := t.f.Write(p)
	if err != nil && t.err == nil {
		t.err = err
	}
	return n, err
}

// attach opens the file lines go to from now on, writing what was buffered.
func (t *truthSink) attach(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("ground truth: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := f.Write(t.buf.Bytes()); err != nil {
		_ = f.Close()
		return fmt.Errorf("ground truth: %w", err)
	}
	t.buf.Reset()
	t.f = f
	return nil
}

// Close closes the file. The server must be closed first (deferred
// closes run in reverse, and the sink is created before the server).
func (t *truthSink) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.f == nil {
		return nil
	}
	err := t.f.Close()
	t.f = nil
	return err
}
