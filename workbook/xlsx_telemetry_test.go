package workbook

import (
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/internal/recordfixture"
)

// TestTelemetrySheets: results.xlsx shows the Server and GPU figures and
// the diagnosis's findings that decision.md and report.html show (reports'
// TestTelemetryRendered), as plain text without code marks.
func TestTelemetrySheets(t *testing.T) {
	r := recordfixture.Diagnosed(t)
	in := &Input{Plan: r.Plan, Manifest: r.Manifest, Summary: r.Summary, Decision: r.Decision, Analysis: r.Analysis, Records: r.Records}
	f := openXLSX(t, renderXLSX(t, in))
	if got := cellValue(t, f, "Telemetry", "A1"); got != "Row" {
		t.Errorf("Telemetry!A1 = %q; want the header", got)
	}
	rows, err := f.GetRows("Telemetry")
	if err != nil {
		t.Fatal(err)
	}
	var line []string
	for _, r := range rows {
		if len(r) > 0 && r[0] == "sat/c=8" {
			line = r
		}
	}
	if len(line) < 12 || line[1] != "12" || line[11] != "7" {
		t.Errorf("Telemetry line of sat/c=8 = %q; want 12 scrapes and 7 preemptions", line)
	}
	diag, err := f.GetRows("Diagnosis")
	if err != nil {
		t.Fatal(err)
	}
	if len(diag) < 2 || diag[0][0] != "Row" || diag[1][0] != "sat/c=8" || diag[1][1] != "fail" || strings.Contains(diag[1][4], "`") {
		t.Errorf("Diagnosis sheet = %q; want a header, then sat/c=8's findings without code marks", diag)
	}
}
