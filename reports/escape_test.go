package reports

import (
	"bytes"
	"encoding/csv"
	"regexp"
	"strings"
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

// TestPlotLabelsEscaped: a row id with markup and an escape sequence is
// drawn as text: the SVG stays XML (a control character would make it
// unreadable, and the plot would not show), and its markup is escaped.
func TestPlotLabelsEscaped(t *testing.T) {
	const hostile = "<b>x</b>&\x1b[2J\u202e"
	in := plotInput()
	old := in.Summary.Rows[0].ID
	in.Plan.Rows[0].ID, in.Summary.Rows[0].ID = hostile, hostile
	records := in.Records
	in.Records = func(id string, fn func(*metrics.Record) error) error {
		if id == hostile {
			id = old
		}
		return records(id, fn)
	}
	ps, err := RenderPlots(in)
	if err != nil {
		t.Fatal(err)
	}
	safeName := regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	found := false
	for _, p := range ps {
		if !safeName.MatchString(p.Name) {
			t.Errorf("plot file name %q is not file- and link-safe", p.Name)
		}
		if bytes.Contains(p.SVG, []byte("<b>")) || bytes.ContainsAny(p.SVG, "\x1b\u202e") {
			t.Errorf("%s.svg holds the row id raw", p.Name)
		}
		if strings.Contains(svgText(t, p.Name, p.SVG), "<b>x</b>&") {
			found = true
		}
	}
	if !found {
		t.Error("no plot shows the row id as text: the test checks nothing")
	}
}
