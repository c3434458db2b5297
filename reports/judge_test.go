package reports

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

const experiment = `apiVersion: infermatrix/v1
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

// row builds a summary with ttft and tpot samples.
func row(id string, ttft, tpot []float64, failed int) metrics.RowSummary {
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

func fixture(t *testing.T) (*schema.Plan, *metrics.Summary) {
	t.Helper()
	plan, err := schema.Parse("judged.yaml", []byte(experiment), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sum := &metrics.Summary{Format: metrics.SummaryFormat, Experiment: "judged", SLO: plan.SLO, Rows: []metrics.RowSummary{
		row("idle", []float64{20, 21, 22}, []float64{10, 10, 11}, 0),
		row("busy", []float64{90, 150, 400}, []float64{30, 35, 52}, 1),
		row("broken", nil, nil, 3),
		{ID: "gone", Base: "gone", Status: metrics.RowNotRun},
		row("free", []float64{5}, []float64{5}, 0),
	}}
	return plan, sum
}

func TestJudge(t *testing.T) {
	plan, sum := fixture(t)
	d := verdict.Judge(plan, sum)
	if d.Verdict != verdict.Fail || d.Passed() {
		t.Errorf("Verdict = %s; want fail", d.Verdict)
	}
	want := map[string]string{"idle": verdict.Pass, "busy": verdict.Fail, "broken": verdict.Fail, "gone": verdict.NotRun, "free": verdict.NoRules}
	for _, rv := range d.Rows {
		if rv.Verdict != want[rv.ID] {
			t.Errorf("row %s: verdict %q; want %q", rv.ID, rv.Verdict, want[rv.ID])
		}
	}
	busy := d.Rows[1].Rules[0]
	if busy.Pass || len(busy.Failed) != 3 {
		t.Fatalf("busy: %+v; want three failed clauses", busy)
	}
	c := busy.Failed[0]
	if c.Text != "ttft.p95 < 100" || len(c.Values) != 1 || c.Values[0].Name != "ttft.p95" || c.Values[0].Value != 375 {
		t.Errorf("busy clause 0 = %+v; want ttft.p95 < 100 with ttft.p95 = 375", c)
	}
	if busy.Failed[2].Text != "errors.total == 0" || busy.Failed[2].Values[0].Value != 1 {
		t.Errorf("busy clause 2 = %+v", busy.Failed[2])
	}
	// A row where every request failed has empty distributions: it must
	// fail, not pass on zeros.
	broken := d.Rows[2].Rules[0]
	if broken.Pass || !strings.Contains(broken.Reason, "no successful requests") {
		t.Errorf("broken: %+v; want a failure for having no successful requests", broken)
	}
}

func TestJudgeEmptyDistribution(t *testing.T) {
	plan, sum := fixture(t)
	// TPOT has no samples (one-token outputs), TTFT has: the clause on
	// tpot must fail saying why, not pass on tpot.p95 == 0.
	sum.Rows[0].Metrics.TPOT = metrics.NewDist(nil, nil)
	d := verdict.Judge(plan, sum)
	r := d.Rows[0].Rules[0]
	if r.Pass || len(r.Failed) != 1 || r.Failed[0].Reason != "tpot has no samples" {
		t.Errorf("rule = %+v; want one failed clause: tpot has no samples", r)
	}
}

func TestHypotheses(t *testing.T) {
	plan, sum := fixture(t)
	d := verdict.Judge(plan, sum)
	if len(d.Hypotheses) != 2 {
		t.Fatalf("hypotheses = %+v", d.Hypotheses)
	}
	h1, h2 := d.Hypotheses[0], d.Hypotheses[1]
	if h1.Verdict != verdict.Supported || len(h1.Values) != 2 || h1.Values[0].Value != 375 || h1.Values[1].Value != 21.9 {
		t.Errorf("H1 = %+v; want supported with both p95s", h1)
	}
	if h2.Verdict != verdict.Inconclusive || !strings.Contains(h2.Reason, "no data for row gone") {
		t.Errorf("H2 = %+v; want inconclusive: the row did not run", h2)
	}
	sum.Rows[1].Metrics.TTFT = metrics.NewDist([]float64{1, 2, 3}, nil)
	if h := verdict.Judge(plan, sum).Hypotheses[0]; h.Verdict != verdict.Refuted {
		t.Errorf("H1 with a fast busy row = %s; want refuted", h.Verdict)
	}
}

// TestHypothesisOnEmptyMetric checks that a claim about a metric with no
// samples (a non-streamed row has no TTFT) is inconclusive, not decided on
// a zero.
func TestHypothesisOnEmptyMetric(t *testing.T) {
	plan, sum := fixture(t)
	sum.Rows[0].Metrics.TTFT = metrics.NewDist(nil, nil)
	h := verdict.Judge(plan, sum).Hypotheses[0]
	if h.Verdict != verdict.Inconclusive || h.Reason != "it depends on rows.idle.ttft, which has no samples" {
		t.Errorf("H1 = %+v; want inconclusive, naming the empty metric", h)
	}
	for _, v := range h.Values {
		if v.Name == "rows.idle.ttft.p95" {
			t.Errorf("evidence shows %s = %v for a metric with no samples", v.Name, v.Value)
		}
	}
}

// TestRulesOnMissingData checks that a rule passes only when its verdict
// does not depend on a metric with no samples.
func TestRulesOnMissingData(t *testing.T) {
	tests := []struct {
		expect string
		pass   bool
	}{
		{"ttft.p95 < 100 || e2e.p95 < 100", true}, // e2e alone decides
		{"ttft.p95 < 100", false},
		{"!(ttft.p95 > 1000)", false}, // would pass on NaN or 0
		{"ttft.p95 > 100", false},     // would pass on missing data read as +Inf alone
		{"ttft.count == 0 && e2e.p95 < 100", true},
		{"p(ttft, 90) < 5", false},
	}
	for _, tt := range tests {
		plan, err := schema.Parse("x.yaml", []byte(`apiVersion: infermatrix/v1
name: x
server: {target: builtin}
rows: [{id: r, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 8, streaming: false}]
acceptance: [{name: a, expect: "`+tt.expect+`"}]
validity: {ignore: [samples, steady_state]}
`), schema.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rs := row("r", nil, nil, 0)
		rs.Metrics.E2E = metrics.NewDist([]float64{50, 60}, nil)
		rs.Requests.Completed, rs.Requests.Sent = 2, 2
		d := verdict.Judge(plan, &metrics.Summary{Rows: []metrics.RowSummary{rs}})
		if got := d.Rows[0].Verdict == verdict.Pass; got != tt.pass {
			t.Errorf("%s: pass = %v; want %v (%+v, %+v)", tt.expect, got, tt.pass, d.Rows[0].Rules, d.Rows[0].Validity)
		}
	}
}

func TestRunVerdicts(t *testing.T) {
	plan, sum := fixture(t)
	// Only rows without failures: idle passes, gone did not run.
	sum.Rows = []metrics.RowSummary{sum.Rows[0], sum.Rows[3]}
	if d := verdict.Judge(plan, sum); d.Verdict != verdict.Inconclusive {
		t.Errorf("verdict %s; want inconclusive: a row with rules did not run", d.Verdict)
	}
	sum.Interrupted = true
	if d := verdict.Judge(plan, sum); d.Verdict != verdict.Incomplete {
		t.Errorf("verdict %s; want incomplete: the run was interrupted", d.Verdict)
	}
	noRules, err := schema.Parse("x.yaml", []byte(`apiVersion: infermatrix/v1
name: x
server: {target: builtin}
rows: [{id: r, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 8}]
`), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := verdict.Judge(noRules, &metrics.Summary{Rows: []metrics.RowSummary{row("r", nil, nil, 2)}})
	if d.Verdict != verdict.NoRules {
		t.Errorf("verdict %s; want none: nothing was judged", d.Verdict)
	}
}

func TestInterruptedRunHasNoPassingVerdict(t *testing.T) {
	plan, sum := fixture(t)
	sum.Rows = sum.Rows[:1] // only idle, which passes
	sum.Interrupted = true
	if d := verdict.Judge(plan, sum); d.Verdict == verdict.Pass {
		t.Error("an interrupted run was judged pass")
	}
}

func TestMarkdown(t *testing.T) {
	plan, sum := fixture(t)
	sum.Rows[1].Errors.ByClass = map[string]int{metrics.ErrHTTP: 1}
	start := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	end := start.Add(90 * time.Second)
	man := &rundir.Manifest{
		Started: start, Ended: &end, Command: []string{"infermatrix", "run", "judged.yaml", "--out", "results/x", "--rows", "idle,busy"},
		Experiment: rundir.ExperimentInfo{Name: "judged", File: "judged.yaml", SHA256: plan.SHA256},
		Server:     rundir.ServerInfo{Declared: plan.Server},
	}
	var b bytes.Buffer
	in := &Input{Plan: plan, Manifest: man, Summary: sum, Decision: verdict.Judge(plan, sum)}
	if err := WriteMarkdown(&b, in); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"# Decision record: judged",
		"**Verdict: FAIL.** 2 of 3 valid judged rows fail acceptance: `busy`, `broken`. Also: with rules but not run: `gone`.",
		"| `busy` | latency | **fail**: `ttft.p95 < 100` with ttft.p95 = 375; `tpot.p95 < 40` with tpot.p95 = 50.3; `errors.total == 0` with errors.total = 1 |",
		"- `broken`: latency: no successful requests (3 sent, 3 failed)",
		"| `gone` | not run |",
		"| H2 | The missing row is fast.<br>`rows.gone.ttft.p95 < 1` | **inconclusive** | no data for row gone |",
		"| `idle` | 3 / 3 | 21.0 / 21.9 / 22.0 |",
		// --out is dropped: that directory now exists and a rerun must not reuse it.
		"```sh\ninfermatrix run judged.yaml --rows idle,busy\n```",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("decision.md lacks %q", want)
		}
	}
	// Sections in the order a reviewer reads them.
	last := -1
	for _, h := range []string{"## Hypotheses", "## Validity", "## Server and run", "## Workload matrix", "## Results", "## Acceptance", "## Rejected rows", "## Reproduce"} {
		i := strings.Index(md, h)
		if i < last {
			t.Errorf("section %q out of order", h)
		}
		last = i
	}
	// One line per row in each table.
	if n := strings.Count(md, "| `idle` |"); n != 3 {
		t.Errorf("idle appears in %d table rows; want 3 (matrix, results, acceptance)", n)
	}
}

func TestCellEscapesServerText(t *testing.T) {
	if got := cell("a|b\n<script>"); got != `a\|b &lt;script&gt;` {
		t.Errorf("cell = %q", got)
	}
	if got := code("a < b || c"); got != "`a < b \\|\\| c`" {
		t.Errorf("code = %q", got)
	}
}

func TestCSV(t *testing.T) {
	plan, sum := fixture(t)
	sum.Percentiles = []float64{50, 99.9}
	var b bytes.Buffer
	if err := WriteCSV(&b, sum, verdict.Judge(plan, sum)); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+len(sum.Rows) {
		t.Fatalf("%d records; want a header and one line per row", len(recs))
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for _, h := range []string{"row", "verdict", "ttft_ms_p95", "ttft_ms_p99.9", "tpot_ms_mean", "output_tokens_per_s", "goodput_ratio", "errors_total"} {
		if _, ok := col[h]; !ok {
			t.Errorf("no column %q", h)
		}
	}
	busy := recs[2]
	if busy[col["row"]] != "busy" || busy[col["verdict"]] != verdict.Fail || busy[col["ttft_ms_p95"]] != "375" {
		t.Errorf("busy line = %v", busy)
	}
	if broken := recs[3]; broken[col["ttft_ms_count"]] != "0" || broken[col["ttft_ms_p95"]] != "" {
		t.Errorf("broken line: count %q p95 %q; want 0 and empty", broken[col["ttft_ms_count"]], broken[col["ttft_ms_p95"]])
	}
}
