package engine

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/roofline"
)

func preset(t testing.TB, name string) Config {
	t.Helper()
	p, ok := LookupPreset(name)
	if !ok {
		t.Fatalf("no preset %s", name)
	}
	return p.Config
}

func newCluster(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ids returns n token ids starting at from, distinct from other ranges.
func ids(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

// trace is a request whose delivery times are recorded.
type trace struct {
	*Request
	at []time.Duration
}

func submit(c *Cluster, prompt []int, output int) *trace {
	tr := &trace{Request: &Request{Prompt: prompt, Output: output}}
	tr.Deliver = func(k int, at time.Duration) {
		if k != len(tr.at) {
			panic("tokens delivered out of order")
		}
		tr.at = append(tr.at, at)
	}
	c.Submit(tr.Request)
	return tr
}

func drain(c *Cluster) {
	for c.Step() {
	}
}

// TestPhysicsOnlyDecode checks the promise the decision records rely on:
// with physics_only, single-stream TPOT of llama-3.1-8b-h100 equals
// (weight bytes + KV bytes of the context) ÷ (η_bw × bandwidth), the
// roofline formula, to within 1%. The context is the mean over decode
// steps, ISL + OSL/2, since KV reads grow linearly through the output.
func TestPhysicsOnlyDecode(t *testing.T) {
	cfg := preset(t, "llama-3.1-8b-h100").PhysicsOnly()
	for _, tc := range []struct{ isl, osl int }{{1, 128}, {1000, 500}, {8000, 2000}} {
		c := newCluster(t, cfg)
		tr := submit(c, ids(0, tc.isl), tc.osl)
		drain(c)
		if len(tr.at) != tc.osl {
			t.Fatalf("delivered %d tokens, want %d", len(tr.at), tc.osl)
		}
		tpot := (tr.at[tc.osl-1] - tr.at[0]).Seconds() / float64(tc.osl-1)
		want := roofline.TPOTBound(cfg.Model, cfg.GPU, cfg.Precision, cfg.Efficiency, float64(tc.isl)+float64(tc.osl)/2)
		if dev := tpot/want - 1; math.Abs(dev) > 0.01 {
			t.Errorf("ISL %d OSL %d: TPOT %.4f ms, roofline %.4f ms (%+.3f%%)", tc.isl, tc.osl, tpot*1e3, want*1e3, 100*dev)
		} else {
			t.Logf("ISL %d OSL %d: TPOT %.4f ms, roofline %.4f ms (%+.4f%%)", tc.isl, tc.osl, tpot*1e3, want*1e3, 100*dev)
		}
	}
}

// TestPrefixCacheHit sends two prompts sharing an 8-block prefix, one after
// the other: the second's TTFT is lower by exactly the prefill time of the
// cached blocks, and the hit counter rises by their tokens.
func TestPrefixCacheHit(t *testing.T) {
	cfg := preset(t, "llama-3.1-8b-h100").PhysicsOnly()
	c := newCluster(t, cfg)
	const bs, shared, tail = 16, 8 * 16, 900
	first := submit(c, append(ids(0, shared), ids(10_000, tail)...), 4)
	drain(c)
	before := c.Stats()
	start := c.Now()
	second := submit(c, append(ids(0, shared), ids(20_000, tail)...), 4)
	drain(c)
	after := c.Stats()

	ttft1, ttft2 := first.at[0], second.at[0]-start
	if got := second.Info().CachedTokens; got != shared {
		t.Fatalf("second request hit %d cached tokens, want %d", got, shared)
	}
	if hits := after.PrefixHits - before.PrefixHits; hits != shared {
		t.Errorf("prefix_cache_hits rose by %d, want %d", hits, shared)
	}
	if q := after.PrefixQueries - before.PrefixQueries; q != shared+tail {
		t.Errorf("prefix_cache_queries rose by %d, want %d", q, shared+tail)
	}
	// Both prefills are compute-bound single steps, so the saving is the
	// difference of their roofline prefill times.
	full := roofline.PrefillBound(cfg.Model, cfg.GPU, cfg.Precision, cfg.Efficiency, 0, shared+tail)
	rest := roofline.PrefillBound(cfg.Model, cfg.GPU, cfg.Precision, cfg.Efficiency, shared, tail)
	saved := (ttft1 - ttft2).Seconds()
	if math.Abs(saved-(full-rest)) > 2e-9 {
		t.Errorf("TTFT %v then %v: saved %.6f ms, want the cached blocks' prefill time %.6f ms", ttft1, ttft2, saved*1e3, (full-rest)*1e3)
	}
	if saved <= 0 {
		t.Errorf("the cached prefix saved nothing: TTFT %v then %v", ttft1, ttft2)
	}

	// A prompt that is entirely cached still computes its last block
	// partially: vLLM never hits the token it must sample from.
	third := submit(c, append(ids(0, shared), ids(10_000, tail)...), 1)
	drain(c)
	if got, limit := third.Info().CachedTokens, (shared+tail-1)/bs*bs; got != limit {
		t.Errorf("identical prompt hit %d tokens, want %d (whole blocks, last token excluded)", got, limit)
	}

	// Without prefix caching nothing hits.
	off := cfg
	off.PrefixCaching = false
	c2 := newCluster(t, off)
	submit(c2, ids(0, 512), 2)
	drain(c2)
	r := submit(c2, ids(0, 512), 2)
	drain(c2)
	if r.Info().CachedTokens != 0 || c2.Stats().PrefixHits != 0 {
		t.Errorf("prefix caching off, yet %d tokens hit", r.Info().CachedTokens)
	}
}

// smallKV returns a configuration whose KV cache holds about the given
// number of tokens, by reserving the rest of the GPU's memory.
func smallKV(t testing.TB, tokens int) Config {
	cfg := preset(t, "llama-3.1-8b-h100").PhysicsOnly()
	kv := cfg.Model.KVBytesPerToken(cfg.Precision)
	cfg.ReserveBytes = cfg.GPUMemoryUtilization*cfg.GPU.MemoryBytes - cfg.Model.WeightBytes(cfg.Precision) - float64(tokens)*kv
	cfg.MaxModelLen = 2048
	return cfg
}

// TestPreemption fills a small KV cache with requests that outgrow it: the
// newest running requests are preempted and recomputed, every request still
// gets exactly its tokens in order, and usage never exceeds the cache.
func TestPreemption(t *testing.T) {
	cfg := smallKV(t, 4096)
	c := newCluster(t, cfg)
	if got := c.Stats().KVCapacityTokens; got < 4000 || got > 4096 {
		t.Fatalf("KV capacity %d tokens, want about 4096", got)
	}
	var traces []*trace
	for i := range 8 {
		traces = append(traces, submit(c, ids(i*10_000, 500), 400))
	}
	for c.Step() {
		if u := c.Stats().KVUsage; u > 1 {
			t.Fatalf("KV usage %v > 1", u)
		}
	}
	st := c.Stats()
	if st.Preemptions == 0 {
		t.Fatal("8 × 900 tokens in a 4096-token cache ran without preemption")
	}
	preempted := 0
	for i, tr := range traces {
		if len(tr.at) != 400 || !slices.IsSorted(tr.at) {
			t.Errorf("request %d: %d tokens, sorted %v", i, len(tr.at), slices.IsSorted(tr.at))
		}
		if tr.Info().Preemptions > 0 {
			preempted++
		}
	}
	// The oldest request is never the victim while newer ones run.
	if traces[0].Info().Preemptions != 0 {
		t.Errorf("the oldest request was preempted %d times", traces[0].Info().Preemptions)
	}
	if st.Running != 0 || st.Waiting != 0 || st.KVUsage != 0 || st.OpenStreams != 0 {
		t.Errorf("after the run: %+v, want everything released", st)
	}
	t.Logf("%d preemptions over %d requests", st.Preemptions, preempted)
}

// TestChunkedPrefill checks that a prompt longer than the token budget is
// prefilled over several steps, and that decodes of other requests keep
// running between its chunks.
func TestChunkedPrefill(t *testing.T) {
	cfg := preset(t, "llama-3.1-8b-h100").PhysicsOnly()
	c := newCluster(t, cfg)
	short := submit(c, ids(0, 100), 200)
	c.RunUntil(50 * time.Millisecond) // short is decoding
	decoded := len(short.at)
	steps := c.Stats().Steps
	long := submit(c, ids(100_000, 20_000), 1)
	for len(long.at) == 0 && c.Step() {
	}
	// 20,000 tokens at 8,192 per step minus the decode: 3 steps.
	if got := c.Stats().Steps - steps; got < 3 {
		t.Errorf("a 20,000-token prompt was prefilled in %d steps, want at least 3", got)
	}
	if len(short.at)-decoded < 3 {
		t.Errorf("the running request decoded %d tokens during the long prefill, want one per step", len(short.at)-decoded)
	}
}

// TestMaxNumSeqs checks the batch cap: with max_num_seqs 4, four requests
// run and the rest wait.
func TestMaxNumSeqs(t *testing.T) {
	cfg := preset(t, "llama-3.1-8b-h100").PhysicsOnly()
	cfg.MaxNumSeqs = 4
	c := newCluster(t, cfg)
	for i := range 10 {
		submit(c, ids(i*1000, 64), 50)
	}
	maxRunning := 0
	for c.Step() {
		st := c.Stats()
		maxRunning = max(maxRunning, st.Running)
	}
	if maxRunning != 4 {
		t.Errorf("at most %d requests ran at once, want 4", maxRunning)
	}
}

// TestCancelReleases checks that canceled requests, waiting or running,
// free their blocks and stop receiving tokens.
func TestCancelReleases(t *testing.T) {
	c := newCluster(t, preset(t, "llama-3.1-8b-h100"))
	var traces []*trace
	for i := range 5 {
		traces = append(traces, submit(c, ids(i*5000, 3000), 1000))
	}
	c.RunUntil(200 * time.Millisecond)
	if c.Stats().KVUsage == 0 {
		t.Fatal("nothing running after 200ms")
	}
	counts := make([]int, len(traces))
	for i, tr := range traces {
		c.Cancel(tr.Request)
		c.Cancel(tr.Request) // twice is harmless
		counts[i] = len(tr.at)
	}
	drain(c)
	for i, tr := range traces {
		if len(tr.at) != counts[i] {
			t.Errorf("request %d got %d tokens after cancel", i, len(tr.at)-counts[i])
		}
	}
	if st := c.Stats(); st.KVUsage != 0 || st.Running != 0 || st.Waiting != 0 || st.OpenStreams != 0 {
		t.Errorf("after canceling everything: %+v", st)
	}
}

// TestDeterministic runs the same jittered workload twice on the virtual
// clock and requires identical token times: the property tests rely on.
func TestDeterministic(t *testing.T) {
	run := func() []time.Duration {
		cfg := preset(t, "qwen3-0.6b-h200")
		cfg.Replicas = 2
		cfg.Jitter = 0.2
		c := newCluster(t, cfg)
		var all []*trace
		for i := range 40 {
			all = append(all, submit(c, ids((i%5)*700, 300+i), 20+i))
			c.RunUntil(c.Now() + 3*time.Millisecond)
		}
		drain(c)
		var out []time.Duration
		for _, tr := range all {
			out = append(out, tr.at...)
		}
		return out
	}
	a, b := run(), run()
	if !slices.Equal(a, b) {
		t.Fatal("two identical runs delivered tokens at different times")
	}
}

// TestInstant checks tiny-fast's promise: no time passes.
func TestInstant(t *testing.T) {
	c := newCluster(t, preset(t, "tiny-fast"))
	tr := submit(c, ids(0, 1000), 300)
	c.RunUntil(0)
	if len(tr.at) != 300 || tr.at[299] != 0 {
		t.Fatalf("instant preset delivered %d tokens, the last at %v", len(tr.at), tr.at[len(tr.at)-1])
	}
}

// TestDecodeSlowsWithBatchAndContext checks the shape a newcomer should
// see: TPOT rises slowly with batch size and with context.
func TestDecodeSlowsWithBatchAndContext(t *testing.T) {
	cfg := preset(t, "llama-3.1-8b-h100")
	cfg.Jitter = 0
	tpot := func(users, isl int) float64 {
		c := newCluster(t, cfg)
		var all []*trace
		for i := range users {
			all = append(all, submit(c, ids(i*100_000, isl), 200))
		}
		drain(c)
		sum := 0.0
		for _, tr := range all {
			sum += (tr.at[199] - tr.at[0]).Seconds() / 199
		}
		return sum / float64(users) * 1e3
	}
	one, many := tpot(1, 512), tpot(64, 512)
	long := tpot(1, 32_000)
	if !(many > one && many < 3*one) {
		t.Errorf("TPOT at 1 user %.2f ms, at 64 users %.2f ms: want a slow rise", one, many)
	}
	if long <= one {
		t.Errorf("TPOT at 32k context %.2f ms not above 512 context %.2f ms", long, one)
	}
	t.Logf("TPOT: 1 user %.2f ms, 64 users %.2f ms, 1 user at 32k context %.2f ms", one, many, long)
}

// TestValidate checks that impossible configurations are refused with all
// their reasons.
func TestValidate(t *testing.T) {
	cfg := preset(t, "llama-3.1-8b-h100")
	cfg.MaxNumSeqs = 0
	cfg.Efficiency.Bandwidth = 2
	if _, err := New(cfg); err == nil {
		t.Fatal("invalid config accepted")
	} else {
		t.Log(err)
	}
	huge := preset(t, "llama-3.1-8b-h100")
	huge.GPUMemoryUtilization = 0.25
	if _, err := New(huge); err == nil {
		t.Fatal("KV cache smaller than max_model_len accepted")
	}
}

// TestPreemptionKeepsReplyBlocks: a preempted request's blocks, reply
// included, stay in the prefix cache as vLLM V1 leaves them, so its
// readmission recomputes only what was evicted meanwhile. Two requests
// outgrow a 4096-token cache together; the newer is preempted after about
// a thousand reply tokens, the older needs only a block or two more and
// finishes, and the newer comes back finding its prompt and its reply
// except the blocks the older took: at most three blocks to recompute,
// where recomputing the reply would be a thousand tokens.
func TestPreemptionKeepsReplyBlocks(t *testing.T) {
	const prompt, bs = 1000, 16
	cfg := smallKV(t, 4096)
	cfg.MaxModelLen = 2600
	c := newCluster(t, cfg)
	old := submit(c, ids(0, prompt), 1070)
	young := submit(c, ids(100_000, prompt), 1500)
	generatedAt := -1 // young's reply length when it was preempted
	for c.Step() {
		if i := young.Info(); i.Preemptions > 0 && generatedAt < 0 {
			generatedAt = i.Generated
		}
	}
	if old.Info().Preemptions != 0 || young.Info().Preemptions != 1 {
		t.Fatalf("preemptions: old %d, young %d; want 0 and 1", old.Info().Preemptions, young.Info().Preemptions)
	}
	if len(old.at) != 1070 || len(young.at) != 1500 {
		t.Fatalf("delivered %d and %d tokens, want 1070 and 1500", len(old.at), len(young.at))
	}
	found := young.Info().RecachedTokens
	recomputed := prompt + generatedAt - found
	t.Logf("preempted after %d reply tokens; readmission found %d tokens cached and recomputed %d", generatedAt, found, recomputed)
	if generatedAt < 900 {
		t.Fatalf("young was preempted after %d reply tokens; the scenario needs about a thousand", generatedAt)
	}
	if found%bs != 0 || found <= prompt {
		t.Errorf("readmission found %d tokens cached: want whole blocks reaching into the reply (past the %d-token prompt)", found, prompt)
	}
	if recomputed > 3*bs {
		t.Errorf("readmission recomputed %d tokens, want at most three blocks (%d)", recomputed, 3*bs)
	}
	if young.Info().CachedTokens != 0 {
		t.Errorf("young reports %d cached tokens; its own blocks after a preemption are not a client's cache hit", young.Info().CachedTokens)
	}
}
