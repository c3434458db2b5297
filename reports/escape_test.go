package reports

import (
	"bytes"
	"encoding/csv"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/verdict"
)

// TestCSVFormulaCells: text cells of summary.csv that a spreadsheet would
// run as formulas (a summary.json from elsewhere can hold any row id) get
// a leading quote; numbers, negative ones too, stay numbers.
func TestCSVFormulaCells(t *testing.T) {
	id := `=HYPERLINK("http://evil.example","x")`
	rs := metrics.RowSummary{ID: id, Base: "-2+3", Status: "@SUM(A1)", Semantics: "+cmd\x1b[2J"}
	rs.Tokens.Input = metrics.LengthCheck{Requests: 4, Diff: -0.25}
	sum := &metrics.Summary{Rows: []metrics.RowSummary{rs}}
	d := &verdict.Decision{Rows: []verdict.RowVerdict{{ID: id, Verdict: "\tpass"}}}
	var b bytes.Buffer
	if err := WriteCSV(&b, sum, d); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]string{}
	for i, h := range recs[0] {
		col[h] = recs[1][i]
	}
	for name, want := range map[string]string{
		"row":               "'" + id,
		"base":              "'-2+3",
		"status":            "'@SUM(A1)",
		"verdict":           "'\tpass",
		"semantics":         "'+cmd",
		"input_tokens_diff": "-0.25",
	} {
		if got := col[name]; got != want {
			t.Errorf("summary.csv %s = %q; want %q", name, got, want)
		}
	}
}
