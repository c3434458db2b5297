package workbook

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/internal/recordfixture"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/verdict"
)

// xlsxInput is the shared record fixture as the workbook's input.
func xlsxInput(t testing.TB) *Input {
	r := recordfixture.New(t)
	return &Input{Plan: r.Plan, Manifest: r.Manifest, Summary: r.Summary, Decision: r.Decision, Analysis: r.Analysis, Records: r.Records}
}

func renderXLSX(t testing.TB, in *Input) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteXLSX(&b, in); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func openXLSX(t *testing.T, data []byte) *excelize.File {
	t.Helper()
	f, err := excelize.OpenReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func cellValue(t *testing.T, f *excelize.File, sheet, cell string) string {
	t.Helper()
	v, err := f.GetCellValue(sheet, cell, excelize.Options{RawCellValue: true})
	if err != nil {
		t.Fatalf("%s!%s: %v", sheet, cell, err)
	}
	return v
}

func cellStyle(t *testing.T, f *excelize.File, sheet, cell string) *excelize.Style {
	t.Helper()
	id, err := f.GetCellStyle(sheet, cell)
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.GetStyle(id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func fillColor(s *excelize.Style) string {
	if len(s.Fill.Color) == 0 {
		return ""
	}
	return s.Fill.Color[0]
}

// zipParts reads every part of a workbook.
func zipParts(t *testing.T, data []byte) map[string]string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, zf := range zr.File {
		rc, err := zf.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %v", zf.Name, err)
		}
		out[zf.Name] = string(b)
	}
	return out
}

func TestXLSXSheets(t *testing.T) {
	f := openXLSX(t, renderXLSX(t, xlsxInput(t)))
	want := []string{"Summary", "Acceptance", "Predictions", "Telemetry", "Diagnosis", "Charts", "Metadata", "r-chat", "r-sat_c=1", "r-sat_c=4", "r-sat_c=8"}
	if got := f.GetSheetList(); !slices.Equal(got, want) {
		t.Errorf("sheets = %q; want %q", got, want)
	}
	if got := f.GetActiveSheetIndex(); got != 0 {
		t.Errorf("active sheet = %d; want 0 (Summary)", got)
	}
}

func TestXLSXSummary(t *testing.T) {
	f := openXLSX(t, renderXLSX(t, xlsxInput(t)))
	const s = "Summary"
	for cell, want := range map[string]string{
		"A1": "Row", "B1": "Verdict", "E1": "Requests sent", "H1": "TTFT p50 (ms)", "I1": "TTFT p95 (ms)",
		"L1": "TPOT p95 (ms)", "T1": "Output tok/s", "U1": "Tok/s per user", "V1": "Req/s", "W1": "Goodput ratio",
		"X1": "Errors", "Z1": "Client-bound",
		"A2": "chat", "B2": "pass", "D2": "complete", "E2": "5", "T2": "80",
		"A4": "sat/c=4", "T4": "1234.5", "V4": "2.5", "W4": "0.8",
		"A5": "sat/c=8", "B5": "fail", "G5": "1", "X5": "1", "Y5": "http 1", "Z5": "1",
	} {
		if got := cellValue(t, f, s, cell); got != want {
			t.Errorf("Summary!%s = %q; want %q", cell, got, want)
		}
	}
	// TTFT p95 of 40 × {0.8, 1, 1.1}, interpolated.
	if got := cellValue(t, f, s, "I2"); !strings.HasPrefix(got, "43.") {
		t.Errorf("Summary!I2 (TTFT p95) = %q; want 43.x", got)
	}
	if got, _ := f.GetCellValue(s, "T4"); got != "1,235" {
		t.Errorf("Summary!T4 shows %q; want 1,235 (#,##0)", got)
	}
	if st := cellStyle(t, f, s, "I2"); st.CustomNumFmt == nil || *st.CustomNumFmt != "0.0" {
		t.Errorf("Summary!I2 number format = %v; want 0.0", st.CustomNumFmt)
	}
	if st := cellStyle(t, f, s, "T2"); st.NumFmt != 3 {
		t.Errorf("Summary!T2 number format = %d; want 3 (#,##0)", st.NumFmt)
	}
	if st := cellStyle(t, f, s, "W2"); st.CustomNumFmt == nil || *st.CustomNumFmt != "0.0%" {
		t.Errorf("Summary!W2 number format = %v; want 0.0%%", st.CustomNumFmt)
	}
	if st := cellStyle(t, f, s, "A1"); st.Font == nil || !st.Font.Bold {
		t.Error("Summary header is not bold")
	}
	for cell, want := range map[string]string{"A2": "C6EFCE", "I2": "C6EFCE", "Z2": "C6EFCE", "A5": "FFC7CE", "T5": "FFC7CE"} {
		if got := fillColor(cellStyle(t, f, s, cell)); got != want {
			t.Errorf("Summary!%s fill = %q; want %q", cell, got, want)
		}
	}
	panes, err := f.GetPanes(s)
	if err != nil {
		t.Fatal(err)
	}
	if !panes.Freeze || panes.YSplit != 1 || panes.TopLeftCell != "B2" {
		t.Errorf("Summary panes = %+v; want frozen above row 2", panes)
	}
	if w, _ := f.GetColWidth(s, "A"); w != 28 {
		t.Errorf("Summary column A width = %g; want 28", w)
	}
	parts := zipParts(t, renderXLSX(t, xlsxInput(t)))
	if wb := parts["xl/workbook.xml"]; !strings.Contains(wb, "_xlnm._FilterDatabase") || !strings.Contains(wb, "&#39;Summary&#39;!$A$1:$AD$5") {
		t.Errorf("no autofilter over Summary!A1:AD5 in workbook.xml:\n%s", wb)
	}
}

// TestXLSXBlankMeasurements checks that a metric without samples and a
// goodput without SLO are empty cells, not zeros.
func TestXLSXBlankMeasurements(t *testing.T) {
	in := xlsxInput(t)
	in.Summary.Rows[0].Metrics.TTFT = metrics.NewDist(nil, nil)
	in.Summary.SLO = metrics.SLO{}
	in.Summary.Rows = append(in.Summary.Rows, metrics.RowSummary{ID: "gone", Base: "gone", Status: metrics.RowNotRun})
	f := openXLSX(t, renderXLSX(t, in))
	for _, cell := range []string{"H2", "I2", "J2", "W2", "E6", "T6"} {
		if got := cellValue(t, f, "Summary", cell); got != "" {
			t.Errorf("Summary!%s = %q; want empty", cell, got)
		}
	}
	if got := cellValue(t, f, "Summary", "D6"); got != "not_run" {
		t.Errorf("Summary!D6 = %q; want not_run", got)
	}
}

func TestXLSXAcceptance(t *testing.T) {
	f := openXLSX(t, renderXLSX(t, xlsxInput(t)))
	rows, err := f.GetRows("Acceptance")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 {
		t.Fatalf("Acceptance has %d lines; want a header and 4", len(rows))
	}
	if want := []string{"Row", "Rule", "Expect", "Result", "Failing clauses (measured values)", "Reason"}; !slices.Equal(rows[0], want) {
		t.Errorf("Acceptance header = %q; want %q", rows[0], want)
	}
	if got := rows[1][:4]; !slices.Equal(got, []string{"chat", "latency", "ttft.p95 < 100 && tpot.p95 < 40", "pass"}) {
		t.Errorf("Acceptance line 2 = %q", got)
	}
	fail := rows[4]
	if fail[0] != "sat/c=8" || fail[3] != "fail" {
		t.Fatalf("Acceptance line 5 = %q; want sat/c=8 failing", fail)
	}
	if want := "ttft.p95 < 100 (ttft.p95 = 490.5); tpot.p95 < 40 (tpot.p95 = 57.5)"; fail[4] != want {
		t.Errorf("failing clauses = %q; want %q", fail[4], want)
	}
	if got := fillColor(cellStyle(t, f, "Acceptance", "D5")); got != "FFC7CE" {
		t.Errorf("Acceptance!D5 fill = %q; want red", got)
	}

	// A row that failed has rules but no results: they are listed.
	in := xlsxInput(t)
	in.Summary.Rows[3] = metrics.RowSummary{ID: "sat/c=8", Base: "sat", Status: metrics.RowFailed, Error: "server unreachable"}
	in.Decision = verdict.Judge(in.Plan, in.Summary)
	f = openXLSX(t, renderXLSX(t, in))
	rows, err = f.GetRows("Acceptance")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"sat/c=8", "latency", "ttft.p95 < 100 && tpot.p95 < 40", "not run", "", "the tool failed during the row: server unreachable"}
	if len(rows) != 5 || !slices.Equal(rows[4], want) {
		t.Errorf("Acceptance for a failed row = %q; want its last line %q", rows, want)
	}
}

func TestXLSXPredictions(t *testing.T) {
	in := xlsxInput(t)
	f := openXLSX(t, renderXLSX(t, in))
	rows, err := f.GetRows("Predictions")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || len(rows[0]) != 13 || rows[0][3] != "TPOT bound (ms)" || rows[1][0] != "chat" || rows[1][11] != analysis.RegimeOverhead {
		t.Errorf("Predictions = %q", rows)
	}
	if got := cellValue(t, f, "Predictions", "F2"); got != "450000" {
		t.Errorf("KV capacity = %q; want 450000", got)
	}
	if got := cellValue(t, f, "Predictions", "J2"); got != "" {
		t.Errorf("measured TTFT without a measurement = %q; want empty", got)
	}

	in.Analysis.Predictions = nil
	f = openXLSX(t, renderXLSX(t, in))
	if got := cellValue(t, f, "Predictions", "A1"); !strings.Contains(got, "no prediction") {
		t.Errorf("Predictions!A1 = %q; want a note that there is no prediction", got)
	}
}

func TestXLSXMetadata(t *testing.T) {
	data := renderXLSX(t, xlsxInput(t))
	f := openXLSX(t, data)
	rows, err := f.GetRows("Metadata")
	if err != nil {
		t.Fatal(err)
	}
	kv := map[string]string{}
	for _, r := range rows {
		if len(r) >= 2 {
			kv[r[0]] = r[1]
		}
	}
	for k, want := range map[string]string{
		"Experiment": "xlsx-fixture", "Tool version": "v0.3.0", "Model": "meta-llama/Llama-3.1-8B-Instruct",
		"Engine": "vllm", "Engine version": "0.11.0", "Engine flags": "api-key=(redacted), max-num-seqs=64",
		"GPU": "H100-SXM", "GPU count": "1", "Driver": "580.95", "CUDA": "12.8", "Semantics": "infermatrix",
		"Server URLs": "http://127.0.0.1:8000/v1", "Started (UTC)": "2026-03-01 12:00:00",
		"Verdict": "fail",
		// The sheet map.
		"r-sat_c=8": "sat/c=8",
	} {
		if kv[k] != want {
			t.Errorf("Metadata %q = %q; want %q", k, kv[k], want)
		}
	}
	if !strings.Contains(kv["Experiment SHA-256"], xlsxInput(t).Plan.SHA256) || kv["Experiment SHA-256"] == "" {
		t.Errorf("Metadata hash = %q", kv["Experiment SHA-256"])
	}
	// The user name is masked with the password: a token is often passed
	// as one (redact.URL).
	if want := "infermatrix run xlsx.yaml --target 'http://***@127.0.0.1:8000/v1'"; kv["Command"] != want {
		t.Errorf("Metadata command = %q; want %q", kv["Command"], want)
	}
	for name, part := range zipParts(t, data) {
		for _, secret := range []string{"s3cret-pw", "sk-header-secret", "sk-flag-secret"} {
			if strings.Contains(part, secret) {
				t.Errorf("%s contains the secret %q", name, secret)
			}
		}
	}
	props, err := f.GetDocProps()
	if err != nil {
		t.Fatal(err)
	}
	if props.Created != "2026-03-01T12:00:00Z" || props.Modified != props.Created {
		t.Errorf("document created %q, modified %q; want the run's start", props.Created, props.Modified)
	}
}

func TestXLSXRecords(t *testing.T) {
	f := openXLSX(t, renderXLSX(t, xlsxInput(t)))
	rows, err := f.GetRows("r-sat_c=8")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+recordfixture.RecordsPerRow["sat/c=8"] {
		t.Fatalf("r-sat_c=8 has %d lines; want a header and %d requests", len(rows), recordfixture.RecordsPerRow["sat/c=8"])
	}
	header := rows[0]
	col := func(name string) int {
		i := slices.Index(header, name)
		if i < 0 {
			t.Fatalf("no column %q in %q", name, header)
		}
		return i
	}
	ok, failed := rows[1], rows[3]
	for name, want := range map[string]string{"Seq": "0", "Warmup": "TRUE", "HTTP status": "200", "TTFT (ms)": "42.0",
		"TPOT (ms)": "10.0", "E2E (ms)": "112.0", "Input tokens (server)": "16", "Response id": "chatcmpl-0"} {
		if got := ok[col(name)]; got != want {
			t.Errorf("request 0 %s = %q; want %q", name, got, want)
		}
	}
	if got := ok[col("Start (ms from row start)")]; got != "0.5" {
		t.Errorf("request 0 start = %q; want 0.5", got)
	}
	if got := failed[col("Error class")]; got != "http" {
		t.Errorf("request 2 error class = %q; want http", got)
	}
	if got := failed[col("Error message")]; got != "503 overloaded" {
		t.Errorf("request 2 error message = %q; want the control character removed", got)
	}
	if i := col("Output tokens (server)"); i < len(ok) && ok[i] != "" {
		t.Errorf("output tokens (server) without a count = %q; want empty", ok[i])
	}
	panes, err := f.GetPanes("r-sat_c=8")
	if err != nil {
		t.Fatal(err)
	}
	if !panes.Freeze || panes.YSplit != 1 {
		t.Errorf("request sheet panes = %+v; want the header frozen", panes)
	}
	if st := cellStyle(t, f, "r-sat_c=8", "M2"); st.CustomNumFmt == nil || *st.CustomNumFmt != "0.0" {
		t.Errorf("TTFT number format = %v; want 0.0", st.CustomNumFmt)
	}
}

// TestXLSXRecordsSplit checks that a row with more requests than a sheet
// holds continues on numbered sheets, each with its header.
func TestXLSXRecordsSplit(t *testing.T) {
	defer func(n int) { xlsxMaxRows = n }(xlsxMaxRows)
	xlsxMaxRows = 3 // a header and two requests
	f := openXLSX(t, renderXLSX(t, xlsxInput(t)))
	want := []string{"Summary", "Acceptance", "Predictions", "Telemetry", "Diagnosis", "Charts", "Metadata",
		"r-chat", "r-chat (2)", "r-chat (3)", "r-sat_c=1", "r-sat_c=4", "r-sat_c=8", "r-sat_c=8 (2)"}
	if got := f.GetSheetList(); !slices.Equal(got, want) {
		t.Fatalf("sheets = %q; want %q", got, want)
	}
	for sheet, n := range map[string]int{"r-chat": 2, "r-chat (2)": 2, "r-chat (3)": 1, "r-sat_c=8 (2)": 1} {
		rows, err := f.GetRows(sheet)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != n+1 || rows[0][0] != "Seq" {
			t.Errorf("%s has %d lines; want a header and %d requests", sheet, len(rows), n)
		}
	}
	if got := cellValue(t, f, "r-chat (3)", "A2"); got != "4" {
		t.Errorf("r-chat (3)!A2 = %q; want seq 4", got)
	}
	rows, _ := f.GetRows("Metadata")
	found := false
	for _, r := range rows {
		if len(r) >= 4 && r[0] == "r-chat (3)" {
			found = slices.Equal(r[:4], []string{"r-chat (3)", "chat", "3", "1"})
		}
	}
	if !found {
		t.Errorf("Metadata does not map r-chat (3) to part 3 of chat with 1 request:\n%q", rows)
	}
}

func TestXLSXSheetNames(t *testing.T) {
	x := &xlsxWriter{used: map[string]bool{"summary": true}}
	long := strings.Repeat("a", 40) + "/c=1"
	for _, c := range []struct{ in, want string }{
		{"saturation/c=16", "r-saturation_c=16"},
		{"grid/c=1,in=512", "r-grid_c=1,in=512"},
		{"SATURATION/c=16", "r-SATURATION_c=16~2"}, // Excel ignores case
		{"a[1]:b*?\\", "r-a_1__b___"},
		{long, "r-" + strings.Repeat("a", 29)},
		{long, "r-" + strings.Repeat("a", 27) + "~2"},
	} {
		got := x.uniqueSheet(xlsxSheetName("r-" + c.in))
		if got != c.want {
			t.Errorf("sheet name for %q = %q; want %q", c.in, got, c.want)
		}
		if n := len(got); n > 31 || strings.ContainsAny(got, `[]:*?/\`) {
			t.Errorf("sheet name %q is not a valid Excel name", got)
		}
	}
}

func TestXLSXChart(t *testing.T) {
	parts := zipParts(t, renderXLSX(t, xlsxInput(t)))
	chart, ok := parts["xl/charts/chart1.xml"]
	if !ok {
		t.Fatalf("no chart; parts: %q", slices.Sorted(func(yield func(string) bool) {
			for k := range parts {
				if !yield(k) {
					return
				}
			}
		}))
	}
	if _, ok := parts["xl/charts/chart2.xml"]; ok {
		t.Error("two charts for one sweep")
	}
	for _, want := range []string{
		"<scatterChart>",
		"<xVal><numRef><f>Summary!$T$3:$T$5</f></numRef></xVal>", // output tok/s of the sweep's rows
		"<f>Summary!$I$3:$I$5</f>",                               // TTFT p95
		"<f>Summary!$L$3:$L$5</f>",                               // TPOT p95
		"<f>Summary!$I$1</f>",                                    // series named by the header
		"sat: p95 latency against output throughput",
	} {
		if !strings.Contains(chart, want) {
			t.Errorf("chart lacks %s:\n%s", want, chart)
		}
	}
	f := openXLSX(t, renderXLSX(t, xlsxInput(t)))
	if got := cellValue(t, f, "Charts", "A4"); got != "c=4 is the operating point." {
		t.Errorf("Charts!A4 = %q; want the sweep's explanation", got)
	}

	// Without sweeps, one chart of every row.
	in := xlsxInput(t)
	in.Analysis = nil
	parts = zipParts(t, renderXLSX(t, in))
	if !strings.Contains(parts["xl/charts/chart1.xml"], "<f>Summary!$T$2:$T$5</f>") {
		t.Errorf("chart of all rows does not span Summary!T2:T5:\n%s", parts["xl/charts/chart1.xml"])
	}
}

// TestXLSXDeterministic renders the same input several times: excelize
// writes streamed sheets in map order, which the sorted zip must undo.
func TestXLSXDeterministic(t *testing.T) {
	defer func(n int) { xlsxMaxRows = n }(xlsxMaxRows)
	xlsxMaxRows = 3
	first := renderXLSX(t, xlsxInput(t))
	for i := range 5 {
		if again := renderXLSX(t, xlsxInput(t)); !bytes.Equal(first, again) {
			t.Fatalf("render %d differs from the first (%d and %d bytes)", i+2, len(first), len(again))
		}
	}
	zr, err := zip.NewReader(bytes.NewReader(first), int64(len(first)))
	if err != nil {
		t.Fatal(err)
	}
	if zr.File[0].Name != "[Content_Types].xml" {
		t.Errorf("first part = %s; want [Content_Types].xml", zr.File[0].Name)
	}
}

// TestXLSXWithoutRecords checks a render from a summary alone.
func TestXLSXWithoutRecords(t *testing.T) {
	in := xlsxInput(t)
	in.Records = nil
	in.Decision = nil
	f := openXLSX(t, renderXLSX(t, in))
	if got := f.GetSheetList(); len(got) != 7 {
		t.Errorf("sheets = %q; want only the seven fixed ones", got)
	}
	if got := cellValue(t, f, "Summary", "B5"); got != "fail" {
		t.Errorf("Summary!B5 = %q; want fail (judged when no decision is given)", got)
	}
}

// BenchmarkWriteXLSX writes a row of 100,000 requests.
func BenchmarkWriteXLSX(b *testing.B) {
	in := xlsxInput(b)
	const n = 100_000
	in.Records = func(rowID string, fn func(*metrics.Record) error) error {
		if rowID != "chat" {
			return nil
		}
		srv := 8
		for i := range n {
			r := &metrics.Record{ID: fmt.Sprintf("req-%d", i), Seq: int64(i), Stream: true, ScheduledNS: int64(i) * 1e6,
				StartNS: int64(i)*1e6 + 12345, FirstTokenNS: 42123456, LastTokenNS: 112345678, EndNS: 113456789, Status: 200,
				ResponseID: "chatcmpl-abcdef", FinishReason: "length",
				InputTokens: metrics.Tokens{Requested: 16, Client: 16}, OutputTokens: metrics.Tokens{Requested: 8, Server: &srv, Client: 8}}
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	}
	for b.Loop() {
		if err := WriteXLSX(io.Discard, in); err != nil {
			b.Fatal(err)
		}
	}
}
