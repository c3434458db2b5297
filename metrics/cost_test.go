package metrics

import (
	"math"
	"slices"
	"testing"
)

// TestPrice: the cost figures are the arithmetic of the docs from the
// row's throughputs and the price, throughput per GPU divides by the GPUs
// with or without a price, and a row that produced no tokens has no price
// per token rather than an infinite one.
func TestPrice(t *testing.T) {
	rs := RowSummary{Throughput: Throughput{OutputTokensPerS: 2000, TotalTokensPerS: 10000}}
	Price(&rs, Pricing{GPUs: 4})
	if rs.Cost != nil || rs.Throughput.OutputTokensPerSPerGPU != 500 {
		t.Fatalf("no price: cost %+v, per GPU %v; want none, 500", rs.Cost, rs.Throughput.OutputTokensPerSPerGPU)
	}
	Price(&rs, Pricing{USDPerHour: 10, GPUs: 4})
	c := rs.Cost
	if c == nil || c.USDPerHour != 10 || c.GPUs != 4 {
		t.Fatalf("cost %+v; want 10/h over 4 GPUs", c)
	}
	// 2000 tok/s is 7.2M tokens an hour: $10 / 7.2 per million.
	for _, f := range []struct {
		name string
		got  *float64
		want float64
	}{
		{"usd_per_million_output_tokens", c.USDPerMillionOutputTokens, 10 / 7.2},
		{"usd_per_million_total_tokens", c.USDPerMillionTotalTokens, 10 / 36.0},
		{"output_tokens_per_usd", c.OutputTokensPerUSD, 720000},
	} {
		if f.got == nil || math.Abs(*f.got-f.want) > 1e-9*f.want {
			t.Errorf("%s = %v; want %v", f.name, f.got, f.want)
		}
	}
	env := NewRowEnv(&rs)
	if env.Cost.USDPerMillionOutputTokens != *c.USDPerMillionOutputTokens || slices.ContainsFunc(env.EmptyMetrics(), func(s string) bool { return s == "cost" }) {
		t.Errorf("env cost %+v, empty %v", env.Cost, env.EmptyMetrics())
	}

	idle := RowSummary{}
	Price(&idle, Pricing{USDPerHour: 10})
	if idle.Cost == nil || idle.Cost.USDPerMillionOutputTokens != nil || idle.Cost.OutputTokensPerUSD != nil || idle.Cost.USDPerMillionTotalTokens != nil {
		t.Fatalf("idle row's cost %+v; want the price and no per-token figures", idle.Cost)
	}
	env = NewRowEnv(&idle)
	if !math.IsNaN(env.Cost.USDPerMillionOutputTokens) || !slices.Contains(env.EmptyMetrics(), "cost.usd_per_million_output_tokens") {
		t.Errorf("idle env cost %+v, empty %v; want NaN and listed", env.Cost, env.EmptyMetrics())
	}
	if f := env.Filled(math.Inf(1)); !math.IsInf(f.Cost.USDPerMillionOutputTokens, 1) {
		t.Errorf("Filled(+Inf) cost %+v", f.Cost)
	}
	if !slices.Contains(NewRowEnv(&RowSummary{}).EmptyMetrics(), "cost") {
		t.Error("a row without a price does not list cost as missing")
	}
}

// TestCostUses: a cost figure is found wherever a rule reads it.
func TestCostUses(t *testing.T) {
	got := CostUses("cost.usd_per_hour > 1 && rows.a.cost.gpus > 0 || baseline.cost.usd_per_hour > 0 || throughput.output_tokens_per_s_per_gpu > 0")
	var texts []string
	for _, u := range got {
		texts = append(texts, u.Text)
	}
	if want := []string{"cost", "rows.a.cost", "baseline.cost"}; !slices.Equal(texts, want) {
		t.Errorf("CostUses = %v; want %v", texts, want)
	}
}
