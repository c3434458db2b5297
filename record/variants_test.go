package record

import (
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/validity"
	"github.com/infermatrix/infermatrix/verdict"
)

// TestVariantsBestAndRejected: per question, the accepted variant with the
// lowest price wins even when another is faster; a variant failing its
// rule, an invalid one and one whose server never ran are rejected, each
// with why; figures a variant lacks are a dash, never 0.
func TestVariantsBestAndRejected(t *testing.T) {
	p, err := schema.Parse("t.yaml", []byte(`apiVersion: infermatrix/v1
name: t
server:
  target: builtin
  sim: {preset: tiny-fast}
  variants:
    - {name: cheap}
    - {name: fast, sim: {replicas: 4}}
    - {name: failing}
    - {name: invalid}
    - {name: down}
cost: {usd_per_gpu_hour: 3.6}
rows: [{id: chat, question: "Which serves chat cheapest?", requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 4}]
acceptance: [{name: fast-enough, expect: ttft.p95 < 100}]
`), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	row := func(id string, outPerS, ttft float64) metrics.RowSummary {
		rs := metrics.RowSummary{ID: id, Base: id, Status: metrics.RowComplete,
			Throughput: metrics.Throughput{OutputTokensPerS: outPerS, TotalTokensPerS: 2 * outPerS}}
		rs.Metrics.TTFT = metrics.Dist{Count: 10, P95: ttft}
		metrics.Price(&rs, p.RowPricing(p.Row(id)))
		return rs
	}
	sum := &metrics.Summary{Rows: []metrics.RowSummary{
		row("chat@cheap", 1000, 50), row("chat@fast", 2000, 40), row("chat@failing", 5000, 300), row("chat@invalid", 8000, 20),
		{ID: "chat@down", Base: "chat@down", Status: metrics.RowNotRun, Error: "server never got ready within 1s"},
	}}
	ok := validity.Verdict{Valid: true}
	d := &verdict.Decision{Rows: []verdict.RowVerdict{
		{ID: "chat@cheap", Verdict: verdict.Pass, Validity: ok, Rules: []verdict.RuleResult{{Rule: "fast-enough", Pass: true}}},
		{ID: "chat@fast", Verdict: verdict.Pass, Validity: ok, Rules: []verdict.RuleResult{{Rule: "fast-enough", Pass: true}}},
		{ID: "chat@failing", Verdict: verdict.Fail, Validity: ok, Rules: []verdict.RuleResult{{Rule: "fast-enough", Pass: false,
			Failed: []verdict.Clause{{Text: "ttft.p95 < 100", Values: []verdict.Value{{Name: "ttft.p95", Value: 300}}}}}}},
		{ID: "chat@invalid", Verdict: verdict.Pass, Validity: validity.Verdict{Reasons: []validity.Reason{{Check: "load"}}}},
		{ID: "chat@down", Verdict: verdict.NotRun},
	}}
	v := VariantsOf(p, nil, sum, d)
	if v == nil || len(v.Questions) != 1 || len(v.Questions[0].Cells) != 5 {
		t.Fatalf("variants = %+v", v)
	}
	q := v.Questions[0]
	// fast runs on 4 GPUs: twice the throughput at four times the price.
	if q.Best != "cheap" || !strings.Contains(q.BestWhy, "cheapest") {
		t.Errorf("best = %q (%s); want cheap, by price", q.Best, q.BestWhy)
	}
	why := map[string]string{}
	for _, c := range q.Cells {
		why[c.Variant] = c.Why
		if c.Accepted != (c.Variant == "cheap" || c.Variant == "fast") {
			t.Errorf("%s accepted = %v", c.Variant, c.Accepted)
		}
	}
	for name, want := range map[string]string{"failing": "ttft.p95 = 300", "invalid": "invalid: load", "down": "not run: server never got ready"} {
		if !strings.Contains(why[name], want) {
			t.Errorf("%s rejected because %q; want %q", name, why[name], want)
		}
	}
	down := q.Cells[4]
	if down.Row != "" || down.Throughput != "—" || down.TTFTp95 != "—" || down.USDPerMOutput != "—" || down.Goodput != "—" {
		t.Errorf("a variant that did not run shows figures: %+v", down)
	}
	// The record's answer names the best variant with its own answer,
	// then the rejected ones and why.
	a := AnswerOf(p, sum, d, nil)
	if len(a.Lines) != 1 || !strings.HasPrefix(a.Lines[0].Text, "best variant `cheap` (") || !strings.Contains(a.Lines[0].Text, "`down` rejected: did not run") {
		t.Errorf("answer = %+v", a.Lines)
	}
	// No price: the fastest accepted variant wins.
	for i := range sum.Rows {
		sum.Rows[i].Cost = nil
	}
	if q := VariantsOf(p, nil, sum, d).Questions[0]; q.Best != "fast" || !strings.Contains(q.BestWhy, "throughput") {
		t.Errorf("unpriced best = %q (%s); want fast, by throughput", q.Best, q.BestWhy)
	}
	if VariantsOf(&schema.Plan{}, nil, sum, d) != nil {
		t.Error("a plan without variants has a Variants section")
	}
}

// TestBestVariantTies: two accepted variants within 2% of each other's
// price are called tied, not one better; a clear winner is not.
func TestBestVariantTies(t *testing.T) {
	cell := func(name string, usd float64) VariantCell {
		return VariantCell{Variant: name, Accepted: true, usd: &usd, USDPerMOutput: dollars(&usd)}
	}
	best, why := bestVariant([]VariantCell{cell("seqs32", 0.2571), cell("seqs128", 0.2569), cell("seqs8", 0.655)})
	if best != "seqs128" || !strings.Contains(why, "tied with `seqs32`") || strings.Contains(why, "seqs8") {
		t.Errorf("best %q (%s); want seqs128 tied with seqs32 only", best, why)
	}
	if _, why := bestVariant([]VariantCell{cell("a", 0.20), cell("b", 0.30)}); strings.Contains(why, "tied") {
		t.Errorf("a 50%% difference called a tie: %s", why)
	}
}
