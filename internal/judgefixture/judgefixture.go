// Package judgefixture holds the hand-built runs that the tests of judging
// (verdict) and of rendering the judgement (reports) share: a plan and
// summary with a passing, a failing, a broken and a missing row, and a run
// held against a baseline run. It is for tests only; nothing else imports it.
package judgefixture

import (
	"slices"
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

// Experiment is the plan Judged parses.
const Experiment = `apiVersion: infermatrix/v1
name: judged
description: A fixture with a passing row, a failing row and a broken one.
hypotheses:
  - id: H1
    statement: Busy is slower than idle.
    expect: rows.busy.ttft.p95 > rows.idle.ttft.p95
  - id: H2
    statement: The missing row is fast.
    expect: rows.gone.ttft.p95 < 1
server: {target: builtin}
defaults: {requests: 10, input_tokens: 16, output_tokens: 8}
slo: {ttft_ms: 100}
rows:
  - {id: idle, concurrency: 1}
  - {id: busy, concurrency: 8}
  - {id: broken, concurrency: 1}
  - {id: gone, concurrency: 1}
  - {id: free, concurrency: 1}
acceptance:
  - name: latency
    rows: [idle, busy, broken, gone]
    expect: ttft.p95 < 100 && tpot.p95 < 40 && errors.total == 0
# The fixture's rows hold a handful of samples: these tests are about
# the rules, validity_test.go about the checks.
validity: {ignore: [samples]}
`

// Row builds a summary with ttft and tpot samples.
func Row(id string, ttft, tpot []float64, failed int) metrics.RowSummary {
	s := metrics.RowSummary{ID: id, Base: id, Status: metrics.RowComplete}
	s.Metrics.TTFT = metrics.NewDist(ttft, nil)
	s.Metrics.TPOT = metrics.NewDist(tpot, nil)
	s.Requests = metrics.Requests{Sent: len(ttft) + failed, Completed: len(ttft), Failed: failed}
	s.Errors.Total = failed
	if failed > 0 {
		s.Errors.ByClass = map[string]int{metrics.ErrHTTP: failed}
	}
	return s
}

// Judged is Experiment's plan and a summary of its rows: idle passes, busy
// fails, broken has only failed requests, gone did not run, free has no rules.
func Judged(t testing.TB) (*schema.Plan, *metrics.Summary) {
	t.Helper()
	plan, err := schema.Parse("judged.yaml", []byte(Experiment), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sum := &metrics.Summary{Format: metrics.SummaryFormat, Experiment: "judged", SLO: plan.SLO, Rows: []metrics.RowSummary{
		Row("idle", []float64{20, 21, 22}, []float64{10, 10, 11}, 0),
		Row("busy", []float64{90, 150, 400}, []float64{30, 35, 52}, 1),
		Row("broken", nil, nil, 3),
		{ID: "gone", Base: "gone", Status: metrics.RowNotRun},
		Row("free", []float64{5}, []float64{5}, 0),
	}}
	return plan, sum
}

// ValidRow is a summary the validity checks accept, with the given TTFT
// (every sample) and output throughput.
func ValidRow(id string, conc int, ttft, tput float64) metrics.RowSummary {
	rs := metrics.RowSummary{ID: id, Base: strings.Split(id, "/")[0], Status: metrics.RowComplete, WindowS: 60}
	rs.Requests = metrics.Requests{Sent: 400, Completed: 400}
	rs.Metrics.TTFT = metrics.NewDist(slices.Repeat([]float64{ttft}, 400), nil)
	rs.Metrics.E2E = metrics.NewDist(slices.Repeat([]float64{1000}, 400), nil)
	rs.InFlight = metrics.InFlight{Mean: float64(conc), Max: conc}
	rs.Throughput.OutputTokensPerS = tput
	return rs
}

// BaselineExperiment is the plan Baseline parses, with %B% for row b's
// concurrency (16 in the run, 32 in its baseline).
const BaselineExperiment = `apiVersion: infermatrix/v1
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

// Baseline is a run and a hand-built baseline run: row a matches,
// b ran at another concurrency in the baseline, c is invalid there, d is
// missing from it, e has no rules.
func Baseline(t testing.TB, tpotA float64) (*schema.Plan, *metrics.Summary, *verdict.Baseline) {
	t.Helper()
	parse := func(b string) *schema.Plan {
		p, err := schema.Parse("held.yaml", []byte(strings.ReplaceAll(BaselineExperiment, "%B%", b)), schema.Options{Baseline: "runs/held", SkipFileChecks: true})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	plan, basePlan := parse("16"), parse("32")
	tpot := func(v float64) []float64 { return []float64{v, v, v} }
	sum := &metrics.Summary{Format: metrics.SummaryFormat, Rows: []metrics.RowSummary{
		Row("a", tpot(20), tpot(tpotA), 0), Row("b", tpot(20), tpot(20), 0), Row("c", tpot(20), tpot(20), 0),
		Row("d", tpot(20), tpot(20), 0), Row("e", tpot(20), tpot(20), 0),
	}}
	baseSum := &metrics.Summary{Format: metrics.SummaryFormat, Rows: []metrics.RowSummary{
		Row("a", tpot(20), tpot(20), 0), Row("b", tpot(20), tpot(20), 0), Row("c", tpot(20), tpot(20), 0), Row("e", tpot(20), tpot(20), 0),
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
