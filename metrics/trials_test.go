package metrics

import (
	"math"
	"testing"
)

func trialWith(tpotP95 float64, rps float64) RowSummary {
	return RowSummary{
		Requests:   Requests{Sent: 10, Completed: 10},
		Metrics:    Metrics{TPOT: Dist{Count: 10, P95: tpotP95, Mean: tpotP95}},
		Throughput: Throughput{RequestsPerS: rps},
	}
}

// TestTrialIntervals: the interval of tpot.p95 over five trials is
// Student's t over the five values (mean 10, s = √2.5, t₀.₉₇₅,₄ = 2.776),
// a figure no trial measured has none, and one trial gives no intervals.
func TestTrialIntervals(t *testing.T) {
	var trials []RowSummary
	for _, v := range []float64{8, 9, 10, 11, 12} {
		trials = append(trials, trialWith(v, 2))
	}
	iv := TrialIntervals(trials, 0)
	if iv == nil || iv.Level != 0.95 || iv.Trials != 5 {
		t.Fatalf("intervals %+v", iv)
	}
	half := 2.7764451051977987 * math.Sqrt(2.5) / math.Sqrt(5)
	b := iv.TPOT.P95
	if b.N != 5 || math.Abs(b.Lower-(10-half)) > 1e-5 || math.Abs(b.Upper-(10+half)) > 1e-5 {
		t.Errorf("tpot.p95 interval %+v; want [%.6f, %.6f] over 5", b, 10-half, 10+half)
	}
	if r := iv.Throughput.RequestsPerS; r.Lower != 2 || r.Upper != 2 || r.N != 5 {
		t.Errorf("constant throughput's interval %+v; want [2, 2]", r)
	}
	if iv.TTFT.P95.Known() {
		t.Errorf("ttft.p95 has an interval %+v though no trial measured TTFT", iv.TTFT.P95)
	}
	if TrialIntervals(trials[:1], 0) != nil {
		t.Error("one trial gave intervals")
	}
}

// TestBoundsInRules: upper.tpot.p95 and lower.tpot.p95 read the interval;
// a row without intervals leaves them missing (EmptyMetrics), filled like
// an empty distribution, so a rule cannot pass on them.
func TestBoundsInRules(t *testing.T) {
	var trials []RowSummary
	for _, v := range []float64{8, 9, 10, 11, 12} {
		trials = append(trials, trialWith(v, 2))
	}
	rs := trialWith(10, 2)
	rs.Intervals = TrialIntervals(trials, 0)
	prog, probs := CompileRow("upper.tpot.p95 < 12 && lower.tpot.p95 > 8")
	if len(probs) > 0 {
		t.Fatalf("compile: %+v", probs)
	}
	if ok, err := prog.Run(NewRowEnv(&rs)); err != nil || !ok {
		t.Errorf("upper.tpot.p95 < 12 && lower.tpot.p95 > 8 on [8.04, 11.96]: %v, %v", ok, err)
	}
	plain := trialWith(10, 2)
	env := NewRowEnv(&plain)
	empty := map[string]bool{}
	for _, m := range env.EmptyMetrics() {
		empty[m] = true
	}
	if !empty[UpperName] || !empty[LowerName] {
		t.Errorf("a row without intervals: EmptyMetrics %v lacks upper and lower", env.EmptyMetrics())
	}
	if ok, _ := prog.Run(env.Filled(math.Inf(1))); ok {
		t.Error("a rule on missing intervals passed with them at +Inf")
	}
	if _, probs := CompileRow("ttft.p95.upper < 1000"); len(probs) == 0 {
		t.Error("ttft.p95.upper compiled; a number has no fields")
	}
	uses := IntervalUses("rows.a.upper.ttft.p95 < 1 && lower.e2e.mean > 0")
	if len(uses) != 2 || uses[0].Row != "a" || uses[0].Name != "rows.a.upper.ttft.p95" || uses[1].Name != "lower.e2e.mean" || uses[1].From != 29 {
		t.Errorf("IntervalUses = %+v", uses)
	}
}
