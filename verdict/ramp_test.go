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

// rampPlan is two ramped rows, one judged at every step, one asked for an
// operating step.
const rampPlan = `apiVersion: infermatrix/v1
name: ramped
server: {target: builtin}
defaults: {input_tokens: 16, output_tokens: 8}
rows:
  - {id: each, ramp: {concurrency: {from: 2, to: 6, step: 2}, step_duration: 10s}}
  - {id: op, ramp: {concurrency: {from: 2, to: 6, step: 2}, step_duration: 10s}}
acceptance:
  - {name: latency, rows: [each], expect: ttft.p95 < 100}
  - {name: capacity, rows: [op], expect: ttft.p95 < 100, sweep: operating_point}
validity: {ignore: [samples, steady_state]}
`

// rampRow is a ramped row whose steps have these TTFTs (one sample each)
// and, when loaded is false for a step, far fewer users in flight than the
// step's level: an invalid step.
func rampRow(id string, ttft []float64, loaded []bool) metrics.RowSummary {
	// NewDist sorts its samples in place: the row's copy is its own.
	rs := judgefixture.Row(id, slices.Clone(ttft), slices.Clone(ttft), 0)
	for i, v := range ttft {
		users := 2 * (i + 1)
		st := metrics.StepSummary{Step: i + 1, Label: "c=" + string(rune('0'+users)), Concurrency: users}
		st.RowSummary = judgefixture.Row(id, []float64{v}, []float64{v}, 0)
		st.WindowS = 10
		st.InFlight.Mean = float64(users)
		if !loaded[i] {
			st.InFlight.Mean = 0.5
		}
		rs.Steps = append(rs.Steps, st)
	}
	return rs
}

// TestRampJudgedByStep: a ramped row's rules judge each step. Judged at
// every step, it fails at the first valid step that fails (named in the
// clause), and an invalid step makes it inconclusive only when no valid
// step failed. Asked for an operating step, it passes with the highest
// valid passing step, failing steps above it being past capacity; an
// invalid step above it makes it inconclusive.
func TestRampJudgedByStep(t *testing.T) {
	plan, err := schema.Parse("ramped.yaml", []byte(rampPlan), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	all := []bool{true, true, true}
	for _, tc := range []struct {
		name           string
		each, op       []float64
		eachOK, opOK   []bool
		wantEach       string
		wantOp         string
		wantOperating  string
		wantEachClause string
	}{
		{"all pass", []float64{10, 20, 30}, []float64{10, 20, 30}, all, all, verdict.Pass, verdict.Pass, "c=6", ""},
		{"knee", []float64{10, 200, 300}, []float64{10, 20, 300}, all, all, verdict.Fail, verdict.Pass, "c=4", "c=4: ttft.p95 < 100"},
		{"invalid top", []float64{10, 20, 30}, []float64{10, 20, 30}, []bool{true, true, false}, []bool{true, true, false}, verdict.Invalid, verdict.Invalid, "c=4", ""},
		{"fail beside invalid", []float64{10, 200, 30}, []float64{200, 200, 200}, []bool{true, true, false}, all, verdict.Fail, verdict.Fail, "", "c=4: ttft.p95 < 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum := &metrics.Summary{Format: metrics.SummaryFormat, Experiment: "ramped", Rows: []metrics.RowSummary{
				rampRow("each", tc.each, tc.eachOK), rampRow("op", tc.op, tc.opOK),
			}}
			d := verdict.Judge(plan, sum)
			each, op := d.Row("each"), d.Row("op")
			if each.Verdict != tc.wantEach || op.Verdict != tc.wantOp {
				t.Errorf("verdicts: each %s, op %s; want %s, %s", each.Verdict, op.Verdict, tc.wantEach, tc.wantOp)
			}
			if op.Ramp == nil || op.Ramp.Operating != tc.wantOperating || len(op.Ramp.Steps) != 3 {
				t.Fatalf("op ramp: %+v; want operating step %q of 3", op.Ramp, tc.wantOperating)
			}
			if tc.wantEachClause != "" {
				if len(each.Rules) != 1 || len(each.Rules[0].Failed) == 0 || each.Rules[0].Failed[0].Text != tc.wantEachClause {
					t.Errorf("each: rules %+v; want the clause %q", each.Rules, tc.wantEachClause)
				}
			}
			if tc.name == "invalid top" && !strings.Contains(strings.Join(reasons(each), "\n"), "step c=6: ") {
				t.Errorf("each: validity %+v; want the invalid step named", each.Validity)
			}
			// An invalid ramp row with rules, operating_point ones
			// included, leaves the run inconclusive, never a pass.
			if tc.name == "invalid top" && d.Verdict != verdict.Inconclusive {
				t.Errorf("run verdict %s; want inconclusive", d.Verdict)
			}
		})
	}
}

func reasons(rv *verdict.RowVerdict) []string {
	var out []string
	for _, r := range rv.Validity.Reasons {
		out = append(out, r.Message)
	}
	return out
}
