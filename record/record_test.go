package record

import (
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/internal/judgefixture"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

// TestMostFailed: a run without rules whose requests mostly failed says
// so (the command exits 1 on it).
func TestMostFailed(t *testing.T) {
	plan, err := schema.Parse("x.yaml", []byte("apiVersion: infermatrix/v1\nname: x\nserver: {target: builtin}\nrows: [{id: r, requests: 100, concurrency: 1, input_tokens: 8, output_tokens: 8}]\n"), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rs := judgefixture.ValidRow("r", 1, 50, 100)
	rs.Requests = metrics.Requests{Sent: 100, Completed: 50, Failed: 50}
	rs.Errors = metrics.Errors{Total: 50, Ratio: 0.5}
	d := verdict.Judge(plan, &metrics.Summary{Rows: []metrics.RowSummary{rs}})
	if d.Verdict != verdict.NoRules || d.MostFailed || d.Failed != 50 || d.Sent != 100 {
		t.Errorf("half failed: %+v; want no rules, not most failed", d)
	}
	rs.Requests = metrics.Requests{Sent: 100, Completed: 49, Failed: 51}
	rs.Errors = metrics.Errors{Total: 51, Ratio: 0.51}
	if d := verdict.Judge(plan, &metrics.Summary{Rows: []metrics.RowSummary{rs}}); !d.MostFailed || !strings.Contains(VerdictDetail(d), "**Most requests failed** (51 of 100)") {
		t.Errorf("%+v: %s", d, VerdictDetail(d))
	}
}
