package verdict_test

import (
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/internal/judgefixture"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

func TestJudge(t *testing.T) {
	plan, sum := judgefixture.Judged(t)
	d := verdict.Judge(plan, sum)
	if d.Verdict != verdict.Fail || d.Passed() {
		t.Errorf("Verdict = %s; want fail", d.Verdict)
	}
	want := map[string]string{"idle": verdict.Pass, "busy": verdict.Fail, "broken": verdict.Fail, "gone": verdict.NotRun, "free": verdict.NoRules}
	for _, rv := range d.Rows {
		if rv.Verdict != want[rv.ID] {
			t.Errorf("row %s: verdict %q; want %q", rv.ID, rv.Verdict, want[rv.ID])
		}
	}
	busy := d.Rows[1].Rules[0]
	if busy.Pass || len(busy.Failed) != 3 {
		t.Fatalf("busy: %+v; want three failed clauses", busy)
	}
	c := busy.Failed[0]
	if c.Text != "ttft.p95 < 100" || len(c.Values) != 1 || c.Values[0].Name != "ttft.p95" || c.Values[0].Value != 375 {
		t.Errorf("busy clause 0 = %+v; want ttft.p95 < 100 with ttft.p95 = 375", c)
	}
	if busy.Failed[2].Text != "errors.total == 0" || busy.Failed[2].Values[0].Value != 1 {
		t.Errorf("busy clause 2 = %+v", busy.Failed[2])
	}
	// A row where every request failed has empty distributions: it must
	// fail, not pass on zeros.
	broken := d.Rows[2].Rules[0]
	if broken.Pass || !strings.Contains(broken.Reason, "no successful requests") {
		t.Errorf("broken: %+v; want a failure for having no successful requests", broken)
	}
}

func TestJudgeEmptyDistribution(t *testing.T) {
	plan, sum := judgefixture.Judged(t)
	// TPOT has no samples (one-token outputs), TTFT has: the clause on
	// tpot must fail saying why, not pass on tpot.p95 == 0.
	sum.Rows[0].Metrics.TPOT = metrics.NewDist(nil, nil)
	d := verdict.Judge(plan, sum)
	r := d.Rows[0].Rules[0]
	if r.Pass || len(r.Failed) != 1 || r.Failed[0].Reason != "tpot has no samples" {
		t.Errorf("rule = %+v; want one failed clause: tpot has no samples", r)
	}
}

func TestHypotheses(t *testing.T) {
	plan, sum := judgefixture.Judged(t)
	d := verdict.Judge(plan, sum)
	if len(d.Hypotheses) != 2 {
		t.Fatalf("hypotheses = %+v", d.Hypotheses)
	}
	h1, h2 := d.Hypotheses[0], d.Hypotheses[1]
	if h1.Verdict != verdict.Supported || len(h1.Values) != 2 || h1.Values[0].Value != 375 || h1.Values[1].Value != 21.9 {
		t.Errorf("H1 = %+v; want supported with both p95s", h1)
	}
	if h2.Verdict != verdict.Inconclusive || !strings.Contains(h2.Reason, "no data for row gone") {
		t.Errorf("H2 = %+v; want inconclusive: the row did not run", h2)
	}
	sum.Rows[1].Metrics.TTFT = metrics.NewDist([]float64{1, 2, 3}, nil)
	if h := verdict.Judge(plan, sum).Hypotheses[0]; h.Verdict != verdict.Refuted {
		t.Errorf("H1 with a fast busy row = %s; want refuted", h.Verdict)
	}
}

// TestHypothesisOnEmptyMetric checks that a claim about a metric with no
// samples (a non-streamed row has no TTFT) is inconclusive, not decided on
// a zero.
func TestHypothesisOnEmptyMetric(t *testing.T) {
	plan, sum := judgefixture.Judged(t)
	sum.Rows[0].Metrics.TTFT = metrics.NewDist(nil, nil)
	h := verdict.Judge(plan, sum).Hypotheses[0]
	if h.Verdict != verdict.Inconclusive || h.Reason != "it depends on rows.idle.ttft, which has no samples" {
		t.Errorf("H1 = %+v; want inconclusive, naming the empty metric", h)
	}
	for _, v := range h.Values {
		if v.Name == "rows.idle.ttft.p95" {
			t.Errorf("evidence shows %s = %v for a metric with no samples", v.Name, v.Value)
		}
	}
}

// TestRulesOnMissingData checks that a rule passes only when its verdict
// does not depend on a metric with no samples.
func TestRulesOnMissingData(t *testing.T) {
	tests := []struct {
		expect string
		pass   bool
	}{
		{"ttft.p95 < 100 || e2e.p95 < 100", true}, // e2e alone decides
		{"ttft.p95 < 100", false},
		{"!(ttft.p95 > 1000)", false}, // would pass on NaN or 0
		{"ttft.p95 > 100", false},     // would pass on missing data read as +Inf alone
		{"ttft.count == 0 && e2e.p95 < 100", true},
		{"p(ttft, 90) < 5", false},
	}
	for _, tt := range tests {
		plan, err := schema.Parse("x.yaml", []byte(`apiVersion: infermatrix/v1
name: x
server: {target: builtin}
rows: [{id: r, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 8, streaming: false}]
acceptance: [{name: a, expect: "`+tt.expect+`"}]
validity: {ignore: [samples, steady_state]}
`), schema.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rs := judgefixture.Row("r", nil, nil, 0)
		rs.Metrics.E2E = metrics.NewDist([]float64{50, 60}, nil)
		rs.Requests.Completed, rs.Requests.Sent = 2, 2
		d := verdict.Judge(plan, &metrics.Summary{Rows: []metrics.RowSummary{rs}})
		if got := d.Rows[0].Verdict == verdict.Pass; got != tt.pass {
			t.Errorf("%s: pass = %v; want %v (%+v, %+v)", tt.expect, got, tt.pass, d.Rows[0].Rules, d.Rows[0].Validity)
		}
	}
}

func TestRunVerdicts(t *testing.T) {
	plan, sum := judgefixture.Judged(t)
	// Only rows without failures: idle passes, gone did not run.
	sum.Rows = []metrics.RowSummary{sum.Rows[0], sum.Rows[3]}
	if d := verdict.Judge(plan, sum); d.Verdict != verdict.Inconclusive {
		t.Errorf("verdict %s; want inconclusive: a row with rules did not run", d.Verdict)
	}
	sum.Interrupted = true
	if d := verdict.Judge(plan, sum); d.Verdict != verdict.Incomplete {
		t.Errorf("verdict %s; want incomplete: the run was interrupted", d.Verdict)
	}
	noRules, err := schema.Parse("x.yaml", []byte(`apiVersion: infermatrix/v1
name: x
server: {target: builtin}
rows: [{id: r, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 8}]
`), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := verdict.Judge(noRules, &metrics.Summary{Rows: []metrics.RowSummary{judgefixture.Row("r", nil, nil, 2)}})
	if d.Verdict != verdict.NoRules {
		t.Errorf("verdict %s; want none: nothing was judged", d.Verdict)
	}
}

func TestInterruptedRunHasNoPassingVerdict(t *testing.T) {
	plan, sum := judgefixture.Judged(t)
	sum.Rows = sum.Rows[:1] // only idle, which passes
	sum.Interrupted = true
	if d := verdict.Judge(plan, sum); d.Verdict == verdict.Pass {
		t.Error("an interrupted run was judged pass")
	}
}
