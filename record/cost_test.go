package record

import (
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/validity"
	"github.com/infermatrix/infermatrix/verdict"
)

// TestCostRanking: the accepted rows (valid, passing their rules) are
// ranked by price per million output tokens, cheapest first; a failing or
// invalid row is shown but not ranked, however cheap; and an unpriced run
// has no Cost section.
func TestCostRanking(t *testing.T) {
	row := func(id string, outPerS float64) metrics.RowSummary {
		rs := metrics.RowSummary{ID: id, Status: metrics.RowComplete,
			Throughput: metrics.Throughput{OutputTokensPerS: outPerS, TotalTokensPerS: 2 * outPerS}}
		metrics.Price(&rs, metrics.Pricing{USDPerHour: 3.6, GPUs: 1})
		return rs
	}
	// $3.60 an hour at 1000 tok/s is $1 per million output tokens.
	sum := &metrics.Summary{Rows: []metrics.RowSummary{row("slow", 500), row("fast", 1000), row("failing", 4000), row("invalid", 8000)}}
	ok := validity.Verdict{Valid: true}
	d := &verdict.Decision{Rows: []verdict.RowVerdict{
		{ID: "slow", Verdict: verdict.Pass, Validity: ok},
		{ID: "fast", Verdict: verdict.Pass, Validity: ok},
		{ID: "failing", Verdict: verdict.Fail, Validity: ok, Rules: []verdict.RuleResult{{Rule: "r", Pass: false}}},
		{ID: "invalid", Verdict: verdict.Pass},
	}}
	c := CostOf(sum, d)
	if c == nil || len(c.Lines) != 4 {
		t.Fatalf("cost section %+v; want four lines", c)
	}
	if l := c.Lines[1]; l.PerMOutput != "$1.00" && l.PerMOutput != "$1" {
		t.Errorf("fast's $ per M output = %q; want $1", l.PerMOutput)
	}
	if !strings.HasPrefix(c.Ranking, "Cheapest accepted row per million output tokens: `fast`") ||
		!strings.Contains(c.Ranking, "`fast` $1") || strings.Index(c.Ranking, "`slow`") < strings.LastIndex(c.Ranking, "`fast`") ||
		strings.Contains(c.Ranking, "failing") || strings.Contains(c.Ranking, "invalid") {
		t.Errorf("ranking %q; want fast then slow, neither failing nor invalid", c.Ranking)
	}
	if CostOf(&metrics.Summary{Rows: []metrics.RowSummary{{ID: "x", Status: metrics.RowComplete}}}, d) != nil {
		t.Error("an unpriced run has a Cost section")
	}
}
