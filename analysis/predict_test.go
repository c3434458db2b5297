package analysis

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/roofline"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/sim/engine"
)

// predictPlan loads an experiment on the built-in server with the given
// predict section (YAML flow mapping, or "" for none) and rows.
func predictPlan(t *testing.T, predict, rows string) *schema.Plan {
	t.Helper()
	src := "apiVersion: infermatrix/v1\nname: p\nserver: {target: builtin}\n"
	if predict != "" {
		src += "predict: " + predict + "\n"
	}
	plan, err := schema.Parse("p.yaml", []byte(src+"rows:\n"+rows), schema.Options{})
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	return plan
}

// measuredRow is a summary with the given p50s (ms; 0 leaves a metric
// unmeasured), each also its mean.
func measuredRow(id string, ttft, tpot, e2e float64) metrics.RowSummary {
	rs := metrics.RowSummary{ID: id, Base: id, Status: metrics.RowComplete}
	one := func(v float64) metrics.Dist {
		if v == 0 {
			return metrics.Dist{}
		}
		return metrics.Dist{Count: 100, Mean: v, P50: v, P90: v, P95: v, P99: v, Min: v, Max: v}
	}
	rs.Metrics.TTFT, rs.Metrics.TPOT, rs.Metrics.E2E = one(ttft), one(tpot), one(e2e)
	return rs
}

func closeTo(got, want float64) bool { return math.Abs(got-want) <= 1e-9*math.Abs(want) }

const workedPredict = "{model: llama-3.1-8b, gpu: h100-sxm, bandwidth_efficiency: 0.8, flops_efficiency: 0.55}"

// TestPredictWorkedExample checks two rows against the formulas written
// out by hand, with none of roofline's code, and the figures
// docs/predictions.md quotes for them.
func TestPredictWorkedExample(t *testing.T) {
	plan := predictPlan(t, workedPredict, `  - {id: chat, concurrency: 1, requests: 10, input_tokens: 1000, output_tokens: 500}
  - {id: long, concurrency: 1, requests: 10, input_tokens: 8192, output_tokens: 32}
`)
	sum := &metrics.Summary{Rows: []metrics.RowSummary{
		measuredRow("chat", 40, 6.5, 40+499*6.5),
		measuredRow("long", 300, 6.6, 300+31*6.6),
	}}
	preds := predictRows(&input{Plan: plan, Summary: sum})
	if len(preds) != 2 || preds[0].Row != "chat" || preds[1].Row != "long" {
		t.Fatalf("predictions %+v; want chat and long, in plan order", preds)
	}

	const (
		weights  = 2 * 8.03e9           // bytes: 8.03 B parameters in BF16
		embed    = 128256 * 4096        // parameters of one vocabulary matrix
		streamed = weights - 2*embed    // bytes a decode step reads: not the untied input embedding
		body     = 8.03e9 - 2*embed     // non-embedding parameters
		kvPerTok = 2 * 32 * 8 * 128 * 2 // bytes: K and V × layers × KV heads × head dim × 2 bytes
		bw       = 0.8 * 3.35e12        // η_bw × bandwidth, bytes/s
		flops    = 0.55 * 989.4e12      // η_f × dense BF16 peak, FLOP/s
		attnPos  = 4 * 32 * 32 * 128    // attention FLOPs per attended position: 4 × layers × heads × head dim
		free     = 0.9*80e9 - weights - 3e9
	)
	kv := int(math.Floor(free/(kvPerTok*16))) * 16
	for _, c := range []struct {
		p       RowPrediction
		in, out float64
		regime  string
	}{{preds[0], 1000, 500, RegimeBandwidth}, {preds[1], 8192, 32, RegimePrefill}} {
		ctx := c.in + c.out/2
		tpot := (streamed + kvPerTok*ctx) / bw
		prefill := (2*body*c.in + attnPos*c.in*(c.in+1)/2 + 2*embed) / flops
		seqBlocks := int(math.Ceil((c.in + c.out) / 16))
		p := c.p
		if p.Context != ctx || !closeTo(p.TPOTBoundMS, 1e3*tpot) || !closeTo(p.DecodeTokensPerS, 1/tpot) || !closeTo(p.PrefillBoundMS, 1e3*prefill) {
			t.Errorf("%s: context %v, TPOT bound %v ms, %v tok/s, prefill %v ms; want %v, %v, %v, %v",
				p.Row, p.Context, p.TPOTBoundMS, p.DecodeTokensPerS, p.PrefillBoundMS, ctx, 1e3*tpot, 1/tpot, 1e3*prefill)
		}
		if p.KVCapacityTokens != kv || p.MaxConcurrency != kv/16/seqBlocks {
			t.Errorf("%s: KV %d tokens, max concurrency %d; want %d, %d", p.Row, p.KVCapacityTokens, p.MaxConcurrency, kv, kv/16/seqBlocks)
		}
		if p.Regime != c.regime {
			t.Errorf("%s: regime %q (%s); want %q", p.Row, p.Regime, p.Evidence, c.regime)
		}
	}
	chat := preds[0]
	if chat.MeasuredTPOTMS != 6.5 || !closeTo(chat.TPOTRatio, 6.5/chat.TPOTBoundMS) || chat.MeasuredTTFTMS != 40 || !closeTo(chat.TTFTRatio, 40/chat.PrefillBoundMS) {
		t.Errorf("chat measurements %+v", chat)
	}

	// The figures the worked example quotes, as it rounds them.
	doc := readPredictionsDoc(t)
	for _, want := range []string{
		fmt.Sprintf("%.2f GB", weights/1e9),
		fmt.Sprintf("%d bytes", int(kvPerTok)),
		fmt.Sprintf("%.3f ms", chat.TPOTBoundMS),
		fmt.Sprintf("%.1f tokens/s", chat.DecodeTokensPerS),
		fmt.Sprintf("%.3f ms", chat.PrefillBoundMS),
		predCount(float64(chat.KVCapacityTokens)) + " tokens",
		fmt.Sprintf("%d sequences", chat.MaxConcurrency),
		fmt.Sprintf("%.2f", chat.TPOTRatio),
		fmt.Sprintf("%.3f ms", preds[1].TPOTBoundMS),
		fmt.Sprintf("%.1f ms", preds[1].PrefillBoundMS),
		fmt.Sprintf("%d sequences", preds[1].MaxConcurrency),
		chat.Evidence,
		preds[1].Evidence,
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/predictions.md's worked example lacks %q", want)
		}
	}
}

func readPredictionsDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../docs/predictions.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPredictNone checks that an experiment without a predict section, or
// without a plan at all, gets no predictions.
func TestPredictNone(t *testing.T) {
	plan := predictPlan(t, "", "  - {id: a, concurrency: 1, requests: 1, input_tokens: 8, output_tokens: 8}\n")
	if got := predictRows(&input{Plan: plan}); got != nil {
		t.Errorf("no predict section: %+v; want nil", got)
	}
	if predictRows(&input{}) != nil || predictRows(nil) != nil || predictRows(&input{Plan: &schema.Plan{}}) != nil {
		t.Error("no plan: want nil")
	}
	if a := Analyze(plan, nil, nil); a.Predictions != nil {
		t.Errorf("Analyze without predict: %+v", a.Predictions)
	}
}

// TestPredictRegimes checks each regime rule, in the order they are
// applied, with the evidence each gives.
func TestPredictRegimes(t *testing.T) {
	const small = "{model: qwen3-0.6b, gpu: h200, bandwidth_efficiency: 0.8, flops_efficiency: 0.5}"
	chat := "input_tokens: 1000, output_tokens: 500, requests: 10"
	for _, c := range []struct {
		name, predict, load string
		// rs sets the row's measurements; nil leaves it unmeasured.
		rs             func(*metrics.RowSummary)
		regime         string
		evidence       []string
		tpotR, ttftR   float64 // wanted ratios, 0 for none (checked to 2 decimals)
		noMeasurements bool
	}{
		{name: "KV cache overflows, closed loop", load: "concurrency: 300",
			rs:     func(r *metrics.RowSummary) { *r = measuredRow(r.ID, 900, 40, 21000) },
			regime: RegimeQueueing, evidence: []string{"concurrency 300 exceeds the 268 sequences of 1,500 tokens the KV cache holds (403,888 tokens)"}},
		{name: "KV cache overflows, predicted", load: "concurrency: 300", noMeasurements: true,
			regime: RegimeQueueing, evidence: []string{"predicted, not measured: concurrency 300 exceeds the 268 sequences"}},
		{name: "KV cache overflows, open loop by Little's law", load: "rate: {per_second: 20}",
			rs:     func(r *metrics.RowSummary) { *r = measuredRow(r.ID, 5000, 9, 20000) },
			regime: RegimeQueueing, evidence: []string{"20.0 req/s × E2E mean 20.0 s ≈ 400 in flight exceeds the 268 sequences"}},
		{name: "client queue behind max_concurrency", load: "rate: {per_second: 20, max_concurrency: 8}",
			rs: func(r *metrics.RowSummary) {
				*r = measuredRow(r.ID, 35, 6.4, 3300)
				r.Metrics.Queue = metrics.Dist{Count: 100, P50: 120, Mean: 150}
			},
			regime: RegimeQueueing, evidence: []string{"queue p50 120 ms", "behind max_concurrency 8"}},
		{name: "TTFT far above its floor, decode near its bound", load: "concurrency: 16",
			rs:     func(r *metrics.RowSummary) { *r = measuredRow(r.ID, 400, 8, 4400) },
			regime: RegimeQueueing, tpotR: 8 / 5.6616, ttftR: 400 / 26.135,
			evidence: []string{"TTFT p50 400 ms is 15.30× its roofline floor of 26.1 ms while TPOT p50 8.00 ms is within 1.5× its bound of 6.58 ms"}},
		{name: "prefill-heavy, TTFT dominates", load: "concurrency: 1, input_tokens: 8192, output_tokens: 32, requests: 10",
			rs:     func(r *metrics.RowSummary) { *r = measuredRow(r.ID, 300, 6.6, 505) },
			regime: RegimePrefill, evidence: []string{"TTFT p50 300 ms is 59% of E2E p50 505 ms at 8,192 input ÷ 32 output tokens; the prefill bound is 242 ms (TTFT 1.24× it)"}},
		{name: "prefill-heavy but decode dominates", load: "concurrency: 1, input_tokens: 8192, output_tokens: 512, requests: 10",
			rs:     func(r *metrics.RowSummary) { *r = measuredRow(r.ID, 300, 6.9, 300+511*6.9) },
			regime: RegimeBandwidth},
		{name: "single stream at the bound", load: "concurrency: 1",
			rs:     func(r *metrics.RowSummary) { *r = measuredRow(r.ID, 40, 6.5, 3300) },
			regime: RegimeBandwidth, tpotR: 6.5 / 5.6616,
			evidence: []string{"TPOT p50 6.50 ms is 1.15× the bound of 5.66 ms at 1,250 tokens of context"}},
		{name: "single stream faster than the bound", load: "concurrency: 1",
			rs:     func(r *metrics.RowSummary) { *r = measuredRow(r.ID, 40, 4, 2000) },
			regime: RegimeBandwidth, evidence: []string{"is 0.71× the bound", "below the bound, so the predict section understates the deployment"}},
		{name: "batch at its bound", load: "concurrency: 64",
			rs:       func(r *metrics.RowSummary) { *r = measuredRow(r.ID, 60, 12, 6000) },
			regime:   RegimeBandwidth,
			evidence: []string{"TPOT p50 12.0 ms is 1.26× the bound of 9.51 ms for 64 sequences of 1,250 tokens decoding together per replica (2.12× the single-stream bound of 5.66 ms)"}},
		{name: "batch above its bound", load: "concurrency: 64",
			rs:     func(r *metrics.RowSummary) { *r = measuredRow(r.ID, 60, 20, 10000) },
			regime: RegimeOverhead, evidence: []string{"2.10× the bound of 9.51 ms for 64 sequences", "per-step and per-sequence costs"}},
		{name: "small model, single stream", predict: small, load: "concurrency: 1",
			rs:     func(r *metrics.RowSummary) { *r = measuredRow(r.ID, 8, 3.5, 1750) },
			regime: RegimeOverhead, evidence: []string{"TPOT p50 3.50 ms is 10.06× the bound of 0.348 ms at concurrency 1: fixed per-step costs"}},
		{name: "unmeasured, prefill-heavy", load: "concurrency: 1, input_tokens: 8192, output_tokens: 32, requests: 10", noMeasurements: true,
			regime: RegimePrefill, evidence: []string{"predicted, not measured: the prefill bound of 242 ms at 8,192 input tokens exceeds the 186 ms of decoding 32 output tokens"}},
		{name: "unmeasured", load: "concurrency: 4", noMeasurements: true,
			regime: RegimeBandwidth, evidence: []string{"predicted, not measured: one stream decodes at most 177 tokens/s, 5.66 ms per token at 1,250 tokens of context"}},
		{name: "not streamed", load: "concurrency: 1, streaming: false",
			rs:     func(r *metrics.RowSummary) { *r = measuredRow(r.ID, 0, 0, 3300) },
			regime: RegimeBandwidth, evidence: []string{"predicted, TPOT not measured: one stream"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			predict := c.predict
			if predict == "" {
				predict = workedPredict
			}
			load := c.load
			if !strings.Contains(load, "input_tokens") {
				load += ", " + chat
			}
			plan := predictPlan(t, predict, "  - {id: r, "+load+"}\n")
			in := &input{Plan: plan}
			if !c.noMeasurements {
				rs := metrics.RowSummary{ID: "r"}
				c.rs(&rs)
				in.Summary = &metrics.Summary{Rows: []metrics.RowSummary{rs}}
			}
			p := predictRows(in)[0]
			if p.Regime != c.regime {
				t.Errorf("regime %q; want %q\nevidence: %s", p.Regime, c.regime, p.Evidence)
			}
			for _, want := range c.evidence {
				if !strings.Contains(p.Evidence, want) {
					t.Errorf("evidence %q\nlacks %q", p.Evidence, want)
				}
			}
			if c.tpotR != 0 && math.Abs(p.TPOTRatio-c.tpotR) > 0.005 {
				t.Errorf("TPOT ratio %v; want %.2f", p.TPOTRatio, c.tpotR)
			}
			if c.ttftR != 0 && math.Abs(p.TTFTRatio-c.ttftR) > 0.005 {
				t.Errorf("TTFT ratio %v; want %.2f", p.TTFTRatio, c.ttftR)
			}
			if c.noMeasurements && (p.MeasuredTPOTMS != 0 || p.TPOTRatio != 0 || p.MeasuredTTFTMS != 0 || p.TTFTRatio != 0) {
				t.Errorf("unmeasured row has measurements: %+v", p)
			}
		})
	}
}

// TestPredictLengths checks where a row's lengths come from: a mean, the
// mean of listed values, or, for a row that sets none, the measured means;
// and that a row with none at all gets an explained empty prediction.
func TestPredictLengths(t *testing.T) {
	pred := &schema.Predict{Model: "llama-3.1-8b", GPU: "h100-sxm", BandwidthEfficiency: 0.8, FLOPsEfficiency: 0.55}
	plan := &schema.Plan{Experiment: &schema.Experiment{Predict: pred}, Rows: []schema.PlannedRow{
		{ID: "values", Load: schema.LoadPlan{Mode: schema.ModeConcurrency, Concurrency: 1},
			Input: schema.Length{Values: []int{500, 1500}}, Output: schema.Length{Values: []int{400, 600}}},
		{ID: "dataset", Load: schema.LoadPlan{Mode: schema.ModeConcurrency, Concurrency: 1}},
		{ID: "unknown", Load: schema.LoadPlan{Mode: schema.ModeConcurrency, Concurrency: 1}},
	}}
	ds := measuredRow("dataset", 40, 6.5, 3300)
	ds.Metrics.InputTokens = metrics.Dist{Count: 10, Mean: 1000}
	ds.Metrics.OutputTokens = metrics.Dist{Count: 10, Mean: 500}
	preds := predictRows(&input{Plan: plan, Summary: &metrics.Summary{Rows: []metrics.RowSummary{ds}}})
	if len(preds) != 3 {
		t.Fatalf("%d predictions; want 3", len(preds))
	}
	for _, p := range preds[:2] {
		if p.Context != 1250 || p.Regime == "" {
			t.Errorf("%s: context %v, regime %q; want 1250 and a regime", p.Row, p.Context, p.Regime)
		}
	}
	if u := preds[2]; u.Regime != "" || u.TPOTBoundMS != 0 || !strings.Contains(u.Evidence, "no prediction") {
		t.Errorf("row without lengths: %+v", u)
	}
}

// TestPredictOverridesAndReplicas checks that overrides and replicas reach
// every figure: the bandwidth override the TPOT bound, the model override
// the KV size, and replicas the deployment's KV capacity and concurrency
// but not one stream's speed.
func TestPredictOverridesAndReplicas(t *testing.T) {
	rows := "  - {id: a, concurrency: 1, requests: 1, input_tokens: 1000, output_tokens: 500}\n"
	base := predictRows(&input{Plan: predictPlan(t, workedPredict, rows)})[0]
	plan := predictPlan(t, `{model: llama-3.1-8b, gpu: h100-sxm, bandwidth_efficiency: 0.8, flops_efficiency: 0.55, replicas: 3,
  reserve_gb: 1, gpu_memory_utilization: 0.95, kv_precision: fp8,
  gpu_overrides: {bandwidth_tbs: 3.0, bf16_tflops: 900},
  model_overrides: {params_b: 7.5, layers: 16}}`, rows)
	p := predictRows(&input{Plan: plan})[0]
	const (
		weights = 2 * 7.5e9
		embed   = 128256 * 4096        // one vocabulary matrix; Llama's are untied
		kvTok   = 2 * 16 * 8 * 128 * 1 // 16 layers, an FP8 KV cache
	)
	tpot := (weights - 2*embed + kvTok*1250) / (0.8 * 3.0e12)
	prefill := (2*(7.5e9-2*embed)*1000 + 4*16*32*128*(1000*1001/2.0) + 2*embed) / (0.55 * 900e12)
	perReplica := int(math.Floor((0.95*80e9-weights-1e9)/(kvTok*16))) * 16
	if !closeTo(p.TPOTBoundMS, 1e3*tpot) || !closeTo(p.PrefillBoundMS, 1e3*prefill) {
		t.Errorf("TPOT bound %v ms, prefill %v ms; want %v, %v", p.TPOTBoundMS, p.PrefillBoundMS, 1e3*tpot, 1e3*prefill)
	}
	if p.KVCapacityTokens != 3*perReplica || p.MaxConcurrency != 3*(perReplica/16/94) {
		t.Errorf("KV %d tokens, max concurrency %d; want %d, %d", p.KVCapacityTokens, p.MaxConcurrency, 3*perReplica, 3*(perReplica/16/94))
	}
	if p.TPOTBoundMS == base.TPOTBoundMS || p.KVCapacityTokens <= 3*base.KVCapacityTokens {
		t.Errorf("overrides changed nothing: %+v against %+v", p, base)
	}

	// Replicas alone scale capacity, not one stream's bound; the
	// sequences on each replica are what decode together.
	two := predictPlan(t, "{model: llama-3.1-8b, gpu: h100-sxm, bandwidth_efficiency: 0.8, flops_efficiency: 0.55, replicas: 2}",
		"  - {id: a, concurrency: 64, requests: 1, input_tokens: 1000, output_tokens: 500}\n")
	sum := &metrics.Summary{Rows: []metrics.RowSummary{measuredRow("a", 50, 10, 5000)}}
	q := predictRows(&input{Plan: two, Summary: sum})[0]
	if q.TPOTBoundMS != base.TPOTBoundMS || q.KVCapacityTokens != 2*base.KVCapacityTokens || q.MaxConcurrency != 2*base.MaxConcurrency {
		t.Errorf("2 replicas: %+v; want the bound of 1 and twice its capacity %d and concurrency %d", q, base.KVCapacityTokens, base.MaxConcurrency)
	}
	// 10 ms is 1.65× the single-stream bound, 1.26× that of the 32
	// sequences of 1,250 tokens on each replica (7.95 ms).
	if q.Regime != RegimeBandwidth || !strings.Contains(q.Evidence, "for 32 sequences") {
		t.Errorf("2 replicas at concurrency 64: %s: %s", q.Regime, q.Evidence)
	}
}

// TestPredictPhysicsOnly is the check the prediction exists for: the
// built-in server with physics_only runs the same roofline, so a single
// stream's TPOT and TTFT on it are the predicted bounds. The engine's own
// figures for the row must agree with the prediction, and a summary holding
// them must read as ratio 1, bandwidth-bound decode.
func TestPredictPhysicsOnly(t *testing.T) {
	plan, err := schema.Parse("phys.yaml", []byte(`apiVersion: infermatrix/v1
name: phys
server: {target: builtin, sim: {preset: llama-3.1-8b-h100, physics_only: true}}
predict: {model: llama-3.1-8b, gpu: h100-sxm, bandwidth_efficiency: 0.74, flops_efficiency: 0.63}
rows:
  - {id: chat, concurrency: 1, requests: 10, input_tokens: 1000, output_tokens: 500}
`), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := plan.Server.Sim.EngineConfig()
	if err != nil {
		t.Fatal(err)
	}
	d, err := plan.Experiment.Predict.Deployment()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Efficiency != d.Efficiency || cfg.Model != d.Model || cfg.GPU != d.GPU || cfg.Precision != d.Precision {
		t.Fatalf("the preset runs %+v, the prediction assumes %+v", cfg, d)
	}

	tpotBound := 1e3 * roofline.TPOTBound(d.Model, d.GPU, d.Precision, d.Efficiency, 1000+500/2)
	prefillBound := 1e3 * roofline.PrefillBound(d.Model, d.GPU, d.Precision, d.Efficiency, 0, 1000)
	sum := &metrics.Summary{Rows: []metrics.RowSummary{measuredRow("chat", prefillBound, tpotBound, prefillBound+499*tpotBound)}}
	p := predictRows(&input{Plan: plan, Summary: sum})[0]
	if p.TPOTRatio != 1 || p.TTFTRatio != 1 || p.Regime != RegimeBandwidth {
		t.Errorf("physics-only row: TPOT ×%v, TTFT ×%v, %s (%s); want 1, 1, %s", p.TPOTRatio, p.TTFTRatio, p.Regime, p.Evidence, RegimeBandwidth)
	}
	if p.KVCapacityTokens != cfg.KVCapacity() {
		t.Errorf("KV capacity %d; the engine has %d", p.KVCapacityTokens, cfg.KVCapacity())
	}

	// The engine itself, on its virtual clock: one request alone.
	ttft, tpot, err := engine.Unloaded(cfg, 1000, 500)
	if err != nil {
		t.Fatal(err)
	}
	if got := float64(tpot.Nanoseconds()) / 1e6; math.Abs(got/p.TPOTBoundMS-1) > 1e-5 {
		t.Errorf("physics-only engine TPOT %v ms; predicted %v ms", got, p.TPOTBoundMS)
	}
	if got := float64(ttft.Nanoseconds()) / 1e6; math.Abs(got/p.PrefillBoundMS-1) > 1e-5 {
		t.Errorf("physics-only engine TTFT %v ms; predicted %v ms", got, p.PrefillBoundMS)
	}
}

// TestPredictionsDocCatalog checks that docs/predictions.md lists every
// catalogued GPU and model with its figures' source.
func TestPredictionsDocCatalog(t *testing.T) {
	doc := readPredictionsDoc(t)
	for _, g := range roofline.GPUs() {
		if !strings.Contains(doc, "`"+g.Name+"`") || !strings.Contains(doc, g.Source) {
			t.Errorf("docs/predictions.md lacks GPU %s or its source %q", g.Name, g.Source)
		}
	}
	for _, m := range roofline.Models() {
		if !strings.Contains(doc, "`"+m.Name+"`") || !strings.Contains(doc, m.Source) {
			t.Errorf("docs/predictions.md lacks model %s or its source %q", m.Name, m.Source)
		}
	}
}

// TestPredictWarmPrefix checks that a warm prefix's whole blocks are
// credited to the prefill bound: they are in the cache before the row.
func TestPredictWarmPrefix(t *testing.T) {
	plan, err := schema.Parse("w.yaml", []byte(`apiVersion: infermatrix/v1
name: w
server: {target: builtin}
predict: {model: llama-3.1-8b, gpu: h100-sxm, bandwidth_efficiency: 0.8, flops_efficiency: 0.55}
rows:
  - {id: cold, concurrency: 1, requests: 4, input_tokens: 3500, output_tokens: 100, prefix: {length: 3000, distinct: 4}}
  - {id: warm, concurrency: 1, requests: 4, input_tokens: 3500, output_tokens: 100, prefix: {length: 3000, distinct: 4, warm: true}}
`), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	preds := predictRows(&input{Plan: plan})
	m, _ := roofline.LookupModel("llama-3.1-8b")
	g, _ := roofline.LookupGPU("h100-sxm")
	eff := roofline.Efficiency{Bandwidth: 0.8, FLOPs: 0.55}
	cold := 1e3 * roofline.PrefillBound(m, g, roofline.BF16, eff, 0, 3500)
	warm := 1e3 * roofline.PrefillBound(m, g, roofline.BF16, eff, 2992, 508) // 187 whole blocks of 16
	if math.Abs(preds[0].PrefillBoundMS-cold) > 1e-9 || math.Abs(preds[1].PrefillBoundMS-warm) > 1e-9 {
		t.Errorf("prefill bounds %v and %v ms, want %v (cold) and %v (warm)", preds[0].PrefillBoundMS, preds[1].PrefillBoundMS, cold, warm)
	}
}
