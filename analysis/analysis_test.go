package analysis

import (
	"fmt"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/validity"
	"github.com/infermatrix/infermatrix/verdict"
)

// sweepInput builds a four-point concurrency sweep whose throughput and
// latency are given per row, with the verdicts given.
func sweepInput(t *testing.T, tput, ttftP95 []float64, verdicts []string) *input {
	return sweepInputOrder(t, "[1, 4, 16, 64]", tput, ttftP95, verdicts)
}

func sweepInputOrder(t *testing.T, values string, tput, ttftP95 []float64, verdicts []string) *input {
	t.Helper()
	plan, err := schema.Parse("s.yaml", []byte(`apiVersion: infermatrix/v1
name: s
server: {target: builtin}
rows:
  - {id: sat, requests: 10, input_tokens: 100, output_tokens: 50, sweep: {concurrency: `+values+`}}
  - {id: single, requests: 10, concurrency: 1, input_tokens: 100, output_tokens: 50}
`), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sum := &metrics.Summary{}
	d := &verdict.Decision{}
	for i, r := range plan.Rows[:4] {
		rs := metrics.RowSummary{ID: r.ID, Base: r.Base, Status: metrics.RowComplete}
		rs.Throughput.OutputTokensPerS = tput[i]
		rs.Metrics.TTFT.P95 = ttftP95[i]
		rs.Metrics.TPOT.P95 = 10
		rs.Metrics.E2E.P50 = 500
		sum.Rows = append(sum.Rows, rs)
		d.Rows = append(d.Rows, verdict.RowVerdict{ID: r.ID, Verdict: verdicts[i], Validity: validity.Verdict{Valid: verdicts[i] != verdict.Invalid}})
	}
	return &input{Plan: plan, Summary: sum, Decision: d}
}

// TestOperatingPointAndKnee checks the two answers a sweep is run for: the
// best passing row, and where more load stopped buying throughput.
func TestOperatingPointAndKnee(t *testing.T) {
	in := sweepInput(t,
		[]float64{100, 390, 1400, 1600}, // ×3.9, ×3.6, then ×1.14 for ×4 load
		[]float64{50, 55, 80, 900},      // TTFT p95 climbs at c=64
		[]string{verdict.Pass, verdict.Pass, verdict.Pass, verdict.Fail})
	sw := analyzeSweeps(in)
	if len(sw) != 1 || sw[0].Base != "sat" || len(sw[0].Rows) != 4 {
		t.Fatalf("sweeps %+v; want one of four rows (the plain row is no sweep)", sw)
	}
	if sw[0].OperatingPoint != "sat/c=16" {
		t.Errorf("operating point %q, want sat/c=16 (c=64 has more throughput but fails)", sw[0].OperatingPoint)
	}
	if sw[0].Knee != "sat/c=16" {
		t.Errorf("knee %q, want sat/c=16", sw[0].Knee)
	}
	for _, want := range []string{"(1400 tok/s)", "raised the load 300%", "only 14%", "TTFT p95 rose 1025%"} {
		if !strings.Contains(sw[0].Why, want) {
			t.Errorf("why %q lacks %q", sw[0].Why, want)
		}
	}

	// Linear scaling has no knee; no passing row, no operating point.
	lin := analyzeSweeps(sweepInput(t, []float64{100, 400, 1600, 6400}, []float64{50, 50, 51, 52}, []string{verdict.Fail, verdict.Fail, verdict.Fail, verdict.Fail}))
	if lin[0].Knee != "" || lin[0].OperatingPoint != "" || !strings.Contains(lin[0].Why, "no valid row of the sweep passes") || !strings.Contains(lin[0].Why, "no knee") {
		t.Errorf("linear, all failing: %+v", lin[0])
	}
	// Values written in descending order are walked by load.
	desc := analyzeSweeps(sweepInputOrder(t, "[64, 16, 4, 1]",
		[]float64{1600, 1400, 390, 100}, []float64{900, 80, 55, 50}, []string{verdict.Fail, verdict.Pass, verdict.Pass, verdict.Pass}))
	if desc[0].Knee != "sat/c=16" || desc[0].OperatingPoint != "sat/c=16" {
		t.Errorf("descending sweep: %+v", desc[0])
	}
	// Rows with rules that did not run: neither "no rules" nor a knee.
	notRun := sweepInput(t, []float64{100, 390, 1400, 1600}, []float64{50, 55, 80, 900}, []string{verdict.NotRun, verdict.NotRun, verdict.NotRun, verdict.NotRun})
	for i := range notRun.Summary.Rows {
		notRun.Summary.Rows[i].Status = metrics.RowNotRun
	}
	nr := analyzeSweeps(notRun)
	if nr[0].Knee != "" || !strings.Contains(nr[0].Why, "no row of the sweep was judged") || !strings.Contains(nr[0].Why, "fewer than two valid rows") {
		t.Errorf("not run: %+v", nr[0])
	}
	// An invalid row places no knee and is no operating point, however
	// good its figures: here c=16's (a warm cache, say) would otherwise
	// put the knee there and make it the operating point.
	inv := analyzeSweeps(sweepInput(t, []float64{100, 390, 1400, 1600}, []float64{50, 55, 80, 900}, []string{verdict.Pass, verdict.Pass, verdict.Invalid, verdict.Fail}))
	if inv[0].OperatingPoint != "sat/c=4" || inv[0].Knee == "sat/c=16" {
		t.Errorf("invalid c=16: %+v; want the operating point at c=4 and no knee at c=16", inv[0])
	}
	// Flat throughput without a latency rise is no knee either: the
	// server is not queueing.
	flat := analyzeSweeps(sweepInput(t, []float64{100, 110, 120, 130}, []float64{50, 50, 50, 50}, []string{verdict.NoRules, verdict.NoRules, verdict.NoRules, verdict.NoRules}))
	if flat[0].Knee != "" || !strings.Contains(flat[0].Why, "no acceptance rules") {
		t.Errorf("flat: %+v", flat[0])
	}
}

// TestSearchProbesInLoadOrder: a search's probes run in the order the
// search picks them (8, 32, 16, 24), but its sweep analysis, which the
// knee and the plots' lines read, lists them by load.
func TestSearchProbesInLoadOrder(t *testing.T) {
	plan := &schema.Plan{}
	for i, c := range []int{8, 32, 16, 24} {
		id := fmt.Sprintf("s/c=%d", c)
		plan.Rows = append(plan.Rows, schema.PlannedRow{ID: id, Base: "s",
			Load:  schema.LoadPlan{Mode: schema.ModeConcurrency, Concurrency: c},
			Probe: &schema.ProbeInfo{Search: "s", Index: i + 1}})
	}
	a := Analyze(plan, &metrics.Summary{}, &verdict.Decision{})
	if len(a.Sweeps) != 1 || strings.Join(a.Sweeps[0].Rows, " ") != "s/c=8 s/c=16 s/c=24 s/c=32" {
		t.Errorf("sweeps %+v; want the probes by load", a.Sweeps)
	}
}
