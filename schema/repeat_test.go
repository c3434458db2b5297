package schema

import (
	"strings"
	"testing"
)

// TestRepeat: repeat comes from defaults or the row, 1 when unset, and
// stretches the estimate; report.confidence sets the intervals' level.
func TestRepeat(t *testing.T) {
	p := mustParse(t, `defaults: {requests: 10, concurrency: 1, input_tokens: 8, output_tokens: 8, repeat: 3}
report: {confidence: 0.9}
rows:
  - {id: a}
  - {id: b, repeat: 1}
`, Options{})
	if p.Rows[0].Trials() != 3 || p.Rows[1].Trials() != 1 || p.Rows[1].Repeat != 0 || p.MaxRepeat() != 3 || p.Confidence != 0.9 {
		t.Errorf("trials %d, %d (repeat %d), rounds %d, confidence %v; want 3, 1 (0), 3, 0.9", p.Rows[0].Trials(), p.Rows[1].Trials(), p.Rows[1].Repeat, p.MaxRepeat(), p.Confidence)
	}
	one, three := EstimateRow(&p.Rows[1], 1e9), EstimateRow(&p.Rows[0], 1e9)
	if three.Duration != 3*one.Duration {
		t.Errorf("estimate with repeat 3: %v; want 3 × %v", three.Duration, one.Duration)
	}
	if q := mustParse(t, "rows: [{id: a, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 8}]\n", Options{}); q.Rows[0].Trials() != 1 || q.Confidence != DefaultConfidence {
		t.Errorf("unset: trials %d, confidence %v; want 1, %v", q.Rows[0].Trials(), q.Confidence, DefaultConfidence)
	}
}

// TestIntervalNeedsRepeat: a rule or hypothesis that reads upper.* or
// lower.* on a row without repeat is refused at the name, with the hint;
// on repeated rows it loads; repeat above the limit is refused.
func TestIntervalNeedsRepeat(t *testing.T) {
	all := problemsText(t, header+`defaults: {requests: 10, concurrency: 1, input_tokens: 8, output_tokens: 8}
rows:
  - {id: rep, repeat: 5}
  - {id: once}
  - {id: big, repeat: 101}
acceptance:
  - {name: ok, rows: [rep], expect: upper.tpot.p95 < 10}
  - {name: bad, expect: "ttft.p95 < 9 && lower.ttft.p95 > 1"}
hypotheses:
  - {id: H1, statement: s, expect: rows.once.upper.e2e.mean < rows.rep.lower.e2e.mean}
`)
	for _, want := range []string{
		"test.yaml:8:23: rows[2].repeat: must be at most 100, got 101",
		"test.yaml:11:42: acceptance[1].expect: lower.ttft.p95 needs repeat: 2 or more, and row once has none",
		"hint: an interval rests on several trials",
		"hypotheses[0].expect: rows.once.upper.e2e.mean needs repeat: 2 or more, and row once has none",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "acceptance[0]") || strings.Contains(all, "rows.rep.lower") {
		t.Errorf("a rule on the repeated row was refused:\n%s", all)
	}
}
