package telemetry

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
)

const sec = int64(time.Second)

func gaugeSeries(name string, v float64, labels ...string) Series {
	s := Series{Name: name, Type: "gauge", Value: fp(v)}
	if len(labels) > 0 {
		s.Labels = map[string]string{}
		for i := 0; i+1 < len(labels); i += 2 {
			s.Labels[labels[i]] = labels[i+1]
		}
	}
	return s
}

func counterSeries(name string, v float64, labels ...string) Series {
	s := gaugeSeries(name, v, labels...)
	s.Type = "counter"
	return s
}

// histSeries builds a histogram from its finite bounds and cumulative
// counts; the +Inf bucket is the last count.
func histSeries(name string, les, counts []float64, sum float64) Series {
	s := Series{Name: name, Type: "histogram", Sum: fp(sum), Count: fp(counts[len(counts)-1])}
	for i, c := range counts {
		le := math.Inf(1)
		if i < len(les) {
			le = les[i]
		}
		s.Buckets = append(s.Buckets, Bucket{LE: Float(le), Count: Float(c)})
	}
	return s
}

func sample(t int64, round int, target, mapping string, series ...Series) Sample {
	return Sample{TNS: t, Round: round, Phase: metrics.PhaseLoad, Target: target, Kind: KindServer, Mapping: mapping, Series: series}
}

func failed(t int64, round int, target, kind, err string) Sample {
	return Sample{TNS: t, Round: round, Phase: metrics.PhaseLoad, Target: target, Kind: kind, Error: err}
}

func hasNote(ns []string, part string) bool {
	for _, n := range ns {
		if strings.Contains(n, part) {
			return true
		}
	}
	return false
}

// TestReduceGaugesOverTheWindow summarises a gauge over the scrapes inside
// the measured window only.
func TestReduceGaugesOverTheWindow(t *testing.T) {
	var ss []Sample
	for i, v := range []float64{100, 1, 5, 3, 100, 100} {
		ss = append(ss, sample(int64(i)*sec, i, "srv", "vllm", gaugeSeries("vllm:num_requests_running", v)))
	}
	st, gpu, _ := Reduce(ss, ReduceInput{WindowStartNS: sec / 2, WindowEndNS: 4*sec - 1, Interval: time.Second})
	if gpu != nil {
		t.Errorf("GPU figures from an engine without GPU metrics: %+v", gpu)
	}
	g := st.NumRequestsRunning
	if g == nil || g.Mean != 3 || g.Min != 1 || g.Max != 5 || g.Samples != 3 {
		t.Fatalf("running %+v, want mean 3 min 1 max 5 over 3 scrapes", g)
	}
	if st.Scrapes != 3 || st.IntervalS != 1 || st.Mapping != "vllm" {
		t.Errorf("scrapes %d interval %v mapping %q", st.Scrapes, st.IntervalS, st.Mapping)
	}
	if st.KVCacheUsage != nil || st.PromptTokens != nil || st.TTFT != nil {
		t.Error("figures the server never published are not absent")
	}
	if !hasNote(st.Notes, "vllm: not published: num_requests_waiting, kv_cache_usage") {
		t.Errorf("notes %q do not say what vLLM did not publish", st.Notes)
	}
}

// TestReduceCounterAcrossAReset reads a counter's increase from the last
// scrape at or before the window's start to the first at or after its end,
// a reset counted from zero.
func TestReduceCounterAcrossAReset(t *testing.T) {
	var ss []Sample
	for i, v := range []float64{100, 150, 200, 20, 70, 90, 500} {
		ss = append(ss, sample(int64(i)*sec, i, "srv", "vllm", counterSeries("vllm:prompt_tokens_total", v)))
	}
	st, _, _ := Reduce(ss, ReduceInput{WindowStartNS: sec + sec/2, WindowEndNS: 4*sec + sec/2})
	// Base: t=1 s (150). End: t=5 s (90). 150→200 +50, 200→20 reset +20,
	// 20→70 +50, 70→90 +20.
	if st.PromptTokens == nil || *st.PromptTokens != 140 {
		t.Fatalf("prompt tokens %v, want 140", st.PromptTokens)
	}
	if !hasNote(st.Notes, "vllm:prompt_tokens_total went down") {
		t.Errorf("the reset is not noted: %q", st.Notes)
	}
}

// TestReduceHistogramQuantiles checks a histogram's increase and its
// quantiles against ones worked by hand with histogram_quantile's rule.
func TestReduceHistogramQuantiles(t *testing.T) {
	les := []float64{0.1, 0.2, 0.5}
	name := "vllm:time_to_first_token_seconds"
	ss := []Sample{
		sample(0, 0, "srv", "vllm", histSeries(name, les, []float64{0, 0, 0, 0}, 0)),
		sample(sec, 1, "srv", "vllm", histSeries(name, les, []float64{1, 2, 3, 3}, 0.6)),
		sample(3*sec, 2, "srv", "vllm", histSeries(name, les, []float64{2, 6, 12, 13}, 3.0)),
		sample(5*sec, 3, "srv", "vllm", histSeries(name, les, []float64{3, 12, 22, 24}, 7.3)),
	}
	st, _, _ := Reduce(ss, ReduceInput{WindowStartNS: sec, WindowEndNS: 5 * sec})
	d := st.TTFT
	if d == nil {
		t.Fatal("no TTFT")
	}
	// Increase t=1 s → 5 s: buckets 2, 10, 19, 21 (+Inf); sum 6.7 s.
	// p50: rank 10.5 in (0.2, 0.5] holding 9 from 10: 0.2 + 0.3 × 0.5/9.
	// p90: rank 18.9: 0.2 + 0.3 × 8.9/9. p95 and p99 fall in +Inf: the
	// highest finite bound.
	want := metrics.ServerDist{Count: 21, Mean: 6.7 / 21 * 1000,
		P50: (0.2 + 0.3*0.5/9) * 1000, P90: (0.2 + 0.3*8.9/9) * 1000, P95: 500, P99: 500}
	if !near(d.Count, want.Count) || !near(d.Mean, want.Mean) || !near(d.P50, want.P50) ||
		!near(d.P90, want.P90) || !near(d.P95, want.P95) || !near(d.P99, want.P99) {
		t.Errorf("TTFT %+v\nwant %+v", *d, want)
	}
	wantB := []metrics.Bucket{{LeMS: 100, Count: 2}, {LeMS: 200, Count: 10}, {LeMS: 500, Count: 19}}
	if fmt.Sprint(d.Buckets) != fmt.Sprint(wantB) {
		t.Errorf("buckets %v, want %v (the +Inf one is Count)", d.Buckets, wantB)
	}

	// The first bucket interpolates from zero.
	if got := quantile(0.5, []float64{0.1, math.Inf(1)}, []float64{10, 10}); !near(got, 0.05) {
		t.Errorf("p50 in the first bucket %v, want 0.05", got)
	}
	if got := quantile(0.5, []float64{0.1, math.Inf(1)}, []float64{0, 0}); !math.IsNaN(got) {
		t.Errorf("quantile of nothing %v, want NaN", got)
	}
}

// TestReduceReplicas sums running requests, counters and histograms over
// two server targets per round, averages KV usage, and leaves out a round
// in which one of them failed.
func TestReduceReplicas(t *testing.T) {
	les := []float64{0.1}
	ttft := "vllm:time_to_first_token_seconds"
	var ss []Sample
	for i := range 4 {
		ti := int64(i) * sec
		ss = append(ss, sample(ti, i, "a", "vllm",
			gaugeSeries("vllm:num_requests_running", float64(i+1)),
			gaugeSeries("vllm:kv_cache_usage_perc", 0.2),
			counterSeries("vllm:generation_tokens_total", float64(10*i)),
			histSeries(ttft, les, []float64{float64(i), float64(2 * i)}, float64(i))))
		if i == 2 {
			ss = append(ss, failed(ti, i, "b", KindServer, "HTTP 503 Service Unavailable"))
			continue
		}
		ss = append(ss, sample(ti+1000, i, "b", "vllm",
			gaugeSeries("vllm:num_requests_running", float64(10*(i+1))),
			gaugeSeries("vllm:kv_cache_usage_perc", 0.4),
			counterSeries("vllm:generation_tokens_total", float64(100*i)),
			histSeries(ttft, les, []float64{float64(i), float64(2 * i)}, float64(i))))
	}
	st, _, pts := Reduce(ss, ReduceInput{WindowStartNS: sec / 2, WindowEndNS: 3*sec - sec/2})
	// Rounds 1 and 2 are inside the window; round 2 lacks b.
	if g := st.NumRequestsRunning; g == nil || g.Mean != 22 || g.Samples != 1 {
		t.Errorf("running %+v, want round 1 only: 2 + 20", g)
	}
	if g := st.KVCacheUsage; g == nil || !near(g.Mean, 0.3) {
		t.Errorf("KV usage %+v, want the mean 0.3", g)
	}
	// a: 0 → 30 (t=0 → t=3 s); b: 0 → 300, its failed round skipped.
	if st.GenerationTokens == nil || *st.GenerationTokens != 330 {
		t.Errorf("generation tokens %v, want 330", st.GenerationTokens)
	}
	if st.TTFT == nil || st.TTFT.Count != 12 {
		t.Errorf("TTFT %+v, want 6 + 6 observations", st.TTFT)
	}
	if st.Failed != 1 || !hasNote(st.Notes, "b: 1 of 4 scrapes failed, the first: HTTP 503") {
		t.Errorf("failed %d, notes %q", st.Failed, st.Notes)
	}
	if len(st.Sources) != 2 {
		t.Errorf("sources %v", st.Sources)
	}
	// The series over the whole row: round 2, with a replica missing,
	// has no figure and no point.
	if len(pts) != 3 || pts[0].Running == nil || *pts[0].Running != 11 || pts[2].TS != 3 || *pts[2].Running != 44 {
		t.Errorf("points %+v", pts)
	}
}

// TestReduceTokenCheck compares the counters' whole-row increase with the
// records: equal, within the tolerance, beyond it, and not comparable.
func TestReduceTokenCheck(t *testing.T) {
	ss := []Sample{
		sample(0, 0, "srv", "vllm", counterSeries("vllm:prompt_tokens_total", 7000), counterSeries("vllm:generation_tokens_total", 3000)),
		sample(sec, 1, "srv", "vllm", counterSeries("vllm:prompt_tokens_total", 7600), counterSeries("vllm:generation_tokens_total", 3300)),
		sample(2*sec, 2, "srv", "vllm", counterSeries("vllm:prompt_tokens_total", 8000), counterSeries("vllm:generation_tokens_total", 3500)),
	}
	in := func(rec RecordTotals) ReduceInput {
		return ReduceInput{WindowStartNS: sec, WindowEndNS: 2 * sec, Records: &rec}
	}
	cases := []struct {
		name     string
		rec      RecordTotals
		mismatch bool
		compared bool
		note     string
	}{
		{"equal", RecordTotals{Prompt: 1000, Generation: 500, Requests: 10}, false, true, ""},
		{"within tolerance", RecordTotals{Prompt: 1000, Generation: 495, Requests: 10}, false, true, ""},
		{"beyond", RecordTotals{Prompt: 1000, Generation: 450, Requests: 10}, true, true, "the servers counted 500 generation tokens, the records 450"},
		{"unknown", RecordTotals{Prompt: 900, Generation: 450, Requests: 10, Unknown: 1}, false, false, "1 of 10 requests have no server usage"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, _, _ := Reduce(ss, in(c.rec))
			tc := st.Tokens
			if tc == nil {
				t.Fatal("no token check")
			}
			if tc.Mismatch != c.mismatch || tc.Prompt.Compared != c.compared || tc.Generation.Compared != c.compared {
				t.Errorf("%+v", *tc)
			}
			if tc.Prompt.Server != 1000 || tc.Generation.Server != 500 {
				t.Errorf("server counts %v %v, want the whole row's 1000 and 500", tc.Prompt.Server, tc.Generation.Server)
			}
			if c.note != "" && !hasNote(tc.Notes, c.note) {
				t.Errorf("notes %q lack %q", tc.Notes, c.note)
			}
			if c.name == "beyond" && !near(tc.Generation.Diff, 50.0/450) {
				t.Errorf("diff %v", tc.Generation.Diff)
			}
		})
	}

	// An older llama.cpp's prompt counter leaves out the tokens a slot
	// reused: given, not compared.
	ll := []Sample{
		sample(0, 0, "srv", "llama.cpp", counterSeries("llamacpp:prompt_tokens_total", 0), counterSeries("llamacpp:tokens_predicted_total", 0)),
		sample(sec, 1, "srv", "llama.cpp", counterSeries("llamacpp:prompt_tokens_total", 10), counterSeries("llamacpp:tokens_predicted_total", 50)),
	}
	st, _, _ := Reduce(ll, in(RecordTotals{Prompt: 1000, Generation: 50, Requests: 1}))
	if tc := st.Tokens; tc.Prompt.Compared || tc.Prompt.Server != 10 || !tc.Generation.Compared || tc.Mismatch ||
		!hasNote(tc.Notes, "prompt tokens not checked") {
		t.Errorf("older llama.cpp check %+v", *tc)
	}

	// A llama.cpp that counts the reused tokens apart: evaluated plus
	// reused are every prompt token, compared with the records, and a
	// shortfall in either is caught.
	llCached := func(evaluated, reused float64) []Sample {
		return []Sample{
			sample(0, 0, "srv", "llama.cpp", counterSeries("llamacpp:prompt_tokens_total", 0),
				counterSeries("llamacpp:prompt_tokens_cached_total", 0), counterSeries("llamacpp:tokens_predicted_total", 0)),
			sample(3*sec, 1, "srv", "llama.cpp", counterSeries("llamacpp:prompt_tokens_total", evaluated),
				counterSeries("llamacpp:prompt_tokens_cached_total", reused), counterSeries("llamacpp:tokens_predicted_total", 50)),
		}
	}
	st, _, _ = Reduce(llCached(700, 300), in(RecordTotals{Prompt: 1000, Generation: 50, Requests: 1}))
	if tc := st.Tokens; !tc.Prompt.Compared || tc.Prompt.Server != 1000 || tc.Mismatch {
		t.Errorf("llama.cpp with cached counter: check %+v", *tc)
	}
	if st.PrefixCacheHitRate == nil || !near(*st.PrefixCacheHitRate, 0.3) {
		t.Errorf("llama.cpp prefix-cache hit rate %v, want 300 reused of 1000", st.PrefixCacheHitRate)
	}
	st, _, _ = Reduce(llCached(700, 0), in(RecordTotals{Prompt: 1000, Generation: 50, Requests: 1}))
	if tc := st.Tokens; !tc.Prompt.Compared || !tc.Mismatch {
		t.Errorf("llama.cpp missing 300 prompt tokens: check %+v", *tc)
	}
}

// TestReduceFailingEndpoint keeps a dead endpoint's row: counted, noted,
// every figure absent, no error.
func TestReduceFailingEndpoint(t *testing.T) {
	var ss []Sample
	for i := range 3 {
		ss = append(ss, failed(int64(i)*sec, i, "srv", KindServer, "dial tcp 127.0.0.1:1: connect: connection refused"),
			failed(int64(i)*sec, i, "dcgm", KindGPU, "HTTP 404 Not Found"))
	}
	st, gpu, pts := Reduce(ss, ReduceInput{WindowStartNS: 0, WindowEndNS: 3 * sec, Records: &RecordTotals{Prompt: 10, Requests: 1}})
	if st == nil || st.Failed != 3 || st.Scrapes != 0 || st.NumRequestsRunning != nil || st.PromptTokens != nil {
		t.Fatalf("server %+v", st)
	}
	if !hasNote(st.Notes, "srv: every scrape failed (3), the first: dial tcp") {
		t.Errorf("notes %q", st.Notes)
	}
	if st.Tokens == nil || st.Tokens.Prompt.Compared || st.Tokens.Mismatch {
		t.Errorf("tokens %+v", st.Tokens)
	}
	if gpu == nil || gpu.Failed != 3 || gpu.GPUs != 0 || !hasNote(gpu.Notes, "dcgm: every scrape failed") {
		t.Errorf("gpu %+v", gpu)
	}
	if pts != nil {
		t.Errorf("points from failed scrapes: %+v", pts)
	}

	st, gpu, _ = Reduce(nil, ReduceInput{})
	if st != nil || gpu != nil {
		t.Error("figures without any target")
	}
}

func dcgmSample(t int64, round int, target, kind string, gpus map[string][4]float64) Sample {
	s := Sample{TNS: t, Round: round, Phase: metrics.PhaseLoad, Target: target, Kind: kind, Mapping: mappingDCGM}
	for id, v := range gpus {
		l := []string{"gpu", id, "UUID", "GPU-" + id, "modelName", "NVIDIA H100 80GB HBM3"}
		s.Series = append(s.Series,
			gaugeSeries(dcgmGPUUtil, v[0], l...),
			gaugeSeries(dcgmPower, v[1], l...),
			gaugeSeries(dcgmFBUsed, v[2], l...),
			counterSeries(dcgmEnergy, v[3], l...))
	}
	return s
}

// TestReduceGPUs reads DCGM figures per GPU and over GPUs: utilization
// over GPUs and scrapes, power summed per round, energy from the counter,
// memory in GB, GPUs in the order of their ids.
func TestReduceGPUs(t *testing.T) {
	ss := []Sample{
		dcgmSample(0, 0, "dcgm", KindGPU, map[string][4]float64{"2": {0, 100, 1000, 0}, "10": {0, 100, 1000, 0}}),
		dcgmSample(sec, 1, "dcgm", KindGPU, map[string][4]float64{"2": {90, 400, 76000, 1e6}, "10": {50, 300, 1000, 2e6}}),
		dcgmSample(2*sec, 2, "dcgm", KindGPU, map[string][4]float64{"2": {70, 500, 76000, 2e6}, "10": {30, 200, 1000, 3e6}}),
		dcgmSample(3*sec, 3, "dcgm", KindGPU, map[string][4]float64{"2": {0, 100, 1000, 3e6}, "10": {0, 100, 1000, 4e6}}),
	}
	_, g, pts := Reduce(ss, ReduceInput{WindowStartNS: sec, WindowEndNS: 2 * sec})
	if g == nil || g.GPUs != 2 || g.Scrapes != 2 {
		t.Fatalf("%+v", g)
	}
	if u := g.Utilization; u == nil || !near(u.Mean, 0.6) || !near(u.Max, 0.9) || !near(u.Min, 0.3) || u.Samples != 4 {
		t.Errorf("utilization %+v, want mean 0.6 over 2 GPUs × 2 scrapes", u)
	}
	if p := g.PowerW; p == nil || p.Mean != 700 || p.Samples != 2 {
		t.Errorf("power %+v, want 700 W together in each round", p)
	}
	// Energy from t=1 s to t=2 s: 1e6 mJ on each GPU.
	if g.EnergyJ == nil || *g.EnergyJ != 2000 {
		t.Errorf("energy %v J, want 2000", g.EnergyJ)
	}
	if m := g.MemoryUsedGB; m == nil || !near(m.Max, 76000*1048576/1e9) {
		t.Errorf("memory %+v, want the fullest GPU's 79.69 GB", m)
	}
	if len(g.PerGPU) != 2 || g.PerGPU[0].ID != "2" || g.PerGPU[1].ID != "10" || g.PerGPU[0].Model != "NVIDIA H100 80GB HBM3" {
		t.Fatalf("per GPU %+v", g.PerGPU)
	}
	if u := g.PerGPU[0].Utilization; u == nil || !near(u.Mean, 0.8) {
		t.Errorf("GPU 2 utilization %+v", u)
	}
	if len(pts) != 4 || pts[1].PowerW == nil || *pts[1].PowerW != 700 || !near(*pts[1].GPUUtilization, 0.7) {
		t.Errorf("points %+v", pts)
	}
}

// TestReduceGPUNamesOnAServerTarget classifies by metric name: the built-in
// server publishes DCGM names beside its engine's on one endpoint.
func TestReduceGPUNamesOnAServerTarget(t *testing.T) {
	var ss []Sample
	for i := range 3 {
		s := dcgmSample(int64(i)*sec, i, "sim", KindServer, map[string][4]float64{"0": {50, 300, 2000, float64(i) * 1e6}})
		s.Mapping = "infermatrix-sim"
		s.Series = append(s.Series, gaugeSeries("vllm:num_requests_running", 2))
		ss = append(ss, s)
	}
	st, g, _ := Reduce(ss, ReduceInput{WindowStartNS: 0, WindowEndNS: 2 * sec})
	if st == nil || st.Mapping != "infermatrix-sim" || st.NumRequestsRunning == nil {
		t.Fatalf("server %+v", st)
	}
	if g == nil || g.GPUs != 1 || g.Sources[0] != "sim" || g.EnergyJ == nil || *g.EnergyJ != 2000 {
		t.Fatalf("gpu %+v", g)
	}
}

// TestReducePointsPhasesAndThinning keeps each round's phase and thins a
// long row evenly, its first and last rounds kept.
func TestReducePointsPhasesAndThinning(t *testing.T) {
	n := 3000
	var ss []Sample
	for i := range n {
		s := sample(int64(i)*sec/10, i, "srv", "vllm", gaugeSeries("vllm:num_requests_running", float64(i)))
		s.Phase = metrics.PhaseWarmup
		if i >= 100 {
			s.Phase = metrics.PhaseLoad
		}
		ss = append(ss, s)
	}
	_, _, pts := Reduce(ss, ReduceInput{WindowStartNS: 0, WindowEndNS: int64(n) * sec})
	if len(pts) != MaxPoints {
		t.Fatalf("%d points, want %d", len(pts), MaxPoints)
	}
	if *pts[0].Running != 0 || *pts[len(pts)-1].Running != float64(n-1) || pts[0].Phase != metrics.PhaseWarmup || pts[len(pts)-1].Phase != metrics.PhaseLoad {
		t.Errorf("first %+v last %+v", pts[0], pts[len(pts)-1])
	}
	if pts[1].TS != 0.2 {
		t.Errorf("second point at %v s, want 0.2 s (every third round of %d)", pts[1].TS, n)
	}
}

// TestReduceGapsAndNoWindow checks the client-minus-server gaps, and that a
// row without a measured window keeps its notes and token check but no
// window figures.
func TestReduceGapsAndNoWindow(t *testing.T) {
	les := []float64{0.1, 0.2}
	name := "vllm:time_to_first_token_seconds"
	ss := []Sample{
		sample(0, 0, "srv", "vllm", histSeries(name, les, []float64{0, 0, 0}, 0), counterSeries("vllm:prompt_tokens_total", 0)),
		sample(sec, 1, "srv", "vllm", histSeries(name, les, []float64{0, 10, 10}, 1.5), counterSeries("vllm:prompt_tokens_total", 100)),
	}
	client := &metrics.Metrics{TTFT: metrics.Dist{Count: 10, Mean: 160, P50: 170, P95: 210}}
	st, _, _ := Reduce(ss, ReduceInput{WindowStartNS: 0, WindowEndNS: sec, Client: client})
	if st.TTFTGap == nil || !near(st.TTFTGap.Mean, 10) || !near(st.TTFTGap.P50, 20) || !near(st.TTFTGap.P95, 15) || st.TPOTGap != nil {
		t.Errorf("gaps %+v %+v (server TTFT %+v)", st.TTFTGap, st.TPOTGap, st.TTFT)
	}
	st, _, _ = Reduce(ss, ReduceInput{Records: &RecordTotals{Prompt: 100, Requests: 1}})
	if st.TTFT != nil || st.PromptTokens != nil || !hasNote(st.Notes, "no measured window") || !st.Tokens.Prompt.Compared {
		t.Errorf("no window: %+v", st)
	}
}

func nan() float64 { return math.NaN() }
