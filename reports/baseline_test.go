package reports

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/compare"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/validity"
	"github.com/infermatrix/infermatrix/verdict"
)

const baselineExperiment = `apiVersion: infermatrix/v1
name: held
server: {target: builtin}
defaults: {requests: 10, input_tokens: 16, output_tokens: 8}
rows:
  - {id: a, concurrency: 1}
  - {id: b, concurrency: %B%}
  - {id: c, concurrency: 1}
  - {id: d, concurrency: 1}
  - {id: e, concurrency: 1}
acceptance:
  - name: no-slower
    rows: [a, b, c, d]
    expect: tpot.p95 < 1.10 * baseline.tpot.p95
hypotheses:
  - id: H1
    statement: a is no slower than its baseline
    expect: rows.a.tpot.p95 <= 1.10 * rows.a.baseline.tpot.p95
  - id: H2
    statement: d is no slower than its baseline
    expect: rows.d.tpot.p95 <= 1.10 * rows.d.baseline.tpot.p95
validity: {ignore: [samples]}
`

// baselineFixture is a run and a hand-built baseline run: row a matches,
// b ran at another concurrency in the baseline, c is invalid there, d is
// missing from it, e has no rules.
func baselineFixture(t *testing.T, tpotA float64) (*schema.Plan, *metrics.Summary, *verdict.Baseline) {
	t.Helper()
	parse := func(b string) *schema.Plan {
		p, err := schema.Parse("held.yaml", []byte(strings.ReplaceAll(baselineExperiment, "%B%", b)), schema.Options{Baseline: "runs/held", SkipFileChecks: true})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	plan, basePlan := parse("16"), parse("32")
	tpot := func(v float64) []float64 { return []float64{v, v, v} }
	sum := &metrics.Summary{Format: metrics.SummaryFormat, Rows: []metrics.RowSummary{
		row("a", tpot(20), tpot(tpotA), 0), row("b", tpot(20), tpot(20), 0), row("c", tpot(20), tpot(20), 0),
		row("d", tpot(20), tpot(20), 0), row("e", tpot(20), tpot(20), 0),
	}}
	baseSum := &metrics.Summary{Format: metrics.SummaryFormat, Rows: []metrics.RowSummary{
		row("a", tpot(20), tpot(20), 0), row("b", tpot(20), tpot(20), 0), row("c", tpot(20), tpot(20), 0), row("e", tpot(20), tpot(20), 0),
	}}
	started := time.Date(2026, 3, 1, 10, 15, 0, 0, time.UTC)
	man := &rundir.Manifest{Started: started, Rows: basePlan.Rows, Semantics: basePlan.Semantics, Server: rundir.ServerInfo{Declared: basePlan.Server}}
	valid := validity.Verdict{Valid: true}
	run := &compare.Run{Manifest: man, Summary: baseSum, Validity: map[string]validity.Verdict{
		"a": valid, "b": valid, "e": valid,
		"c": {Valid: false, Reasons: []validity.Reason{{Check: validity.Load, Message: "the server saw less load"}}},
	}}
	return plan, sum, verdict.NewBaseline(run, rundir.BaselineInfo{Dir: "runs/held/20260301T101500Z", Given: "runs/held", ID: "20260301T101500Z", Started: started, ExperimentSHA256: basePlan.SHA256})
}

// TestJudgeBaseline: a rule reads the baseline's row. Within 10% it
// passes and beyond it fails; a row whose baseline is missing, ran
// another workload or is invalid there is not judged and is invalid,
// saying why: never a silent pass.
func TestJudgeBaseline(t *testing.T) {
	plan, sum, base := baselineFixture(t, 21)
	d := verdict.JudgeWith(plan, sum, base)
	want := map[string]string{"a": verdict.Pass, "b": verdict.Invalid, "c": verdict.Invalid, "d": verdict.Invalid, "e": verdict.NoRules}
	for _, rv := range d.Rows {
		if rv.Verdict != want[rv.ID] {
			t.Errorf("row %s: verdict %s; want %s (%+v)", rv.ID, rv.Verdict, want[rv.ID], rv.Validity)
		}
	}
	if d.Verdict != verdict.Inconclusive {
		t.Errorf("run verdict %s; want inconclusive", d.Verdict)
	}
	reasons := map[string]string{
		"b": "baseline row b differs: load",
		"c": "baseline row c is invalid: load in its own record",
		"d": "the baseline run 20260301T101500Z has no row d",
	}
	for id, w := range reasons {
		rv := d.Row(id)
		if len(rv.Rules) != 1 || !strings.Contains(rv.Rules[0].Unjudged, w) || rv.Rules[0].Pass {
			t.Errorf("row %s: rules %+v; want one unjudged rule saying %q", id, rv.Rules, w)
		}
		var checks []string
		for _, r := range rv.Validity.Reasons {
			checks = append(checks, r.Check)
		}
		if rv.Validity.Valid || strings.Join(checks, ",") != verdict.BaselineCheck {
			t.Errorf("row %s: validity %+v; want invalid by the %s check", id, rv.Validity, verdict.BaselineCheck)
		}
	}
	if b := d.Row("b").Rules[0].Unjudged; !strings.Contains(b, `"concurrency":32`) || !strings.Contains(b, `"concurrency":16`) {
		t.Errorf("row b: %q; want the two concurrencies named", b)
	}
	hyp := map[string]string{}
	for _, h := range d.Hypotheses {
		hyp[h.ID] = h.Verdict + ": " + h.Reason
	}
	if hyp["H1"] != verdict.Supported+": " || !strings.HasPrefix(hyp["H2"], verdict.Inconclusive+": the baseline run") {
		t.Errorf("hypotheses %v; want H1 supported, H2 inconclusive for want of d's baseline", hyp)
	}

	// The record sets a beside its baseline.
	if d.Baseline == nil || len(d.Baseline.Rows) != 5 {
		t.Fatalf("Baseline record %+v; want the five rows", d.Baseline)
	}
	var tp *verdict.BaselineMetric
	for i, m := range d.Baseline.Rows[0].Metrics {
		if m.Name == "tpot.p95" {
			tp = &d.Baseline.Rows[0].Metrics[i]
		}
	}
	if tp == nil || tp.Base != 20 || tp.New != 21 || tp.Change == nil || *tp.Change < 4.99 || *tp.Change > 5.01 {
		t.Errorf("row a tpot.p95 = %+v; want 20 → 21, +5%%", tp)
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, &Input{Plan: plan, Manifest: &rundir.Manifest{}, Summary: sum, Decision: d}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"## Baseline", "`runs/held/20260301T101500Z`", "20 → 21 (+5.0%)", "no baseline: baseline row b differs"} {
		if !strings.Contains(md.String(), w) {
			t.Errorf("decision.md lacks %q", w)
		}
	}
	// report.html: a rule that was not judged is neither pass nor fail.
	var page bytes.Buffer
	if err := WriteHTML(&page, &Input{Plan: plan, Manifest: &rundir.Manifest{}, Summary: sum, Decision: d}, nil); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	if n := strings.Count(html, `<span class="badge none">not judged</span>`); n != 3 || strings.Contains(html, "✗ fail") {
		t.Errorf("report.html: %d rules marked not judged (want 3: b, c, d), fail badge shown %v", n, strings.Contains(html, "✗ fail"))
	}
}

// TestJudgeBaselineFails: beyond the allowed change the rule fails, and
// the failed clause shows both figures.
func TestJudgeBaselineFails(t *testing.T) {
	plan, sum, base := baselineFixture(t, 23)
	d := verdict.JudgeWith(plan, sum, base)
	a := d.Row("a")
	if a.Verdict != verdict.Fail || d.Verdict != verdict.Fail {
		t.Fatalf("row a %s, run %s; want fail (23 is over 1.10 × 20)", a.Verdict, d.Verdict)
	}
	got := map[string]float64{}
	for _, v := range a.Rules[0].Failed[0].Values {
		got[v.Name] = v.Value
	}
	if got["tpot.p95"] != 23 || got["baseline.tpot.p95"] != 20 {
		t.Errorf("failed clause values %v; want tpot.p95 = 23 and baseline.tpot.p95 = 20", got)
	}
}

// TestJudgeWithoutBaseline: judged with no baseline at all (a re-render
// whose baseline is gone), the rules that read it are not judged.
func TestJudgeWithoutBaseline(t *testing.T) {
	plan, sum, _ := baselineFixture(t, 21)
	d := verdict.Judge(plan, sum)
	if rv := d.Row("a"); rv.Verdict != verdict.Invalid || !strings.Contains(rv.Rules[0].Unjudged, "no baseline run was given") {
		t.Errorf("row a: %+v; want invalid, no baseline given", rv)
	}
	if d.Baseline != nil {
		t.Errorf("Baseline record without a baseline: %+v", d.Baseline)
	}
}
