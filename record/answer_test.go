package record_test

import (
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/internal/recordfixture"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/record"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/validity"
	"github.com/infermatrix/infermatrix/verdict"
)

// TestAnswerFirst: the record opens with the verdict and one sentence per
// written row with rules: a passing row with its headline figures, a
// sweep's failing point with the clause it failed and the value that
// failed it, so a reviewer reads the decision before any table.
func TestAnswerFirst(t *testing.T) {
	run := recordfixture.New(t)
	a := record.AnswerOf(run.Plan, run.Summary, run.Decision, run.Analysis)
	if a.Headline != "FAIL" {
		t.Errorf("headline %q; want FAIL (sat/c=8 fails)", a.Headline)
	}
	if len(a.Lines) != 2 || a.Lines[0].Base != "chat" || a.Lines[1].Base != "sat" {
		t.Fatalf("answer lines %+v; want chat then sat", a.Lines)
	}
	chat := a.Lines[0].Text
	for _, want := range []string{"`chat` passes", "TTFT p95 ", "TPOT p95 ", "80 output tok/s"} {
		if !strings.Contains(chat, want) {
			t.Errorf("chat's answer %q lacks %q", chat, want)
		}
	}
	sat := a.Lines[1].Text
	for _, want := range []string{"2 of 3 points pass, the busiest `sat/c=4` at 4 users", "`sat/c=8` fails", "ttft.p95 < 100", "ttft.p95 = "} {
		if !strings.Contains(sat, want) {
			t.Errorf("sat's answer %q lacks %q", sat, want)
		}
	}
}

// TestAnswerOnlyQuestions: when rows ask questions, the answer is theirs
// alone, worded with the question.
func TestAnswerOnlyQuestions(t *testing.T) {
	run := recordfixture.New(t)
	for i := range run.Plan.Rows {
		if run.Plan.Rows[i].Base == "sat" {
			run.Plan.Rows[i].Question = "How many users?"
		}
	}
	a := record.AnswerOf(run.Plan, run.Summary, run.Decision, run.Analysis)
	if len(a.Lines) != 1 || a.Lines[0].Question != "How many users?" {
		t.Fatalf("answer lines %+v; want sat's question alone", a.Lines)
	}
}

// TestHeadlineOfPoolingRow: an embeddings row's headline is its inputs
// and input tokens per second and its price per million tokens, never an
// output throughput it does not have.
func TestHeadlineOfPoolingRow(t *testing.T) {
	rs := metrics.RowSummary{ID: "embed", Status: metrics.RowComplete,
		Throughput: metrics.Throughput{RequestsPerS: 31, InputsPerS: 248, InputTokensPerS: 31744, TotalTokensPerS: 31744}}
	rs.Metrics.E2E = metrics.NewDist([]float64{100, 120, 132}, nil)
	metrics.Price(&rs, metrics.Pricing{USDPerHour: 3.6, GPUs: 1})
	h := record.Headline(&rs)
	for _, want := range []string{"E2E p95 ", "248 inputs/s", "31,744 input tok/s", " per million tokens"} {
		if !strings.Contains(h, want) {
			t.Errorf("headline %q lacks %q", h, want)
		}
	}
	if strings.Contains(h, "output") {
		t.Errorf("headline %q speaks of output", h)
	}
}

// TestAnswerOfRamp: a ramped row answers with its operating step's own
// figures, not the pooled figures of every level, and says when that step
// is the ramp's top.
func TestAnswerOfRamp(t *testing.T) {
	step := func(label string, ttft float64) metrics.StepSummary {
		st := metrics.StepSummary{Label: label}
		st.Metrics.TTFT = metrics.NewDist([]float64{ttft, ttft, ttft}, nil)
		st.Throughput.OutputTokensPerS = 1000
		return st
	}
	p := &schema.Plan{Rows: []schema.PlannedRow{{ID: "up", Base: "up", Question: "Where does TTFT leave the SLO?"}}}
	rs := metrics.RowSummary{ID: "up", Status: metrics.RowComplete, Steps: []metrics.StepSummary{step("c=8", 50), step("c=24", 120), step("c=40", 900)}}
	rs.Metrics.TTFT = metrics.NewDist([]float64{50, 120, 900}, nil)
	sum := &metrics.Summary{Rows: []metrics.RowSummary{rs}}
	d := &verdict.Decision{Verdict: verdict.Pass, Rows: []verdict.RowVerdict{{ID: "up", Verdict: verdict.Pass,
		Validity: validity.Verdict{Valid: true}, Rules: []verdict.RuleResult{{Rule: "r", Pass: true}},
		Ramp: &verdict.RampVerdict{Operating: "c=24", Rejected: []string{"c=40"}}}}}
	a := record.AnswerOf(p, sum, d, nil)
	if len(a.Lines) != 1 || !strings.Contains(a.Lines[0].Text, "holds up to its step c=24: TTFT p95 120 ms") || strings.Contains(a.Lines[0].Text, "top") {
		t.Errorf("answer %+v; want the operating step c=24 with its own TTFT", a.Lines)
	}
	d.Rows[0].Ramp.Operating = "c=40"
	if a := record.AnswerOf(p, sum, d, nil); !strings.Contains(a.Lines[0].Text, "c=40 (the ramp's top") {
		t.Errorf("answer %+v; want the ramp's top named", a.Lines)
	}
}
