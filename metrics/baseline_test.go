package metrics

import (
	"math"
	"strings"
	"testing"
)

// TestBaselineNames: rules and hypotheses read the baseline run's row as
// baseline.<metric>; the nesting stops there, and a misspelt baseline
// metric is caught with a baseline name as its hint.
func TestBaselineNames(t *testing.T) {
	for _, src := range []string{"tpot.p95 < 1.05 * baseline.tpot.p95", "p(baseline.ttft, 75) > 0", "baseline.errors.ratio <= errors.ratio"} {
		if _, probs := CompileRow(src); len(probs) > 0 {
			t.Errorf("CompileRow(%q): %+v", src, probs)
		}
	}
	if _, probs := CompileHypothesis("rows.a.ttft.p95 < rows.a.baseline.ttft.p95", []string{"a"}, nil); len(probs) > 0 {
		t.Errorf("hypothesis over a row's baseline: %+v", probs)
	}
	_, probs := CompileRow("tpot.p95 < baseline.baseline.tpot.p95")
	if len(probs) != 1 {
		t.Fatalf("baseline.baseline: %+v; want one problem", probs)
	}
	_, probs = CompileRow("tpot.p95 < baseline.tpot.p59x")
	if len(probs) != 1 || !strings.Contains(probs[0].Hint, "baseline.tpot.p95") {
		t.Errorf("misspelt baseline metric: %+v; want a hint naming baseline.tpot.p95", probs)
	}
	for _, n := range RowNames() {
		if strings.HasPrefix(n, "baseline") {
			t.Errorf("RowNames lists %s: the baseline's names mirror the row's", n)
		}
	}
}

func TestBaselineUses(t *testing.T) {
	cases := []struct {
		src  string
		want []string
	}{
		{"tpot.p95 < 40", nil},
		{"tpot.p95 < 1.05 * baseline.tpot.p95 && ttft.p95 < baseline.ttft.p95", []string{"baseline", "baseline"}},
		{"p(baseline.ttft, 75) > 0", []string{"baseline"}},
		{"rows.a.ttft.p95 < rows.a.baseline.ttft.p95", []string{"rows.a.baseline"}},
	}
	for _, c := range cases {
		got := BaselineUses(c.src)
		var texts []string
		for _, u := range got {
			texts = append(texts, u.Text)
			if r := []rune(c.src); u.From < 0 || u.To > len(r) || string(r[u.From:u.To]) != u.Text {
				t.Errorf("BaselineUses(%q): span %d..%d does not hold %q", c.src, u.From, u.To, u.Text)
			}
		}
		if strings.Join(texts, ",") != strings.Join(c.want, ",") {
			t.Errorf("BaselineUses(%q) = %v; want %v", c.src, texts, c.want)
		}
	}
}

// TestBaselineRuns: a rule is evaluated against the baseline's figures,
// and a baseline distribution without samples is filled like the row's.
func TestBaselineRuns(t *testing.T) {
	prog, probs := CompileRow("tpot.p95 < 1.10 * baseline.tpot.p95")
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	env := RowEnv{TPOT: Dist{Count: 10, P95: 21}}
	env.Baseline = &RowEnv{TPOT: Dist{Count: 10, P95: 20}}
	if ok, err := prog.Run(env); err != nil || !ok {
		t.Errorf("21 < 1.10*20: %v, %v; want true", ok, err)
	}
	env.Baseline.TPOT.P95 = 18
	if ok, err := prog.Run(env); err != nil || ok {
		t.Errorf("21 < 1.10*18: %v, %v; want false", ok, err)
	}
	env.Baseline.TPOT = Dist{}
	if got := strings.Join(env.EmptyMetrics(), " "); !strings.Contains(got, "baseline.tpot") {
		t.Errorf("EmptyMetrics = %s; want baseline.tpot among them", got)
	}
	if f := env.Filled(math.Inf(1)); f.Baseline.TPOT.P95 != math.Inf(1) || env.Baseline.TPOT.P95 != 0 {
		t.Errorf("Filled: baseline tpot.p95 %v (original %v); want +Inf in the copy only", f.Baseline.TPOT.P95, env.Baseline.TPOT.P95)
	}
}
