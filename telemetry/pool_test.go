package telemetry

import (
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
)

func f64(v float64) *float64 { return &v }

// TestPoolTrials pools a repeated row: counters summed (absent when one
// trial lacks them), gauges weighted by samples, histogram buckets added
// and their quantiles read again, a token mismatch in any trial kept.
func TestPoolTrials(t *testing.T) {
	a := &metrics.ServerTelemetry{
		Sources: []string{"srv"}, Mapping: "vllm", Scrapes: 3, IntervalS: 1,
		NumRequestsRunning: &metrics.Gauge{Mean: 3, Min: 1, Max: 5, Samples: 3},
		PromptTokens:       f64(140), Preemptions: f64(2),
		PrefixCacheQueries: f64(100), PrefixCacheHits: f64(25),
		TTFT: &metrics.ServerDist{Count: 21, Mean: 6.7 / 21 * 1000,
			Buckets: []metrics.Bucket{{LeMS: 100, Count: 2}, {LeMS: 200, Count: 10}, {LeMS: 500, Count: 19}}},
		Tokens: &metrics.CounterCheck{Prompt: metrics.CounterDiff{Server: 100, Records: 100, Compared: true},
			Generation: metrics.CounterDiff{Server: 50, Records: 50, Compared: true}},
		Notes: []string{"vllm: not published: queue_time_ms"},
	}
	b := &metrics.ServerTelemetry{
		Sources: []string{"srv"}, Mapping: "vllm", Scrapes: 1, Failed: 1, IntervalS: 1,
		NumRequestsRunning: &metrics.Gauge{Mean: 7, Min: 7, Max: 7, Samples: 1},
		PromptTokens:       f64(10),
		PrefixCacheQueries: f64(100), PrefixCacheHits: f64(75),
		TTFT: &metrics.ServerDist{Count: 10, Mean: 300,
			Buckets: []metrics.Bucket{{LeMS: 100, Count: 1}, {LeMS: 200, Count: 5}, {LeMS: 500, Count: 9}}},
		Tokens: &metrics.CounterCheck{Prompt: metrics.CounterDiff{Server: 110, Records: 100, Compared: true},
			Generation: metrics.CounterDiff{Server: 40, Records: 50, Compared: true}, Mismatch: true},
		Notes: []string{"vllm: not published: queue_time_ms", "srv: 1 of 2 scrapes failed, the first: HTTP 503"},
	}
	ga := &metrics.GPUTelemetry{Sources: []string{"dcgm"}, GPUs: 1, Scrapes: 3, EnergyJ: f64(1000),
		PerGPU: []metrics.GPUDevice{{ID: "0", UUID: "GPU-0", Source: "dcgm", Model: "H100", GPUGauges: metrics.GPUGauges{Utilization: &metrics.Gauge{Mean: 0.5, Min: 0.4, Max: 0.6, Samples: 3}}}}, GPUGauges: metrics.GPUGauges{Utilization: &metrics.Gauge{Mean: 0.5, Min: 0.4, Max: 0.6, Samples: 3}}}
	gb := &metrics.GPUTelemetry{Sources: []string{"dcgm"}, GPUs: 1, Scrapes: 1, EnergyJ: f64(500),
		PerGPU: []metrics.GPUDevice{{ID: "0", UUID: "GPU-0", Source: "dcgm", Model: "H100", GPUGauges: metrics.GPUGauges{Utilization: &metrics.Gauge{Mean: 0.9, Min: 0.9, Max: 0.9, Samples: 1}}}}, GPUGauges: metrics.GPUGauges{Utilization: &metrics.Gauge{Mean: 0.9, Min: 0.9, Max: 0.9, Samples: 1}}}
	st, g := Pool([]metrics.RowSummary{{Server: a, GPU: ga}, {Server: b, GPU: gb}})

	if r := st.NumRequestsRunning; r == nil || r.Mean != 4 || r.Min != 1 || r.Max != 7 || r.Samples != 4 {
		t.Errorf("running %+v, want (3×3 + 7×1)/4", r)
	}
	if st.PromptTokens == nil || *st.PromptTokens != 150 || st.Preemptions != nil {
		t.Errorf("prompt %v preemptions %v, want 150 and absent", st.PromptTokens, st.Preemptions)
	}
	if st.PrefixCacheHitRate == nil || *st.PrefixCacheHitRate != 0.5 {
		t.Errorf("hit rate %v, want 100/200", st.PrefixCacheHitRate)
	}
	// Buckets 3, 15, 28 and 31 in all: p50 at rank 15.5 in (200, 500] ms.
	d := st.TTFT
	if d == nil || d.Count != 31 || !near(d.Mean, (6.7*1000+3000)/31) || !near(d.P50, 200+300*0.5/13) || d.P99 != 500 {
		t.Errorf("TTFT %+v", d)
	}
	if len(d.Buckets) != 3 || d.Buckets[2].Count != 28 {
		t.Errorf("buckets %v", d.Buckets)
	}
	if st.Scrapes != 4 || st.Failed != 1 || st.Mapping != "vllm" || len(st.Sources) != 1 || len(st.Notes) != 2 {
		t.Errorf("pooled %+v", st)
	}
	tc := st.Tokens
	if tc == nil || !tc.Mismatch || tc.Prompt.Server != 210 || tc.Prompt.Records != 200 || !near(tc.Prompt.Diff, 0.05) {
		t.Errorf("tokens %+v", tc)
	}
	if st.TTFTGap != nil {
		t.Error("a pooled gap without the pooled client figures")
	}

	if g == nil || g.EnergyJ == nil || *g.EnergyJ != 1500 || g.GPUs != 1 || g.Scrapes != 4 {
		t.Fatalf("gpu %+v", g)
	}
	if u := g.Utilization; u == nil || !near(u.Mean, 0.6) || u.Samples != 4 {
		t.Errorf("utilization %+v, want (0.5×3 + 0.9)/4", u)
	}
	if len(g.PerGPU) != 1 || !near(g.PerGPU[0].Utilization.Mean, 0.6) || g.PerGPU[0].Model != "H100" {
		t.Errorf("per GPU %+v", g.PerGPU)
	}

	// Different buckets cannot be added; trials without telemetry are
	// noted; nothing at all pools to nothing.
	b.TTFT.Buckets[0].LeMS = 50
	st, _ = Pool([]metrics.RowSummary{{Server: a}, {Server: b}, {}})
	if st.TTFT != nil || !hasNote(st.Notes, "1 of 3 trials have no server telemetry") {
		t.Errorf("TTFT %+v notes %q", st.TTFT, st.Notes)
	}
	if st, g := Pool([]metrics.RowSummary{{}, {}}); st != nil || g != nil {
		t.Error("figures pooled from nothing")
	}
	if poolGauge([]*metrics.Gauge{nil, {Samples: 0}}) != nil {
		t.Error("a gauge pooled from no samples")
	}
}
