// Package calibrate fits the built-in server's engine and front-end
// parameters to a measured run, so that the simulator becomes a twin of the
// server that was measured: `infermatrix calibrate RUN_DIR -o preset.yaml`.
//
// It reads the run's rows (their planned load, the server-reported token
// counts of every request, their summaries' TTFT p50, TPOT p50 and output
// tokens/s), replays each row on the engine's virtual clock with its own
// load pattern and its own requests' lengths, and moves the parameters
// (step and per-sequence overheads, bandwidth, FLOP and attention
// efficiencies, the front end's request and token costs) to minimise the
// squared log errors of the three figures, with a derivative-free
// optimiser. Some rows are held out of the fit, and the fit's error on
// them is the honest measure of the preset. The result is a preset file
// that server.sim.preset_file reads (schema.PresetFile), with a
// calibration block saying all of this.
//
// calibrate imports neither runner nor reports: it reads the run directory
// and drives sim/engine directly.
package calibrate

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/sim/engine"
)

// Options adjust a calibration.
type Options struct {
	// Base is the built-in preset to start from. Empty: the run's own
	// preset, when the built-in server served it; a run of a real server
	// needs one (ErrNeedBase).
	Base string
	// HoldOut names the rows to hold out of the fit. Nil holds out every
	// third row by load within each load mode (the second of each three,
	// never the lowest or highest load, so held-out rows lie between
	// fitted ones), at least one when there are two rows or more; an empty
	// non-nil slice holds out none.
	HoldOut []string
	// Variant picks the rows of one server variant in a run with
	// server.variants; empty takes the rows without a variant.
	Variant string
	// MaxRequests bounds the requests replayed per row (the first ones in
	// dispatch order; at most 200,000 output tokens in any case), so that
	// a fit takes seconds: 0 means DefaultMaxRequests. A row cut short
	// no longer leaves the engine as the run's row did, so a built-in
	// run's later rows are no longer replayed draw for draw.
	MaxRequests int
	// MaxEvals bounds the objective's evaluations (each replays every
	// fitted row); 0 means DefaultMaxEvals.
	MaxEvals int
	// Seeds is how many noise draws each row is replayed with, its
	// figures the mean over them; 0 means DefaultSeeds.
	Seeds int
	// Now and Tool stamp the calibration block.
	Now  time.Time
	Tool string
}

// Defaults of Options.
const (
	DefaultMaxRequests = 2000
	DefaultMaxEvals    = 400
	DefaultSeeds       = 3
)

// ErrNeedBase is returned (wrapped) when the run was not served by the
// built-in server and no base preset was given: the fit needs a model and
// a GPU to start from.
var ErrNeedBase = errors.New("a base preset is needed")

// Result is a finished calibration.
type Result struct {
	Preset schema.PresetFile
	// Config is the fitted engine configuration, the base with the
	// preset file's keys applied.
	Config engine.Config
	// Skipped lists the rows the fit could not use, "row: why".
	Skipped []string
	// Checks are what the run's own telemetry says against the replay:
	// rows whose server-reported prefix-cache hit ratio the replay does
	// not reproduce, whose figures then deserve less trust.
	Checks []string
	// Evals is how many times the rows were replayed.
	Evals int
	// Replicas is the run's replica count when the built-in server
	// served it with a count other than the base preset's: the preset
	// file cannot hold it, so the experiment must set
	// server.sim.replicas.
	Replicas int
}

// Run calibrates a preset to the run in dir.
func Run(dir string, opts Options) (*Result, error) {
	if opts.MaxRequests == 0 {
		opts.MaxRequests = DefaultMaxRequests
	}
	if opts.MaxEvals == 0 {
		opts.MaxEvals = DefaultMaxEvals
	}
	if opts.Seeds == 0 {
		opts.Seeds = DefaultSeeds
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	r, err := readRun(dir, opts)
	if err != nil {
		return nil, err
	}
	baseName := opts.Base
	replicas := 0
	if sim := r.simulated; sim != nil && sim.Preset != "" && sim.Preset != schema.PresetFixed {
		if baseName == "" {
			baseName = sim.Preset
		}
		replicas = sim.Replicas
	}
	if baseName == "" {
		return nil, fmt.Errorf("%w: %s was not served by an engine preset of the built-in server; give --base, one of %s",
			ErrNeedBase, dir, strings.Join(engine.PresetNames(), ", "))
	}
	preset, ok := engine.LookupPreset(baseName)
	if !ok {
		return nil, fmt.Errorf("%w: unknown base preset %q; have %s", ErrNeedBase, baseName, strings.Join(engine.PresetNames(), ", "))
	}
	base := preset.Config
	if base.Instant {
		return nil, fmt.Errorf("%w: base preset %s takes no time at all, so it has nothing to fit; give --base with a model", ErrNeedBase, preset.Name)
	}
	if replicas > 0 {
		base.Replicas = replicas
	}
	if sim := r.simulated; sim != nil && sim.MaxModelLen > 0 {
		base.MaxModelLen = sim.MaxModelLen
	}
	if err := holdOut(r.rows, opts.HoldOut); err != nil {
		return nil, err
	}
	fitN := 0
	for _, rw := range r.rows {
		if !rw.heldOut {
			fitN++
		}
	}
	if fitN == 0 {
		return nil, fmt.Errorf("%w: every usable row is held out; hold out fewer", ErrNoUsableRows)
	}

	sp := newSpace(base, fitted)
	// Rows are replayed with several seeds and fitted to the mean of
	// their figures, which is smooth enough for the search to follow: a
	// single draw's time to first token jumps as users' requests bunch up
	// one way or another. The first seed is the run's own. A run of the
	// built-in server on its virtual clock then gets a last simplex on
	// that seed alone: rows replayed in order on one engine draw the
	// noise the run drew, so near the run's parameters the fit can match
	// it draw for draw. The noise of a real server, or of the built-in one
	// in real time (whose steps land where the wall clock lets them),
	// cannot be replayed; its fit stays on the mean.
	runSeed := uint64(r.manifest.Server.Declared.Sim.Seed)
	seeds := make([]uint64, opts.Seeds)
	for i := range seeds {
		seeds[i] = runSeed + uint64(i)
	}
	pr := &problem{rows: r.order, semantics: r.manifest.Semantics, space: sp, prior: 1e-4, seeds: seeds, weights: allMetrics}
	x := make([]float64, len(fitted))
	// A coordinate search first makes the large moves of single
	// parameters (a front end ten times slower than the base's); a
	// simplex then adjusts them together.
	fx := pr.cost(x)
	x, _ = coordinateSearch(pr.cost, x, fx, 2, 0.25, sp, opts.MaxEvals/4)
	x, _ = nelderMead(pr.cost, x, 0.5, sp, opts.MaxEvals/4, 1e-6)
	// The noise moves the medians a little (a mean-one log-normal's
	// median is below one), so a simplex runs after it.
	pr.fitNoise(x)
	x, _ = nelderMead(pr.cost, x, 0.2, sp, max(opts.MaxEvals*5/8-pr.evals, 20), 1e-6)
	if r.simulated != nil && r.manifest.Virtual && len(seeds) > 1 {
		// The run's own draw of the noise: what a run of the preset with
		// the same seed will give, and what the calibration reports.
		seeds = seeds[:1]
		one := &problem{rows: pr.rows, semantics: pr.semantics, space: sp, prior: pr.prior, seeds: seeds, weights: allMetrics}
		x, _ = nelderMead(one.cost, x, 0.1, sp, max(opts.MaxEvals-pr.evals, 20), 1e-6)
		pr.evals += one.evals
	}
	res := &Result{Skipped: r.skipped, Evals: pr.evals}
	if replicas > 0 && replicas != preset.Config.Replicas {
		res.Replicas = replicas
	}
	res.Preset = schema.PresetFile{Base: preset.Name}
	writeParams(&res.Preset, sp, x)
	// The figures are those of the preset as a run will read it, rounded
	// values and all: the file's keys over the base, as
	// server.sim.preset_file applies them.
	cfg, err := schema.SimSettings{Preset: preset.Name, Replicas: base.Replicas, MaxModelLen: base.MaxModelLen,
		Engine: res.Preset.Engine, FrontEnd: res.Preset.FrontEnd}.EngineConfig()
	if err != nil {
		return nil, fmt.Errorf("the fitted preset does not validate: %w", err)
	}
	res.Config = cfg
	res.Preset.Calibration, res.Checks = calibration(r, dir, preset.Name, cfg, seeds, opts)
	return res, nil
}

// holdOut marks the held-out rows: the ones named, or by default the
// second of every three by load.
func holdOut(rows []*row, names []string) error {
	if names != nil {
		var unknown []string
		for _, n := range names {
			found := false
			for _, rw := range rows {
				if rw.plan.ID == n {
					rw.heldOut, found = true, true
				}
			}
			if !found {
				unknown = append(unknown, n)
			}
		}
		if len(unknown) > 0 {
			var ids []string
			for _, rw := range rows {
				ids = append(ids, rw.plan.ID)
			}
			return fmt.Errorf("%w: --hold-out names %s, not a usable row of the run (usable: %s)", ErrUsage, strings.Join(unknown, ", "), strings.Join(ids, ", "))
		}
		return nil
	}
	// Rows come sorted by load mode, then load. Within each mode, hold
	// out every third row from the second on, never the first or the
	// last: a held-out row between fitted ones tests the fit, one beyond
	// them tests an extrapolation it was never meant for (a front end
	// that saturates only past the fitted loads).
	held := 0
	for start := 0; start < len(rows); {
		end := start
		for end < len(rows) && rows[end].plan.Load.Mode == rows[start].plan.Load.Mode {
			end++
		}
		for i := start + 1; i < end-1; i += 3 {
			rows[i].heldOut = true
			held++
		}
		start = end
	}
	if held == 0 && len(rows) >= 2 {
		// No mode has three rows: hold out the second row, the one
		// test there is.
		rows[1].heldOut = true
	}
	return nil
}

// ErrUsage marks a calibration refused for how it was asked.
var ErrUsage = errors.New("usage")

// writeParams puts the fitted values into the preset file's keys, rounded
// to what a reader can check: durations to 0.1 µs, efficiencies to four
// digits.
func writeParams(pf *schema.PresetFile, sp *space, x []float64) {
	cfg := sp.config(x)
	spread := cfg.FrontEnd.LatencySpread
	pf.FrontEnd.LatencySpread = &spread
	for _, p := range sp.params {
		v := p.get(&cfg)
		section, key, _ := strings.Cut(p.key, ".")
		if p.duration {
			d := schema.Duration(time.Duration(math.Round(v*1e7)) * 100)
			dp := &d
			switch section + "." + key {
			case "engine.step_overhead":
				pf.Engine.StepOverhead = dp
			case "engine.seq_overhead":
				pf.Engine.SeqOverhead = dp
			case "front_end.request_latency":
				pf.FrontEnd.RequestLatency = dp
			case "front_end.request_cost":
				pf.FrontEnd.RequestCost = dp
			case "front_end.request_cost_per_token":
				pf.FrontEnd.RequestCostPerToken = dp
			case "front_end.token_cost":
				pf.FrontEnd.TokenCost = dp
			}
			continue
		}
		e := math.Round(v*1e4) / 1e4
		e = min(max(e, 1e-4), 1)
		switch key {
		case "bandwidth_efficiency":
			pf.Engine.BandwidthEfficiency = e
		case "flops_efficiency":
			pf.Engine.FLOPsEfficiency = e
		case "attention_efficiency":
			pf.Engine.AttentionEfficiency = e
		}
	}
}

// calibration replays every row, fitted and held out, on the fitted
// configuration as the preset file writes it, and reports the errors.
func calibration(r *run, dir, base string, cfg engine.Config, seeds []uint64, opts Options) (*schema.Calibration, []string) {
	c := &schema.Calibration{
		Source: dir, Experiment: r.manifest.Experiment.Name, ExperimentSHA256: r.manifest.Experiment.SHA256,
		Base: base, Date: opts.Now.UTC().Format(time.RFC3339), Tool: opts.Tool,
	}
	if r.simulated != nil {
		c.Replicas = cfg.Replicas
	}
	simOf := map[*row]simulated{}
	for i, s := range simulateAll(cfg, r.order, r.manifest.Semantics, seeds) {
		simOf[r.order[i]] = s
	}
	var checks []string
	// How far one draw of the noise is from another, per row and
	// metric: a fit cannot be held to less than that, and a reader should
	// know where it is large (short rows, a heavy request-path tail).
	spreadSeeds := seeds
	if len(spreadSeeds) < 3 {
		spreadSeeds = []uint64{seeds[0], seeds[0] + 1, seeds[0] + 2}
	}
	draws := make([][]simulated, len(spreadSeeds))
	for k, seed := range spreadSeeds {
		draws[k] = simulateAll(cfg, r.order, r.manifest.Semantics, []uint64{seed})
	}
	for i, rw := range r.order {
		for m := range numMetrics {
			lo, hi := math.Inf(1), math.Inf(-1)
			for k := range draws {
				if v := draws[k][i].get(m); v != nil {
					lo, hi = min(lo, *v), max(hi, *v)
				}
			}
			if lo > 0 && !math.IsInf(hi, 0) && hi/lo > 1.2 {
				checks = append(checks, fmt.Sprintf("%s: %s varies from %.4g to %.4g between %d draws of the simulator's noise: errors there within ±%.0f%% are noise, not misfit; longer rows narrow it",
					rw.plan.ID, metricNames[m], lo, hi, len(draws), 100*(hi-lo)/(hi+lo)))
			}
		}
	}
	for _, rw := range r.rows {
		sim := simOf[rw]
		if rw.cacheHit != nil && sim.cacheHit != nil && math.Abs(*rw.cacheHit-*sim.cacheHit) > 0.05 {
			checks = append(checks, fmt.Sprintf("%s: the server found %.0f%% of prompt tokens in its prefix cache, the replay %.0f%%: its prompts shared what the records do not say, and its TTFT fit is less trustworthy",
				rw.plan.ID, 100**rw.cacheHit, 100**sim.cacheHit))
		}
	}
	var fitErr, holdErr [numMetrics]*float64
	for _, rw := range r.rows {
		sim := simOf[rw]
		if rw.heldOut {
			c.HeldOutRows = append(c.HeldOutRows, rw.plan.ID)
		} else {
			c.FittedRows = append(c.FittedRows, rw.plan.ID)
		}
		cr := schema.CalibrationRow{ID: rw.plan.ID, HeldOut: rw.heldOut}
		cells := [numMetrics]*schema.CalibrationCell{&cr.TTFTP50, &cr.TPOTP50, &cr.OutputTPS}
		for m := range numMetrics {
			cell := cells[m]
			cell.Measured = round(rw.measured.get(m), 4)
			cell.Simulated = round(sim.get(m), 4)
			if mv, sv := rw.measured.get(m), sim.get(m); mv != nil && sv != nil && *mv > 0 {
				e := 100 * (*sv - *mv) / *mv
				cell.ErrorPct = round(&e, 2)
				worst := &fitErr[m]
				if rw.heldOut {
					worst = &holdErr[m]
				}
				if *worst == nil || math.Abs(e) > **worst {
					*worst = ptr(math.Abs(e))
				}
			}
		}
		c.Rows = append(c.Rows, cr)
	}
	set := func(dst *schema.CalibrationErrors, src [numMetrics]*float64) {
		dst.TTFTP50, dst.TPOTP50, dst.OutputTPS = round(src[metricTTFT], 2), round(src[metricTPOT], 2), round(src[metricOutputTPS], 2)
	}
	set(&c.Error.Fitted, fitErr)
	set(&c.Error.HeldOut, holdErr)
	return c, checks
}

// round rounds to the given significant digits after the point, keeping
// nil as nil.
func round(v *float64, digits int) *float64 {
	if v == nil {
		return nil
	}
	p := math.Pow(10, float64(digits))
	r := math.Round(*v*p) / p
	return &r
}
