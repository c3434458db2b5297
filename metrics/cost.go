package metrics

import (
	"math"
	"reflect"
)

// CostName is the name under which rules read a row's cost figures
// (RowSummary.Cost): cost.usd_per_million_output_tokens.
const CostName = "cost"

// Pricing is what the deployment costs, as the experiment's cost section
// resolves it (schema's CostPlan): USDPerHour for the whole server (0 when
// no price is set) and the GPUs it runs on (at least 1), which throughput
// per GPU divides by whether or not a price is set.
type Pricing struct {
	USDPerHour float64
	GPUs       int
}

// Cost is a row's cost over its measured window: the server's price per
// hour turned into a price per token by the row's throughputs. A figure
// whose throughput is zero (no token came back) is absent, never infinite.
type Cost struct {
	USDPerHour float64 `json:"usd_per_hour"`
	GPUs       int     `json:"gpus"`
	// USDPerMillionOutputTokens is usd_per_hour / (output tok/s × 3600) ×
	// 10⁶: what a million generated tokens cost at this row's load.
	USDPerMillionOutputTokens *float64 `json:"usd_per_million_output_tokens,omitempty"`
	// USDPerMillionTotalTokens is the same over prompt and output tokens.
	USDPerMillionTotalTokens *float64 `json:"usd_per_million_total_tokens,omitempty"`
	// OutputTokensPerUSD is output tok/s × 3600 / usd_per_hour.
	OutputTokensPerUSD *float64 `json:"output_tokens_per_usd,omitempty"`
}

// Price sets rs's output tokens per second per GPU and, when p has a price,
// its Cost, from its throughputs over the measured window. Summaries call
// it (Aggregator.Summary, through Options.Pricing), so a row summarised
// live, pooled from trials or rebuilt from its records has the same
// figures.
func Price(rs *RowSummary, p Pricing) {
	gpus := max(p.GPUs, 1)
	rs.Throughput.OutputTokensPerSPerGPU = rs.Throughput.OutputTokensPerS / float64(gpus)
	rs.Cost = nil
	if p.USDPerHour <= 0 || math.IsNaN(p.USDPerHour) || math.IsInf(p.USDPerHour, 0) {
		return
	}
	c := &Cost{USDPerHour: p.USDPerHour, GPUs: gpus}
	if out := rs.Throughput.OutputTokensPerS; out > 0 {
		c.USDPerMillionOutputTokens = costPtr(p.USDPerHour / (out * 3600) * 1e6)
		c.OutputTokensPerUSD = costPtr(out * 3600 / p.USDPerHour)
	}
	if tot := rs.Throughput.TotalTokensPerS; tot > 0 {
		c.USDPerMillionTotalTokens = costPtr(p.USDPerHour / (tot * 3600) * 1e6)
	}
	rs.Cost = c
}

func costPtr(v float64) *float64 { return &v }

// CostEnv is a row's cost as rules read it: "cost.usd_per_million_output_tokens
// < 0.5". A figure the row lacks (no price, or no tokens) is NaN and listed
// by RowEnv.EmptyMetrics, so a rule on it cannot pass on nothing.
type CostEnv struct {
	USDPerHour                float64 `expr:"usd_per_hour"`
	GPUs                      float64 `expr:"gpus"`
	USDPerMillionOutputTokens float64 `expr:"usd_per_million_output_tokens"`
	USDPerMillionTotalTokens  float64 `expr:"usd_per_million_total_tokens"`
	OutputTokensPerUSD        float64 `expr:"output_tokens_per_usd"`

	missing []string
	all     bool
}

// newCostEnv builds what rules read of a row's cost; c may be nil.
func newCostEnv(c *Cost) CostEnv {
	nan := math.NaN()
	if c == nil {
		return CostEnv{USDPerHour: nan, GPUs: nan, USDPerMillionOutputTokens: nan, USDPerMillionTotalTokens: nan,
			OutputTokensPerUSD: nan, all: true}
	}
	var b envBuilder
	return CostEnv{
		USDPerHour:                c.USDPerHour,
		GPUs:                      float64(c.GPUs),
		USDPerMillionOutputTokens: b.scalar("usd_per_million_output_tokens", c.USDPerMillionOutputTokens),
		USDPerMillionTotalTokens:  b.scalar("usd_per_million_total_tokens", c.USDPerMillionTotalTokens),
		OutputTokensPerUSD:        b.scalar("output_tokens_per_usd", c.OutputTokensPerUSD),
		missing:                   b.missing,
	}
}

// filled returns the cost environment with every missing figure at v.
func (e CostEnv) filled(v float64) CostEnv {
	fillNaN(reflect.ValueOf(&e).Elem(), v)
	return e
}

// CostUses lists where an expression reads cost.*, directly, through
// rows.<id> in a hypothesis, or through baseline, so that loading can
// refuse a rule on cost in a file that sets no price: it could never be
// judged.
func CostUses(src string) []NameUse { return sectionUses(src, CostName) }
