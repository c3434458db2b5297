package calibrate

import (
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/infermatrix/infermatrix/sim/engine"
)

// param is one fitted parameter of the engine configuration. The optimiser
// works on x = ln(value ÷ ref), so that a step means the same relative
// change for a 2 µs cost as for a 2 ms one, and positive quantities stay
// positive.
type param struct {
	// key is the parameter's key in the preset file, section.key.
	key string
	get func(*engine.Config) float64
	set func(*engine.Config, float64)
	// typical is the scale used when the base preset has the parameter at
	// zero (a front end without a request cost, say): the search starts
	// there, and the fit writes zero when it ends far below it.
	typical float64
	// hi bounds the value (an efficiency is at most 1); 0 means 100 ×
	// the reference.
	hi float64
	// duration says the value is in seconds and written as a duration.
	duration bool
}

func durParam(key string, typical time.Duration, get func(*engine.Config) *time.Duration) param {
	return param{key: key, typical: typical.Seconds(), duration: true,
		get: func(c *engine.Config) float64 { return get(c).Seconds() },
		set: func(c *engine.Config, v float64) { *get(c) = time.Duration(math.Round(v * 1e9)) },
	}
}

func effParam(key string, get func(*engine.Config) *float64) param {
	return param{key: key, typical: 0.5, hi: 1,
		get: func(c *engine.Config) float64 { return *get(c) },
		set: func(c *engine.Config, v float64) { *get(c) = v },
	}
}

// fitted are the parameters the fit moves: the engine's step costs and
// efficiencies and the front end's costs, the ones that set time to first
// token, time per output token and throughput. Scheduler limits, memory
// and the model stay the base preset's: they are the deployment's facts,
// not fits.
var fitted = []param{
	durParam("engine.step_overhead", 500*time.Microsecond, func(c *engine.Config) *time.Duration { return &c.StepOverhead }),
	durParam("engine.seq_overhead", 20*time.Microsecond, func(c *engine.Config) *time.Duration { return &c.SeqOverhead }),
	effParam("engine.bandwidth_efficiency", func(c *engine.Config) *float64 { return &c.Efficiency.Bandwidth }),
	effParam("engine.flops_efficiency", func(c *engine.Config) *float64 { return &c.Efficiency.FLOPs }),
	effParam("engine.attention_efficiency", func(c *engine.Config) *float64 { return &c.Efficiency.Attention }),
	durParam("front_end.request_cost", 200*time.Microsecond, func(c *engine.Config) *time.Duration { return &c.FrontEnd.RequestCost }),
	durParam("front_end.request_cost_per_token", time.Microsecond, func(c *engine.Config) *time.Duration { return &c.FrontEnd.RequestCostPerToken }),
	durParam("front_end.token_cost", 20*time.Microsecond, func(c *engine.Config) *time.Duration { return &c.FrontEnd.TokenCost }),
}

// space maps the optimiser's vector to configurations around a base.
type space struct {
	base   engine.Config
	params []param
	ref    []float64 // value at x = 0
	lo, hi []float64 // bounds on x
}

// floorRatio is how far below its reference a parameter may go: a
// thousandth, below which it is written as zero.
const floorRatio = 1e-3

func newSpace(base engine.Config, params []param) *space {
	s := &space{base: base, params: params}
	for _, p := range params {
		ref := p.get(&base)
		if p.key == "engine.attention_efficiency" && ref == 0 {
			ref = base.Efficiency.FLOPs // unset means η_f
		}
		if ref <= 0 {
			ref = p.typical
		}
		hi := 100 * ref
		if p.hi > 0 {
			hi = p.hi
		}
		s.ref = append(s.ref, ref)
		s.lo = append(s.lo, math.Log(floorRatio))
		s.hi = append(s.hi, math.Log(hi/ref))
	}
	return s
}

func (s *space) clamp(x []float64) {
	for i := range x {
		x[i] = min(max(x[i], s.lo[i]), s.hi[i])
	}
}

// config is the base with the parameters at x.
func (s *space) config(x []float64) engine.Config {
	c := s.base
	for i, p := range s.params {
		v := s.ref[i] * math.Exp(x[i])
		if x[i] <= s.lo[i]+1e-9 {
			v = 0 // at the floor: the parameter is not needed
			if p.hi > 0 {
				v = s.ref[i] * floorRatio // an efficiency cannot be zero
			}
		}
		p.set(&c, v)
	}
	return c
}

// problem is one fit: the rows, and the measured figures to match.
type problem struct {
	// rows are every usable row in the run's order, held-out ones
	// included: they are replayed (they moved the server's state between
	// the fitted rows) but not scored.
	rows      []*row
	semantics string
	space     *space
	// prior weighs each parameter's distance from its reference (in
	// ln units squared) against the rows' squared log errors: small
	// enough not to bias a parameter the rows determine, large enough to
	// keep one they do not (attention efficiency in a decode-bound run)
	// at the base preset's value instead of wandering.
	prior float64
	// seeds are the engine seeds each row is replayed with
	// (simulateAll).
	seeds []uint64
	// weights weigh the metrics' errors: a stage of the fit that moves
	// the engine's parameters looks at time per output token alone.
	weights [numMetrics]float64
	evals   int
}

// cost is the sum over rows and metrics of the squared log error, plus the
// prior. A row whose replay did not finish costs as if every figure were
// off by the share left undone, so the optimiser climbs out of a
// configuration too slow to finish.
func (pr *problem) cost(x []float64) float64 {
	pr.evals++
	cfg := pr.space.config(x)
	sims := simulateAll(cfg, pr.rows, pr.semantics, pr.seeds)
	total := 0.0
	for i, rw := range pr.rows {
		if !rw.heldOut {
			total += rowCost(rw.measured, sims[i], pr.weights)
		}
	}
	for i := range x {
		total += pr.prior * x[i] * x[i]
	}
	return total
}

// robustScale is the log error (about 10%) beyond which a row's time to
// first token misfit counts less than its square: robust is the Cauchy
// loss, e² for small
// errors, growing only logarithmically past the scale. One row whose time
// to first token is an outlier of its draw of the noise (the users'
// requests bunched up) would otherwise pull every parameter towards it and
// spoil the rows that fit.
const robustScale = 0.1

func robust(e float64) float64 {
	return robustScale * robustScale * math.Log1p(e*e/(robustScale*robustScale))
}

// missingCost stands for a figure the replay could not produce: as bad as
// a factor of e off.
const missingCost = 1.0

func rowCost(meas figures, sim simulated, weights [numMetrics]float64) float64 {
	total := 0.0
	for m := range numMetrics {
		mv := meas.get(m)
		if mv == nil || weights[m] == 0 {
			continue
		}
		sv := sim.get(m)
		if sv == nil || *sv <= 0 {
			total += missingCost
			continue
		}
		e := math.Log(*sv / *mv)
		if m == metricTTFT {
			// Only time to first token has the noise the robust loss
			// is for; a decode speed or a throughput 10% off is a
			// misfit, and counts in full.
			total += weights[m] * robust(e)
		} else {
			total += weights[m] * e * e
		}
	}
	if sim.done < 1 {
		total += missingCost * (1 - sim.done) * numMetrics
	}
	return total
}

// simulateAll replays rows (in the run's order) on cfg once per seed,
// each seed's replay one engine serving the rows one after another
// (replayRun), the seeds in parallel, and gives each row the geometric mean
// of its figures over the seeds. Under load a closed loop's time to first
// token depends on how the users' requests happen to bunch up, and one
// draw of the noise can put a p50 15% from another's; for a real server,
// whose draws cannot be replayed, fitting to the mean over seeds fits the
// parameters rather than one draw of the noise.
func simulateAll(cfg engine.Config, rows []*row, semantics string, seeds []uint64) []simulated {
	per := make([][]simulated, len(seeds))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for k, seed := range seeds {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c := cfg
			c.Seed = seed
			recs, done := replayRun(c, rows)
			per[k] = make([]simulated, len(rows))
			for i, rw := range rows {
				per[k][i] = figuresOf(summarise(recs[i], rw, semantics), done[i])
			}
		})
	}
	wg.Wait()
	out := make([]simulated, len(rows))
	for i := range rows {
		reps := make([]simulated, len(seeds))
		for k := range seeds {
			reps[k] = per[k][i]
		}
		out[i] = meanOver(reps)
	}
	return out
}

// meanOver combines one row's replays: each figure the geometric mean of
// the replays that have it, the share done the least of them.
func meanOver(reps []simulated) simulated {
	if len(reps) == 1 {
		return reps[0]
	}
	out := simulated{done: 1}
	geo := func(get func(simulated) *float64) *float64 {
		sum, n := 0.0, 0
		for _, r := range reps {
			if v := get(r); v != nil && *v > 0 {
				sum += math.Log(*v)
				n++
			}
		}
		if n == 0 {
			return nil
		}
		return ptr(math.Exp(sum / float64(n)))
	}
	out.ttftP50 = geo(func(r simulated) *float64 { return r.ttftP50 })
	out.tpotP50 = geo(func(r simulated) *float64 { return r.tpotP50 })
	out.outputTPS = geo(func(r simulated) *float64 { return r.outputTPS })
	out.ttftTail = geo(func(r simulated) *float64 { return r.ttftTail })
	out.tpotTail = geo(func(r simulated) *float64 { return r.tpotTail })
	out.cacheHit = geo(func(r simulated) *float64 { return r.cacheHit })
	for _, r := range reps {
		out.done = min(out.done, r.done)
	}
	return out
}

// nelderMead minimises f from x0 within the space's bounds (points are
// clamped into the box), with the standard coefficients. It stops after
// maxEvals evaluations or when the simplex's values agree to tol. It is
// derivative-free because the objective is a simulation: piecewise
// constant at fine scales (whole steps, whole tokens), with no gradient
// to follow.
func nelderMead(f func([]float64) float64, x0 []float64, step float64, s *space, maxEvals int, tol float64) ([]float64, float64) {
	n := len(x0)
	type vertex struct {
		x []float64
		v float64
	}
	evals := 0
	eval := func(x []float64) vertex {
		s.clamp(x)
		evals++
		return vertex{x, f(x)}
	}
	simplex := []vertex{eval(slices.Clone(x0))}
	for i := range n {
		x := slices.Clone(x0)
		// Step inward from a bound rather than being clamped onto it.
		if x[i]+step > s.hi[i] {
			x[i] -= step
		} else {
			x[i] += step
		}
		simplex = append(simplex, eval(x))
	}
	point := func(c []float64, t float64, w []float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = c[i] + t*(w[i]-c[i])
		}
		return out
	}
	for evals < maxEvals {
		slices.SortStableFunc(simplex, func(a, b vertex) int {
			switch {
			case a.v < b.v:
				return -1
			case a.v > b.v:
				return 1
			}
			return 0
		})
		best, worst := simplex[0], simplex[n]
		if worst.v-best.v <= tol*(math.Abs(best.v)+tol) {
			break
		}
		centroid := make([]float64, n)
		for _, v := range simplex[:n] {
			for i := range centroid {
				centroid[i] += v.x[i] / float64(n)
			}
		}
		refl := eval(point(centroid, -1, worst.x))
		switch {
		case refl.v < best.v:
			exp := eval(point(centroid, -2, worst.x))
			if exp.v < refl.v {
				simplex[n] = exp
			} else {
				simplex[n] = refl
			}
		case refl.v < simplex[n-1].v:
			simplex[n] = refl
		default:
			var con vertex
			if refl.v < worst.v {
				con = eval(point(centroid, -0.5, worst.x))
			} else {
				con = eval(point(centroid, 0.5, worst.x))
			}
			if con.v < min(refl.v, worst.v) {
				simplex[n] = con
				continue
			}
			// Shrink toward the best vertex.
			for j := 1; j <= n; j++ {
				simplex[j] = eval(point(best.x, 0.5, simplex[j].x))
			}
		}
	}
	best := simplex[0]
	for _, v := range simplex[1:] {
		if v.v < best.v {
			best = v
		}
	}
	return best.x, best.v
}

// coordinateSearch moves one parameter at a time by ±step, keeping what
// lowers f, and halves the step when no move helps, down to minStep. It
// finds the large single-parameter moves (a front end ten times costlier
// than the base's) that a simplex started at the base reaches slowly.
func coordinateSearch(f func([]float64) float64, x []float64, fx float64, step, minStep float64, s *space, maxEvals int) ([]float64, float64) {
	x = slices.Clone(x)
	evals := 0
	for step >= minStep && evals < maxEvals {
		improved := false
		for i := range x {
			for _, dir := range []float64{1, -1} {
				y := slices.Clone(x)
				y[i] += dir * step
				s.clamp(y)
				if y[i] == x[i] {
					continue
				}
				evals++
				if fy := f(y); fy < fx {
					x, fx, improved = y, fy, true
					break
				}
			}
		}
		if !improved {
			step /= 2
		}
	}
	return x, fx
}

// noiseParam is a noise parameter the fit sets from the rows' spreads
// (p90 ÷ p50) rather than their medians: the request path's log-normal σ,
// from time to first token, where every request draws its own factor.
// Per-step jitter and a replica's drift are not fitted. Jitter averages
// away over a request's tokens, so no per-request figure shows it; drift
// holds for a second at a time, so a row of a minute shows sixty draws of
// it, and the p90 of sixty draws is too noisy to fit σ from (a replay
// with σ 0.5 gives a TPOT p90 ÷ p50 anywhere from 1.1 to 2).
type noiseParam struct {
	key    string
	metric func(figures) *float64
	get    func(*engine.Config) *float64
	hi     float64
}

var noiseParams = []noiseParam{
	{key: "front_end.latency_spread", metric: func(f figures) *float64 { return f.ttftTail },
		get: func(c *engine.Config) *float64 { return &c.FrontEnd.LatencySpread }, hi: 1.2},
}

// tailCost is the squared log error of one spread over the rows; ok is
// false when no row measured it.
func (pr *problem) tailCost(x []float64, n noiseParam) (float64, bool) {
	pr.evals++
	sims := simulateAll(pr.space.config(x), pr.rows, pr.semantics, pr.seeds)
	total, any := 0.0, false
	for i, rw := range pr.rows {
		mv := n.metric(rw.measured)
		if mv == nil || rw.heldOut {
			continue
		}
		any = true
		sv := n.metric(sims[i].figures)
		if sv == nil {
			total += missingCost
			continue
		}
		e := math.Log(*sv / *mv)
		total += e * e
	}
	return total, any
}

// fitNoise sets each noise parameter in the space's base by a grid search
// over [0, hi] on its spread, keeping the base's value unless the grid's
// best is clearly better. It returns the keys it
// changed.
func (pr *problem) fitNoise(x []float64) []string {
	var changed []string
	for _, n := range noiseParams {
		p := n.get(&pr.space.base)
		orig := *p
		at := func(v float64) float64 {
			*p = v
			c, _ := pr.tailCost(x, n)
			return c
		}
		base, ok := func() (float64, bool) { *p = orig; return pr.tailCost(x, n) }()
		if !ok {
			*p = orig
			continue
		}
		// A grid, not a bracketing search: a p90 over a few hundred
		// requests moves in steps as σ grows, and its squared error has
		// local minima a golden section would settle in.
		best, fbest := orig, base
		for v := 0.0; v <= n.hi+1e-9; v += n.hi / 24 {
			if f := at(v); f < fbest {
				best, fbest = v, f
			}
		}
		// Keep the base's noise unless the fit explains the spread
		// clearly better: a spread matched within sampling noise is
		// not worth a new parameter value.
		if fbest < 0.8*base {
			*p = math.Round(best*1000) / 1000
			changed = append(changed, n.key)
		} else {
			*p = orig
		}
	}
	return changed
}

// allMetrics weighs every metric alike.
var allMetrics = [numMetrics]float64{1, 1, 1}
