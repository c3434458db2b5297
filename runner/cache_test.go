package runner

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/sim"
	"github.com/infermatrix/infermatrix/validity"
)

// TestRowsDoNotMeasureEachOthersCache replays the bug that made a sweep's
// TTFT fall as its load rose: three identical rows, then the same
// experiment run again, against one server with a prefix cache that keeps
// everything. Every prompt is unique to its request, row and run, so no
// row finds another's text in the cache: each row's hit ratio is nil and
// it is valid. The same with unique_prompts per_experiment on the second
// run sends byte-identical prompts, the server answers them from its
// cache, and the cache check makes every row invalid.
func TestRowsDoNotMeasureEachOthersCache(t *testing.T) {
	inst := startPreset(t, "tiny-fast")
	run := func(mode string) []validity.Verdict {
		t.Helper()
		dir := t.TempDir()
		p := planIn(t, dir, `server: {urls: [`+inst.BaseURL+`]}
defaults: {requests: 12, concurrency: 2, input_tokens: 600, output_tokens: 4, body: {ignore_eos: true}, unique_prompts: `+mode+`}
rows: [{id: a}, {id: b}, {id: c}]
validity: {ignore: [samples, steady_state, load, client_stall, simulator, bursts, client_cpu]}
`, nil)
		res, err := Run(context.Background(), p, Options{Out: filepath.Join(dir, "run")})
		if err != nil {
			t.Fatal(err)
		}
		var out []validity.Verdict
		for i := range res.Summary.Rows {
			rs := &res.Summary.Rows[i]
			if !rs.Cache.Known() || rs.Cache.Requests != 12 {
				t.Fatalf("row %s: cache %+v; want the server's count on every request", rs.ID, rs.Cache)
			}
			out = append(out, validity.Row(validity.Input{Row: p.Row(rs.ID), Summary: rs, Config: p.Validity}))
			t.Logf("%s row %s: hit ratio %.3f, unexpected %.3f", mode, rs.ID, rs.Cache.HitRatio, rs.Cache.UnexpectedRatio)
			if mode == schema.UniquePerRun && rs.Cache.HitRatio > 0.05 {
				t.Errorf("row %s: %.1f%% of prompt tokens from the cache; want none", rs.ID, 100*rs.Cache.HitRatio)
			}
		}
		return out
	}
	for _, v := range run(schema.UniquePerRun) {
		if !v.Valid {
			t.Errorf("first run: %+v", v.Reasons)
		}
	}
	for _, v := range run(schema.UniquePerRun) {
		if !v.Valid {
			t.Errorf("a rerun with fresh prompts: %+v", v.Reasons)
		}
	}
	run(schema.UniquePerExperiment)
	for _, v := range run(schema.UniquePerExperiment) {
		if v.Valid || v.Reasons[0].Check != validity.Cache {
			t.Errorf("a rerun of byte-identical prompts: %+v; want invalid by cache contamination", v)
		}
	}
}

// startPreset serves a simulator preset on loopback for the test.
func startPreset(t *testing.T, preset string) *sim.Instance {
	t.Helper()
	cfg, err := BuiltinConfig(schema.SimSettings{Preset: preset})
	if err != nil {
		t.Fatal(err)
	}
	inst, err := sim.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Close() })
	return inst
}
