package verdict_test

import (
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/internal/judgefixture"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

// searchFixture is a search row's plan after its probes ran at the given
// loads, each a valid row with the given TTFT p95; a TTFT of 0 makes the
// probe invalid (the server saw half its load), though its TTFT passes.
func searchFixture(t *testing.T, loads []int, ttft []float64) (*schema.Plan, *metrics.Summary) {
	t.Helper()
	plan, err := schema.Parse("s.yaml", []byte(`apiVersion: infermatrix/v1
name: s
server: {target: builtin}
defaults: {requests: 400, input_tokens: 100, output_tokens: 50}
rows:
  - {id: sat, search: {concurrency: {min: 4, max: 64}}}
acceptance:
  - {name: slo, rows: [sat], expect: "ttft.p95 < 200"}
`), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sum := &metrics.Summary{}
	var probes []schema.PlannedRow
	for i, c := range loads {
		p := schema.ProbeRow(&plan.Rows[0], i+1, float64(c))
		probes = append(probes, p)
		rs := judgefixture.ValidRow(p.ID, c, ttft[i], float64(100*c))
		if ttft[i] == 0 {
			rs = judgefixture.ValidRow(p.ID, c, 50, float64(100*c))
			rs.InFlight.Mean = float64(c) / 2
		}
		sum.Rows = append(sum.Rows, rs)
	}
	plan.WithProbes(map[string][]schema.PlannedRow{"sat": probes})
	return plan, sum
}

// TestSearchProbesJudged: a search row's rules judge its probes as an
// operating point does: probes past the limit are rejected, and the run
// passes with the highest passing probe. A probe that could not be judged
// above a valid failure cannot beat it (more load never helps), so the run
// stays a pass; one between the pass and the failure makes it
// inconclusive; a minimum that fails fails the run.
func TestSearchProbesJudged(t *testing.T) {
	plan, sum := searchFixture(t, []int{4, 8, 16, 32, 64, 24}, []float64{50, 60, 100, 300, 0, 250})
	d := verdict.Judge(plan, sum)
	if d.Verdict != verdict.Pass || d.Row("sat/c=32").Verdict != verdict.Rejected || d.Row("sat/c=64").Verdict != verdict.Invalid {
		t.Errorf("verdict %s (%v), c=32 %s, c=64 %s; want pass, rejected, invalid", d.Verdict, d.Why, d.Row("sat/c=32").Verdict, d.Row("sat/c=64").Verdict)
	}
	if len(d.OperatingPoints) != 1 || d.OperatingPoints[0].Row != "sat/c=16" {
		t.Errorf("operating points %+v; want sat/c=16", d.OperatingPoints)
	}
	// The operating point is the search's answer, the highest passing
	// load, even where a lower probe happened to put out more.
	plan, sum = searchFixture(t, []int{4, 8, 16, 12}, []float64{50, 60, 300, 100})
	sum.Rows[1].Throughput.OutputTokensPerS = 5000
	if d := verdict.Judge(plan, sum); len(d.OperatingPoints) != 1 || d.OperatingPoints[0].Row != "sat/c=12" || !strings.Contains(d.OperatingPoints[0].Why, "highest load") {
		t.Errorf("operating points %+v; want sat/c=12, the highest passing load", d.OperatingPoints)
	}

	plan, sum = searchFixture(t, []int{4, 8, 16, 12}, []float64{50, 60, 300, 0})
	if d := verdict.Judge(plan, sum); d.Verdict != verdict.Inconclusive || !strings.Contains(strings.Join(d.Why, " "), "sat") {
		t.Errorf("invalid probe inside the bracket: verdict %s (%v); want inconclusive", d.Verdict, d.Why)
	}

	plan, sum = searchFixture(t, []int{4}, []float64{300})
	if d := verdict.Judge(plan, sum); d.Verdict != verdict.Fail {
		t.Errorf("min fails: verdict %s (%v); want fail", d.Verdict, d.Why)
	}
}
