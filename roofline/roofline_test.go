package roofline

import (
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Abs(b) }

// TestKVBytesPerToken checks the per-token KV size against the figures
// commonly quoted for these architectures: 128 KiB for Llama 3.1 8B (32
// layers × 8 KV heads × 128 × 2 × 2 bytes) and 112 KiB for Qwen3-0.6B.
func TestKVBytesPerToken(t *testing.T) {
	llama, _ := LookupModel("llama-3.1-8b")
	if got := llama.KVBytesPerToken(BF16); got != 131072 {
		t.Errorf("llama-3.1-8b KV bytes/token = %v, want 131072", got)
	}
	qwen, _ := LookupModel("qwen3-0.6b")
	if got := qwen.KVBytesPerToken(BF16); got != 114688 {
		t.Errorf("qwen3-0.6b KV bytes/token = %v, want 114688", got)
	}
}

// TestTPOTBound checks the headline roofline number: an 8B BF16 model on one
// H100 SXM decodes a single stream in about 4.5 ms per token at full
// bandwidth. The step streams the body and the output projection, 8.03 B −
// 128,256 × 4,096 (the untied input embedding, only gathered) = 7.505 B
// parameters, 15.01 GB ÷ 3.35 TB/s; more with context.
func TestTPOTBound(t *testing.T) {
	m, _ := LookupModel("llama-3.1-8b")
	g, _ := LookupGPU("h100-sxm")
	e := Efficiency{Bandwidth: 1, FLOPs: 1}
	streamed := 2 * (8.03e9 - 128256*4096)
	if got, want := TPOTBound(m, g, BF16, e, 0), streamed/3.35e12; !near(got, want, 1e-12) {
		t.Errorf("TPOT bound at context 0 = %v s, want %v", got, want)
	}
	// 4096 tokens of context add 4096 × 128 KiB = 0.537 GB of reads.
	withCtx := TPOTBound(m, g, BF16, e, 4096)
	if want := (streamed + 4096*131072) / 3.35e12; !near(withCtx, want, 1e-12) {
		t.Errorf("TPOT bound at context 4096 = %v s, want %v", withCtx, want)
	}
	half := TPOTBound(m, g, BF16, Efficiency{Bandwidth: 0.5, FLOPs: 1}, 4096)
	if !near(half, 2*withCtx, 1e-12) {
		t.Errorf("halving η_bw: %v, want %v", half, 2*withCtx)
	}
	if r := DecodeTokensPerSecond(m, g, BF16, e, 4096) * withCtx; !near(r, 1, 1e-12) {
		t.Errorf("tokens/s × TPOT = %v, want 1", r)
	}
}

// TestEmbeddingAccounting checks the parameter split the roofline rests on
// against the model cards: Qwen3-0.6B has 0.44 B non-embedding parameters
// (tied), Llama 3.1 8B about 6.98 B (untied: two 0.525 B matrices).
func TestEmbeddingAccounting(t *testing.T) {
	qwen, _ := LookupModel("qwen3-0.6b")
	if got := qwen.NonEmbeddingParams(); !near(got, 0.44e9, 0.01) {
		t.Errorf("qwen3-0.6b non-embedding params = %.3g, want 0.44e9", got)
	}
	if qwen.StreamedWeightBytes(BF16) != qwen.WeightBytes(BF16) {
		t.Error("a tied model streams its one vocabulary matrix as the output projection: all its weights")
	}
	llama, _ := LookupModel("llama-3.1-8b")
	if got := llama.NonEmbeddingParams(); !near(got, 6.98e9, 0.01) {
		t.Errorf("llama-3.1-8b non-embedding params = %.3g, want 6.98e9", got)
	}
	if got, want := llama.WeightBytes(BF16)-llama.StreamedWeightBytes(BF16), 2*128256*4096.0; got != want {
		t.Errorf("untied input embedding not streamed: difference %v bytes, want %v", got, want)
	}
	if llama.PrefillFLOPs(0, 0) != 0 {
		t.Error("no new tokens must cost nothing")
	}
}

// TestAttentionFLOPs checks the causal sum against an explicit loop.
func TestAttentionFLOPs(t *testing.T) {
	m, _ := LookupModel("qwen3-8b")
	per := 4 * float64(m.Layers*m.Heads*m.HeadDim)
	for _, c := range []struct{ cached, n int }{{0, 1}, {0, 1000}, {512, 100}, {4096, 1}} {
		want := 0.0
		for i := 1; i <= c.n; i++ {
			want += per * float64(c.cached+i)
		}
		if got := m.AttentionFLOPs(c.cached, c.n); !near(got, want, 1e-12) {
			t.Errorf("AttentionFLOPs(%d, %d) = %v, want %v", c.cached, c.n, got, want)
		}
	}
	if m.AttentionFLOPs(10, 0) != 0 {
		t.Error("no new tokens must cost nothing")
	}
}

// TestPrefillBound checks a worked example: 2,000 prompt tokens of Llama 3.1
// 8B on an H100 at 50% of the BF16 peak. Each token costs 2 × the 6.98 B
// non-embedding parameters, plus causal attention, plus the logits of the
// one sampled token (2 × 128,256 × 4,096).
func TestPrefillBound(t *testing.T) {
	m, _ := LookupModel("llama-3.1-8b")
	g, _ := LookupGPU("h100-sxm")
	e := Efficiency{Bandwidth: 1, FLOPs: 0.5}
	flops := 2*(8.03e9-2*128256*4096)*2000 + 4*32*32*128*(2000.0*2001/2) + 2*128256*4096
	if got, want := PrefillBound(m, g, BF16, e, 0, 2000), flops/(0.5*989.4e12); !near(got, want, 1e-12) {
		t.Errorf("prefill bound = %v s, want %v", got, want)
	}
	// FP8 weights use the FP8 peak.
	fp8 := Precision{Weight: 1, KV: 1}
	if got, want := PrefillBound(m, g, fp8, e, 0, 2000), flops/(0.5*1978.9e12); !near(got, want, 1e-12) {
		t.Errorf("fp8 prefill bound = %v s, want %v", got, want)
	}
	a100, _ := LookupGPU("a100-80gb")
	if a100.PeakFLOPs(fp8) != a100.BF16FLOPs {
		t.Error("a GPU without FP8 tensor cores must fall back to its BF16 peak")
	}
}

// TestKVCapacity checks the block arithmetic: whole 16-token blocks of what
// remains after weights and reserve, and zero when the weights do not fit.
func TestKVCapacity(t *testing.T) {
	m, _ := LookupModel("llama-3.1-8b")
	g, _ := LookupGPU("h100-sxm")
	got := KVCapacity(m, g, BF16, 0.9, 2e9, 16)
	free := 0.9*80e9 - 2*8.03e9 - 2e9
	want := int(math.Floor(free/(131072*16))) * 16
	if got != want || got%16 != 0 {
		t.Fatalf("KVCapacity = %d, want %d", got, want)
	}
	if n := MaxConcurrency(got, 1000+500, 16); n != got/16/94 {
		t.Errorf("MaxConcurrency = %d, want %d", n, got/16/94)
	}
	big, _ := LookupModel("llama-3.1-70b")
	l4, _ := LookupGPU("l4")
	if c := KVCapacity(big, l4, BF16, 0.9, 0, 16); c != 0 {
		t.Errorf("70B on an L4 has KV capacity %d, want 0", c)
	}
}

// TestCatalogComplete checks that every catalogued entry passes Validate,
// has a source, and that names are unique, so a typo in the data fails here
// rather than as a strange prediction.
func TestCatalogComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, g := range GPUs() {
		if err := g.Validate(); err != nil || g.Source == "" || seen[g.Name] {
			t.Errorf("GPU %s: err=%v source=%q dup=%v", g.Name, err, g.Source, seen[g.Name])
		}
		seen[g.Name] = true
	}
	for _, m := range Models() {
		if err := m.Validate(); err != nil || m.Source == "" || seen[m.Name] || m.Hidden <= 0 || m.Vocab <= 0 || m.MaxPosition <= 0 {
			t.Errorf("model %s: err=%v source=%q dup=%v", m.Name, err, m.Source, seen[m.Name])
		}
		seen[m.Name] = true
	}
	for _, name := range []string{"h100-sxm", "h100-pcie", "h200", "b200", "a100-40gb", "a100-80gb", "l40s", "l4", "a10g", "mi300x"} {
		if _, ok := LookupGPU(name); !ok {
			t.Errorf("GPU %s missing from the catalog", name)
		}
	}
	for _, name := range []string{"llama-3.1-8b", "llama-3.1-70b", "qwen3-0.6b", "qwen3-8b", "qwen3-32b", "mistral-7b"} {
		if _, ok := LookupModel(name); !ok {
			t.Errorf("model %s missing from the catalog", name)
		}
	}
	if _, ok := LookupGPU("H200"); !ok {
		t.Error("lookups must be case-insensitive")
	}
	bad := Model{Params: 1, Layers: 1, Heads: 3, KVHeads: 2, HeadDim: 1}
	if bad.Validate() == nil {
		t.Error("heads not a multiple of kv_heads must be rejected")
	}
}

// TestCatalogTelemetryFigures checks the figures the simulator's GPU
// telemetry reads: every NVIDIA GPU has them, in a sane order, and the
// AMD one, which DCGM does not monitor, has no device name.
func TestCatalogTelemetryFigures(t *testing.T) {
	for _, g := range GPUs() {
		if g.Name == "mi300x" {
			if g.HasTelemetry() {
				t.Errorf("%s: DCGM does not monitor AMD GPUs", g.Name)
			}
			continue
		}
		if !g.HasTelemetry() {
			t.Errorf("%s: no telemetry figures: %+v", g.Name, g)
		}
		if g.IdleSMClockMHz <= 0 || g.IdleSMClockMHz >= g.MaxSMClockMHz || g.IdleWatts >= g.TDPWatts/3 {
			t.Errorf("%s: idle %v W and %v MHz against TDP %v W and %v MHz", g.Name, g.IdleWatts, g.IdleSMClockMHz, g.TDPWatts, g.MaxSMClockMHz)
		}
	}
}
