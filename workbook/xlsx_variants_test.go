package workbook

import (
	"slices"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/validity"
	"github.com/infermatrix/infermatrix/verdict"
)

// TestVariantsSheet: a run with variants gets a Variants sheet, a line per
// question and variant with the best marked, figures as numbers and a
// missing figure blank; a run without variants has no such sheet.
func TestVariantsSheet(t *testing.T) {
	p, err := schema.Parse("t.yaml", []byte(`apiVersion: infermatrix/v1
name: t
server: {target: builtin, sim: {preset: tiny-fast}, variants: [{name: a}, {name: b}]}
rows: [{id: r, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 4}]
`), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ran := metrics.RowSummary{ID: "r@a", Base: "r@a", Status: metrics.RowComplete, Throughput: metrics.Throughput{OutputTokensPerS: 1200}}
	ran.Metrics.TTFT = metrics.Dist{Count: 5, P95: 42}
	sum := &metrics.Summary{Rows: []metrics.RowSummary{ran, {ID: "r@b", Base: "r@b", Status: metrics.RowNotRun, Error: "server never got ready"}}}
	d := &verdict.Decision{Rows: []verdict.RowVerdict{{ID: "r@a", Verdict: verdict.Pass, Validity: validity.Verdict{Valid: true}}, {ID: "r@b", Verdict: verdict.NotRun}}}
	in := &Input{Plan: p, Manifest: &rundir.Manifest{}, Summary: sum, Decision: d}
	rows, err := openXLSX(t, renderXLSX(t, in)).GetRows("Variants")
	if err != nil || len(rows) != 3 {
		t.Fatalf("Variants sheet: %v, %q", err, rows)
	}
	if a := rows[1]; !slices.Equal(a[:8], []string{"r", "a", "best", "r@a", "pass", "yes", "1,200", "42.0"}) {
		t.Errorf("variant a's line = %q", a)
	}
	if b := rows[2]; b[1] != "b" || b[5] != "no" || b[6] != "" || !slices.Contains(b, "not run: server never got ready") {
		t.Errorf("variant b's line = %q; want not accepted, no figures, and why", b)
	}
	in.Plan = &schema.Plan{Experiment: p.Experiment}
	if sheets := openXLSX(t, renderXLSX(t, in)).GetSheetList(); slices.Contains(sheets, "Variants") {
		t.Errorf("a run without variants has sheets %q", sheets)
	}
}
