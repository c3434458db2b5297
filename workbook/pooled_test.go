package workbook

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

const pooledExperiment = `apiVersion: infermatrix/v1
name: pooled
server: {target: builtin}
defaults: {requests: 20, input_tokens: 128, output_tokens: 16}
rows:
  - {id: chat, concurrency: 1}
  - {id: emb, api: embeddings, batch: 8, sweep: {concurrency: [1, 4]}}
`

// pooledInput is a chat row beside an embeddings sweep whose rows have
// E2E, inputs/s and input tokens/s, and no TTFT, TPOT or output.
func pooledInput(t *testing.T, sweeps bool) *Input {
	t.Helper()
	plan, err := schema.Parse("pooled.yaml", []byte(pooledExperiment), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dist := func(vs ...float64) metrics.Dist { return metrics.NewDist(vs, nil) }
	chat := metrics.RowSummary{ID: "chat", Base: "chat", Status: metrics.RowComplete, Requests: metrics.Requests{Sent: 20, Completed: 20}}
	chat.Metrics.TTFT, chat.Metrics.TPOT, chat.Metrics.E2E = dist(30, 40), dist(10, 11), dist(200, 260)
	chat.Throughput = metrics.Throughput{RequestsPerS: 3, OutputTokensPerS: 100, OutputTokensPerSU: 95, InputTokensPerS: 384}
	emb := func(id string, e2e, inputs float64) metrics.RowSummary {
		rs := metrics.RowSummary{ID: id, Base: "emb", Status: metrics.RowComplete, Requests: metrics.Requests{Sent: 20, Completed: 20}}
		rs.Metrics.E2E = dist(e2e, e2e*1.2)
		rs.Throughput = metrics.Throughput{RequestsPerS: inputs / 8, InputsPerS: inputs, InputTokensPerS: inputs * 128}
		return rs
	}
	sum := &metrics.Summary{Format: metrics.SummaryFormat, Experiment: "pooled", Semantics: metrics.SemInfermatrix,
		Rows: []metrics.RowSummary{chat, emb("emb/c=1", 20, 400), emb("emb/c=4", 45, 1300)}}
	in := &Input{Plan: plan, Summary: sum, Decision: verdict.Judge(plan, sum)}
	if sweeps {
		in.Analysis = &analysis.Analysis{Sweeps: []analysis.SweepAnalysis{{Base: "emb", Rows: []string{"emb/c=1", "emb/c=4"}}}}
	}
	return in
}

// TestPooledRowsSummarySheet: an embeddings row's Summary line has its own
// figures (inputs/s, input tok/s, E2E) and blank cells, not 0, where it
// has none (TTFT, TPOT, output tok/s); a chat row's inputs/s is blank.
// Its sweep is charted as p95 E2E against inputs/s, and without sweeps
// the all-rows chart says it leaves the embeddings rows to their own.
func TestPooledRowsSummarySheet(t *testing.T) {
	f := openXLSX(t, renderXLSX(t, pooledInput(t, true)))
	rows, err := f.GetRows(xlsxSheetSummary, excelize.Options{RawCellValue: true})
	if err != nil || len(rows) != 4 {
		t.Fatalf("Summary sheet: %v, %d lines; want a header and 3 rows", err, len(rows))
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for _, h := range []string{"Inputs/s", "Input tok/s", "Output tok/s", "Tok/s per user", "TTFT p95 (ms)", "TPOT p95 (ms)", "E2E p95 (ms)"} {
		if _, ok := col[h]; !ok {
			t.Fatalf("Summary header %q lacks %q", rows[0], h)
		}
	}
	cell := func(line int, h string) string {
		if r := rows[line]; col[h] < len(r) {
			return r[col[h]]
		}
		return ""
	}
	for line := 2; line <= 3; line++ {
		id := cell(line, "Row")
		for _, h := range []string{"Output tok/s", "Tok/s per user", "TTFT p95 (ms)", "TPOT p95 (ms)", "ITL p95 (ms)"} {
			if v := cell(line, h); v != "" {
				t.Errorf("%s's %s is %q; want blank: an embeddings row generates nothing", id, h, v)
			}
		}
		for _, h := range []string{"Inputs/s", "Input tok/s", "E2E p95 (ms)", "Req/s"} {
			if v := cell(line, h); v == "" || v == "0" {
				t.Errorf("%s's %s is %q; want its figure", id, h, v)
			}
		}
	}
	if got := cell(2, "Inputs/s"); got != "400" {
		t.Errorf("emb/c=1's Inputs/s is %q; want 400", got)
	}
	if v := cell(1, "Inputs/s"); v != "" {
		t.Errorf("chat's Inputs/s is %q; want blank", v)
	}
	if v := cell(1, "Output tok/s"); v != "100" {
		t.Errorf("chat's Output tok/s is %q; want 100", v)
	}

	chart := zipParts(t, renderXLSX(t, pooledInput(t, true)))["xl/charts/chart1.xml"]
	inputs, e2e := colName(col["Inputs/s"]), colName(col["E2E p95 (ms)"])
	for _, w := range []string{"p95 E2E latency against inputs per second", "$" + inputs + "$3:$" + inputs + "$4", "$" + e2e + "$3:$" + e2e + "$4"} {
		if !strings.Contains(chart, w) {
			t.Errorf("the embeddings sweep's chart lacks %q:\n%s", w, chart)
		}
	}

	f = openXLSX(t, renderXLSX(t, pooledInput(t, false)))
	got, err := f.GetRows(xlsxSheetCharts)
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, r := range got {
		text = append(text, strings.Join(r, " "))
	}
	all := strings.Join(text, "\n")
	for _, w := range []string{"All generating rows", "The 2 embeddings and rerank rows are not on this chart", "Embeddings and rerank rows emb/c=1 to emb/c=4"} {
		if !strings.Contains(all, w) {
			t.Errorf("Charts sheet without sweeps lacks %q:\n%s", w, all)
		}
	}
	if n := strings.Count(strings.Join(slices.Sorted(maps.Keys(zipParts(t, renderXLSX(t, pooledInput(t, false))))), " "), "xl/charts/chart"); n != 2 {
		t.Errorf("Charts sheet without sweeps has %d charts; want the chat row's and the embeddings rows'", n)
	}
}

// colName is a 0-based column's letters.
func colName(i int) string {
	name, _ := excelize.ColumnNumberToName(i + 1)
	return name
}
