package analysis

import (
	"testing"

	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/validity"
	"github.com/infermatrix/infermatrix/verdict"
)

// TestAnalyzeSearches: a search is restated from its probe rows and their
// verdicts: the bracket, the probes in the order they ran, and why the
// failing one did not pass; an invalid probe counts as not passing.
func TestAnalyzeSearches(t *testing.T) {
	tmpl := schema.PlannedRow{ID: "sat", Base: "sat", Load: schema.LoadPlan{Mode: schema.ModeConcurrency, Concurrency: 1},
		Search: &schema.SearchPlan{Vary: "concurrency", Min: 1, Max: 8, Relative: 0.1, Absolute: 1}}
	// Doubling 1, 2, 4, 8 (invalid), then 6 (fails) and 5 (passes): [5, 6].
	var rows []schema.PlannedRow
	for k, v := range []float64{1, 2, 4, 8, 6, 5} {
		rows = append(rows, schema.ProbeRow(&tmpl, k+1, v))
	}
	plan := &schema.Plan{Rows: append([]schema.PlannedRow{{ID: "other", Base: "other"},
		{ID: "idle", Base: "idle", Search: tmpl.Search}}, rows...)}
	d := &verdict.Decision{}
	for _, r := range rows {
		rv := verdict.RowVerdict{ID: r.ID, Verdict: verdict.Pass, Validity: validity.Verdict{Valid: true}}
		switch r.ID {
		case "sat/c=8":
			rv.Verdict, rv.Validity = verdict.Invalid, validity.Verdict{Reasons: []validity.Reason{{Check: "errors", Message: "12% of requests failed"}}}
		case "sat/c=6":
			rv.Verdict = verdict.Rejected
			rv.Rules = []verdict.RuleResult{{Rule: "slo", Failed: []verdict.Clause{{Text: "ttft.p95 < 1000", Values: []verdict.Value{{Name: "ttft.p95", Value: 1210}}}}}}
		}
		d.Rows = append(d.Rows, rv)
	}
	got := analyzeSearches(plan, d)
	if len(got) != 2 || got[0].Row != "idle" || got[0].Status != NotRun || got[1].Row != "sat" {
		t.Fatalf("searches %+v; want idle (not run) and sat", got)
	}
	sa := got[1]
	if sa.Status != "bracketed" || *sa.PassingValue != 5 || *sa.FailingValue != 6 || sa.PassingRow != "sat/c=5" || sa.FailingRow != "sat/c=6" {
		t.Fatalf("sat: %+v", sa)
	}
	if sa.Failing == nil || sa.Failing.Rule != "slo" || sa.Failing.Why != "fails slo: ttft.p95 1210 (`ttft.p95 < 1000`)" {
		t.Errorf("failing outcome %+v", sa.Failing)
	}
	if len(sa.Probes) != 6 || sa.Probes[3].Row != "sat/c=8" || sa.Probes[3].Passed || !sa.Probes[3].Invalid ||
		sa.Probes[3].Why != "invalid (errors: 12% of requests failed)" {
		t.Errorf("probes %+v", sa.Probes)
	}
}
