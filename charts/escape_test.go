package charts

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
)

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
