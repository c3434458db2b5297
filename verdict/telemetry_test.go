package verdict_test

import (
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/internal/judgefixture"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

const telemetryExperiment = `apiVersion: infermatrix/v1
name: telemetry-rules
server: {target: builtin}
defaults: {requests: 10, input_tokens: 16, output_tokens: 8}
rows:
  - {id: scraped, concurrency: 1}
  - {id: unscraped, concurrency: 1}
  - {id: partial, concurrency: 1}
acceptance:
  - name: no-preemption
    expect: server.preemptions == 0 && server.kv_cache_usage.max < 0.9
hypotheses:
  - id: H1
    statement: The scraped row kept more KV blocks than the unscraped one.
    expect: rows.scraped.server.kv_cache_usage.max > rows.unscraped.server.kv_cache_usage.max
  - id: H2
    statement: The scraped row's GPUs were busy.
    expect: rows.scraped.gpu.utilization.mean > 0.5
validity: {ignore: [samples]}
`

func telemetryFixture(t *testing.T) (*schema.Plan, *metrics.Summary) {
	t.Helper()
	plan, err := schema.Parse("telemetry.yaml", []byte(telemetryExperiment), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := func(v float64) *float64 { return &v }
	scraped := judgefixture.Row("scraped", []float64{20, 21, 22}, []float64{10, 10, 11}, 0)
	scraped.Server = &metrics.ServerTelemetry{Scrapes: 5, Preemptions: f(0),
		KVCacheUsage: &metrics.Gauge{Mean: 0.4, Min: 0.1, Max: 0.6, Samples: 5}}
	scraped.GPU = &metrics.GPUTelemetry{GPUs: 1, Scrapes: 5, GPUGauges: metrics.GPUGauges{Utilization: &metrics.Gauge{Mean: 0.7, Min: 0.2, Max: 0.9, Samples: 5}}}
	partial := judgefixture.Row("partial", []float64{20, 21, 22}, []float64{10, 10, 11}, 0)
	partial.Server = &metrics.ServerTelemetry{Scrapes: 5, Preemptions: f(3),
		Notes: []string{"vllm:kv_cache_usage_perc not published"}}
	sum := &metrics.Summary{Format: metrics.SummaryFormat, Experiment: "telemetry-rules", Rows: []metrics.RowSummary{
		scraped, judgefixture.Row("unscraped", []float64{20, 21, 22}, []float64{10, 10, 11}, 0), partial,
	}}
	return plan, sum
}

// TestJudgeTelemetryRules: a rule on server.* is judged on a row with
// telemetry, and on a row without it is not passed on nothing: it fails
// saying the data is missing, as a rule on an empty distribution does.
func TestJudgeTelemetryRules(t *testing.T) {
	plan, sum := telemetryFixture(t)
	d := verdict.Judge(plan, sum)
	scraped, unscraped, partial := d.Row("scraped"), d.Row("unscraped"), d.Row("partial")
	if scraped.Verdict != verdict.Pass || !scraped.Rules[0].Pass {
		t.Errorf("scraped = %+v; want pass (no preemption, KV at most 0.6)", scraped)
	}
	r := unscraped.Rules[0]
	if unscraped.Verdict == verdict.Pass || r.Pass {
		t.Fatalf("unscraped = %+v; a rule on telemetry the row lacks must not pass", unscraped)
	}
	if len(r.Failed) != 2 || r.Failed[0].Reason != "the row has no server telemetry" || len(r.Failed[0].Values) != 0 {
		t.Errorf("unscraped clauses = %+v; want both failing as missing data, with no value shown", r.Failed)
	}
	// A server that publishes preemptions but not its KV cache: the
	// preemptions are judged (and fail), the KV clause is missing data.
	p := partial.Rules[0]
	if p.Pass || len(p.Failed) != 2 {
		t.Fatalf("partial = %+v; want two failed clauses", p)
	}
	if c := p.Failed[0]; c.Reason != "" || len(c.Values) != 1 || c.Values[0].Name != "server.preemptions" || c.Values[0].Value != 3 {
		t.Errorf("partial clause 0 = %+v; want server.preemptions = 3", c)
	}
	if c := p.Failed[1]; c.Reason != "the server did not report server.kv_cache_usage" {
		t.Errorf("partial clause 1 = %+v; want the KV gauge named as not reported", c)
	}
	h1, h2 := d.Hypotheses[0], d.Hypotheses[1]
	if h1.Verdict != verdict.Inconclusive || !strings.Contains(h1.Reason, "row unscraped: the row has no server telemetry") {
		t.Errorf("H1 = %+v; want inconclusive on the unscraped row's missing telemetry", h1)
	}
	for _, v := range h1.Values {
		if strings.HasPrefix(v.Name, "rows.unscraped.") {
			t.Errorf("H1 shows %s = %v, a figure the row does not have", v.Name, v.Value)
		}
	}
	if h2.Verdict != verdict.Supported || len(h2.Values) != 1 || h2.Values[0].Value != 0.7 {
		t.Errorf("H2 = %+v; want supported with gpu.utilization.mean = 0.7", h2)
	}
}
