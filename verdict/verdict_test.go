package verdict_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/internal/judgefixture"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

// sweepExperiment has a three-point sweep judged by its operating point,
// a plain row with an every-point rule, and a row without rules.
const sweepExperiment = `apiVersion: infermatrix/v1
name: v
server: {target: builtin}
defaults: {requests: 400, input_tokens: 100, output_tokens: 50}
rows:
  - {id: chat, concurrency: 1}
  - {id: sat, sweep: {concurrency: [4, 16, 64]}}
  - {id: free, concurrency: 1}
acceptance:
  - {name: interactive, rows: [chat], expect: "ttft.p95 < 200"}
  - {name: capacity, rows: [sat], expect: "ttft.p95 < 200", sweep: operating_point}
`

func verdictsFixture(t *testing.T, sat []float64) (*schema.Plan, *metrics.Summary) {
	t.Helper()
	plan, err := schema.Parse("v.yaml", []byte(sweepExperiment), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sum := &metrics.Summary{Rows: []metrics.RowSummary{
		judgefixture.ValidRow("chat", 1, 50, 100),
		judgefixture.ValidRow("sat/c=4", 4, sat[0], 400),
		judgefixture.ValidRow("sat/c=16", 16, sat[1], 1400),
		judgefixture.ValidRow("sat/c=64", 64, sat[2], 1600),
		judgefixture.ValidRow("free", 1, 50, 100),
	}}
	return plan, sum
}

func verdictMap(d *verdict.Decision) map[string]string {
	out := map[string]string{}
	for _, rv := range d.Rows {
		out[rv.ID] = rv.Verdict
	}
	return out
}

// TestOperatingPointRule: points past capacity are rejected without
// failing the run, and the run passes with the operating point named.
func TestOperatingPointRule(t *testing.T) {
	plan, sum := verdictsFixture(t, []float64{50, 120, 900})
	d := verdict.Judge(plan, sum)
	if d.Verdict != verdict.Pass {
		t.Fatalf("verdict %s (%q); want pass: c=64 is past capacity, as the sweep means to find", d.Verdict, d.Why)
	}
	if v := verdictMap(d); v["sat/c=64"] != verdict.Rejected || v["sat/c=16"] != verdict.Pass || v["chat"] != verdict.Pass || v["free"] != verdict.NoRules {
		t.Errorf("row verdicts %v", v)
	}
	if len(d.OperatingPoints) != 1 || d.OperatingPoints[0].Row != "sat/c=16" || d.OperatingPoints[0].Verdict != verdict.Pass ||
		!slices.Equal(d.OperatingPoints[0].Rejected, []string{"sat/c=64"}) {
		t.Errorf("operating points %+v", d.OperatingPoints)
	}

	// No point passes, every point valid: the sweep fails the run.
	plan, sum = verdictsFixture(t, []float64{500, 600, 900})
	if d := verdict.Judge(plan, sum); d.Verdict != verdict.Fail || d.OperatingPoints[0].Verdict != verdict.Fail {
		t.Errorf("no passing point: %s, %+v; want fail", d.Verdict, d.OperatingPoints)
	}

	// A point with more load than the operating point is invalid: it
	// might have passed, so the operating point is a lower bound and the
	// run inconclusive.
	plan, sum = verdictsFixture(t, []float64{50, 120, 150})
	sum.Rows[3].InFlight.Mean = 20 // c=64 never had its 64 users busy
	d = verdict.Judge(plan, sum)
	if d.Verdict != verdict.Inconclusive || d.OperatingPoints[0].Row != "sat/c=16" || d.OperatingPoints[0].Verdict != verdict.Inconclusive {
		t.Errorf("invalid point above: %s, %+v; want inconclusive with c=16 as a lower bound", d.Verdict, d.OperatingPoints)
	}
	// An invalid point below the operating point changes nothing.
	plan, sum = verdictsFixture(t, []float64{50, 120, 900})
	sum.Rows[1].InFlight.Mean = 1
	if d := verdict.Judge(plan, sum); d.Verdict != verdict.Pass || d.OperatingPoints[0].Row != "sat/c=16" {
		t.Errorf("invalid point below: %s, %+v; want pass at c=16", d.Verdict, d.OperatingPoints)
	}
}

// TestInvalidRowsNeverPass: a row whose rules pass but whose figures are
// invalid makes the run inconclusive, never a pass; a valid failing row
// still fails it.
func TestInvalidRowsNeverPass(t *testing.T) {
	plan, sum := verdictsFixture(t, []float64{50, 120, 900})
	sum.Rows[0].SelfCheck = metrics.SelfCheck{ClientCPU: 0.97, Cores: 2}
	d := verdict.Judge(plan, sum)
	if d.Verdict != verdict.Inconclusive || verdictMap(d)["chat"] != verdict.Invalid || !d.Rows[0].RulesPass() {
		t.Errorf("%s, %v; want inconclusive with chat invalid (its rule would pass)", d.Verdict, verdictMap(d))
	}
	if !strings.Contains(strings.Join(d.Why, "; "), "invalid, so not judged: `chat`") {
		t.Errorf("why %q", d.Why)
	}
	sum.Rows[4].Metrics.TTFT = metrics.NewDist(slices.Repeat([]float64{50}, 400), nil)
	sum.Rows[2].Metrics.TTFT = metrics.NewDist(slices.Repeat([]float64{900}, 400), nil) // c=16 now fails: op at c=4
	plan2, err := schema.Parse("v.yaml", []byte(strings.Replace(sweepExperiment, "expect: \"ttft.p95 < 200\"}\n  - {name: capacity", "expect: \"ttft.p95 < 10\"}\n  - {name: capacity", 1)), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sum.Rows[0].SelfCheck = metrics.SelfCheck{}
	if d := verdict.Judge(plan2, sum); d.Verdict != verdict.Fail || verdictMap(d)["chat"] != verdict.Fail {
		t.Errorf("%s, %v; want fail: chat is valid and fails", d.Verdict, verdictMap(d))
	}
}

// TestSkippedRowsMakeARunInconclusive: `run --rows` leaves rows with
// rules out; the run cannot pass on the rest.
func TestSkippedRowsMakeARunInconclusive(t *testing.T) {
	plan, err := schema.Parse("v.yaml", []byte(sweepExperiment), schema.Options{Rows: []string{"chat"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plan.Skipped, []string{"sat/c=4", "sat/c=16", "sat/c=64", "free"}) {
		t.Fatalf("skipped %q", plan.Skipped)
	}
	d := verdict.Judge(plan, &metrics.Summary{Rows: []metrics.RowSummary{judgefixture.ValidRow("chat", 1, 50, 100)}})
	if d.Verdict != verdict.Inconclusive || verdictMap(d)["sat/c=4"] != verdict.Skipped || verdictMap(d)["chat"] != verdict.Pass {
		t.Errorf("%s %v; want inconclusive, chat passing, the rest skipped", d.Verdict, verdictMap(d))
	}
	if !strings.Contains(strings.Join(d.Why, "; "), "left out of this run (--rows): `sat/c=4`, `sat/c=16`, `sat/c=64`") {
		t.Errorf("why %q; want the skipped rows with rules, and not free", d.Why)
	}
	// Without rules on the skipped rows, the subset can pass.
	plan, _ = schema.Parse("v.yaml", []byte(sweepExperiment), schema.Options{Rows: []string{"chat", "free"}})
	plan.Acceptance = plan.Acceptance[:1]
	if d := verdict.Judge(plan, &metrics.Summary{Rows: []metrics.RowSummary{judgefixture.ValidRow("chat", 1, 50, 100), judgefixture.ValidRow("free", 1, 50, 100)}}); d.Verdict != verdict.Pass {
		t.Errorf("%s; want pass", d.Verdict)
	}
}

// TestHypothesesOnInvalidRows are inconclusive: a claim about figures that
// cannot be trusted is neither supported nor refuted.
func TestHypothesesOnInvalidRows(t *testing.T) {
	plan, sum := judgefixture.Judged(t)
	plan.Validity.Ignore = nil // the fixture's rows have three samples each
	d := verdict.Judge(plan, sum)
	if h := d.Hypotheses[0]; h.Verdict != verdict.Inconclusive || !strings.Contains(h.Reason, "is invalid") {
		t.Errorf("H1 = %+v; want inconclusive on invalid rows", h)
	}
}
