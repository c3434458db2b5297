package verdict_test

import (
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/internal/judgefixture"
	"github.com/infermatrix/infermatrix/verdict"
)

// TestJudgeBaseline: a rule reads the baseline's row. Within 10% it
// passes and beyond it fails; a row whose baseline is missing, ran
// another workload or is invalid there is not judged and is invalid,
// saying why: never a silent pass.
func TestJudgeBaseline(t *testing.T) {
	plan, sum, base := judgefixture.Baseline(t, 21)
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
}

// TestJudgeBaselineFails: beyond the allowed change the rule fails, and
// the failed clause shows both figures.
func TestJudgeBaselineFails(t *testing.T) {
	plan, sum, base := judgefixture.Baseline(t, 23)
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
	plan, sum, _ := judgefixture.Baseline(t, 21)
	d := verdict.Judge(plan, sum)
	if rv := d.Row("a"); rv.Verdict != verdict.Invalid || !strings.Contains(rv.Rules[0].Unjudged, "no baseline run was given") {
		t.Errorf("row a: %+v; want invalid, no baseline given", rv)
	}
	if d.Baseline != nil {
		t.Errorf("Baseline record without a baseline: %+v", d.Baseline)
	}
}
