package reports

import (
	"archive/zip"
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/verdict"
	"github.com/infermatrix/infermatrix/workbook"
)

// TestReportsMaskCredentials: an engine flag named like a credential and a
// URL's user info and query reach no report, whether the manifest came from
// disk (already masked) or from memory during a run (not yet). The flags
// that only look alike (max-num-batched-tokens) keep their values.
func TestReportsMaskCredentials(t *testing.T) {
	in, _, err := LoadRun(&rundir.Dir{Path: fixtureRun}, RerenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in.Manifest.Server.Declared.Engine.Flags = map[string]any{
		"api-key": "SEKRIT-flag", "hf_token": "SEKRIT-hf", "max-num-batched-tokens": 8192,
	}
	in.Plan.Server.Engine.Flags = in.Manifest.Server.Declared.Engine.Flags
	in.Manifest.Command = []string{"infermatrix", "run", "x.yaml", "--target", "https://alice:SEKRIT-pw@h/v1?key=SEKRIT-q"}
	in.Decision = verdict.Judge(in.Plan, in.Summary)
	in.Analysis = analysis.Analyze(in.Plan, in.Summary, in.Decision)

	var md, html, xlsx bytes.Buffer
	if err := WriteMarkdown(&md, in); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&html, in, nil); err != nil {
		t.Fatal(err)
	}
	if err := workbook.WriteXLSX(&xlsx, in.workbookInput()); err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{"decision.md": md.String(), "report.html": html.String()}
	// The workbook is a zip: search its parts, not its compressed bytes.
	zr, err := zip.NewReader(bytes.NewReader(xlsx.Bytes()), int64(xlsx.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		texts["results.xlsx/"+f.Name] = string(b)
	}
	var all strings.Builder
	for name, text := range texts {
		all.WriteString(text)
		for _, s := range []string{"SEKRIT", "alice"} {
			if strings.Contains(text, s) {
				t.Errorf("%s holds %q", name, s)
			}
		}
	}
	for _, want := range []string{"8192", "(redacted)", "https://***@h/v1?key=***"} {
		for _, name := range []string{"decision.md", "report.html"} {
			if !strings.Contains(texts[name], want) && !strings.Contains(texts[name], strings.ReplaceAll(want, "&", "&amp;")) {
				t.Errorf("%s lacks %q", name, want)
			}
		}
		if !strings.Contains(all.String(), want) {
			t.Errorf("no report holds %q", want)
		}
	}
}
