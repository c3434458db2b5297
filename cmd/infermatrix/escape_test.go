package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/xuri/excelize/v2"
)

// escapeModel is the model id a hostile server lists: it sets the window
// title, clears the screen, and carries markup, a table pipe and a formula.
const escapeModel = "\x1b]0;pwned\x07\x1b[2J<script>alert(1)</script>|=cmd|"

// escapeExperiment carries markup, links, images, pipes, newlines and a
// formula in every free-text field an experiment has.
const escapeExperiment = `apiVersion: infermatrix/v1
name: hostile
description: "Intro <script>alert('d')</script> and <img src=x onerror=alert(1)>.\n\nSee [x](javascript:alert(1)) and ![t](http://example.com/t.png) | a | b\n# not a heading\n\n=HYPERLINK(\"http://evil.example\",\"x\")"
metadata:
  ticket: '=HYPERLINK("http://evil.example","x")'
  owner: "<img src=x onerror=alert(1)>"
server: {urls: [%s]}
defaults: {requests: 9, warmup: 0, concurrency: 1, input_tokens: 16, output_tokens: 4}
hypotheses:
  - id: H1
    statement: "[x](javascript:alert(1)) <script>alert(2)</script> ![t](http://example.com/t.png) | cell"
    expect: rows.chat.errors.total >= 0
rows:
  - id: chat
    question: "=HYPERLINK(\"http://evil.example\",\"x\") <img src=x onerror=alert(1)> | col\nnext line"
acceptance:
  - name: some_errors
    rows: [chat]
    expect: errors.total < 100
report: {formats: [markdown, json, csv, html, xlsx]}
validity: {ignore: [client_cpu, dispatch_lag, client_stall, bursts, samples, steady_state, load, errors]}
`

// escapeServer imitates an OpenAI-compatible server whose every answer is
// hostile: the model id above, an engine version with an escape sequence
// and a tag, and every third request an error whose body does the same.
func escapeServer(t *testing.T) *httptest.Server {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Server", "nginx <svg onload=alert(3)>")
		writeJSON := func(status int, v any) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(v)
		}
		switch r.URL.Path {
		case "/v1/models":
			writeJSON(200, map[string]any{"object": "list", "data": []any{
				map[string]any{"id": escapeModel, "object": "model", "owned_by": "vllm", "max_model_len": 4096}}})
		case "/version":
			writeJSON(200, map[string]any{"version": "0.11\x1b[31m<script>alert(4)</script>"})
		case "/v1/chat/completions":
			if n.Add(1)%3 == 0 {
				writeJSON(500, map[string]any{"error": map[string]any{
					"message": "boom \x1b[2J\x07<img src=x onerror=alert(5)> =cmd|", "type": "server_error"}})
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			for range 4 {
				fmt.Fprint(w, `data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" a"},"finish_reason":null}]}`+"\n\n")
			}
			fmt.Fprint(w, `data: {"choices":[],"usage":{"prompt_tokens":16,"completion_tokens":4,"total_tokens":20}}`+"\n\n")
			fmt.Fprint(w, "data: [DONE]\n\n")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestHostileTextIsEscapedEverywhere runs an experiment full of markup
// against a server whose model id and errors carry escape sequences, then
// re-renders it, and reads every artifact and everything printed: no
// escape sequence reaches the terminal or a file, no tag, link or image
// survives in decision.md or report.html, no table is split, and no
// spreadsheet cell is a formula.
func TestHostileTextIsEscapedEverywhere(t *testing.T) {
	srv := escapeServer(t)
	dir := t.TempDir()
	exp := filepath.Join(dir, "hostile.yaml")
	if err := os.WriteFile(exp, []byte(fmt.Sprintf(escapeExperiment, srv.URL+"/v1")), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "run")
	run := cli(t, context.Background(), "run", exp, "--out", out, "--progress", "lines")
	if _, err := os.Stat(filepath.Join(out, "decision.md")); err != nil {
		t.Fatalf("run: exit %d, no decision record (%v)\nstdout: %s\nstderr: %s", run.code, err, run.stdout, run.stderr)
	}
	if !strings.Contains(run.stderr, "using model ]0;pwned") && !strings.Contains(run.stderr, "using model <script>") {
		t.Errorf("stderr does not name the model the run used:\n%q", run.stderr)
	}
	rep := cli(t, context.Background(), "report", out)
	for name, s := range map[string]string{"run stdout": run.stdout, "run stderr": run.stderr, "report stdout": rep.stdout, "report stderr": rep.stderr} {
		if i := strings.IndexAny(s, "\x1b\x07\u009b\u009d"); i >= 0 {
			t.Errorf("%s holds a control character at %d: %q", name, i, s[max(0, i-40):min(len(s), i+40)])
		}
	}

	// No file the run wrote holds a control character: JSON escapes
	// them, every renderer removes them.
	filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch filepath.Ext(path) {
		case ".md", ".html", ".csv", ".json", ".jsonl", ".yaml", ".svg":
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if i := strings.IndexAny(string(b), "\x1b\x07"); i >= 0 {
				t.Errorf("%s holds a control character at byte %d", path, i)
			}
		}
		return nil
	})

	md := readFile(t, filepath.Join(out, "decision.md"))
	checkEscapedMarkdown(t, md)
	for _, want := range []string{
		"&lt;script&gt;alert(1)&lt;/script&gt;\\|=cmd\\|", // the model id, shown
		"Intro &lt;script&gt;",                            // the description, shown
		`\[x\]\(javascript:alert(1))`,                     // a link, shown as written
		`=HYPERLINK("http://evil.example","x") &lt;img src=x onerror=alert(1)&gt; \| col next line`, // the question on one line
	} {
		if !strings.Contains(md, want) {
			t.Errorf("decision.md lacks %q", want)
		}
	}

	page := readFile(t, filepath.Join(out, "report.html"))
	for _, bad := range []string{"<script", "<img src=x", "<svg onload", `href="javascript`} {
		if i := strings.Index(strings.ToLower(page), bad); i >= 0 {
			t.Errorf("report.html holds %q: %s", bad, page[max(0, i-60):min(len(page), i+60)])
		}
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;|=cmd|") {
		t.Error("report.html does not show the model id as text")
	}
	for _, tag := range regexp.MustCompile(`<img[^>]*>`).FindAllString(page, -1) {
		if !strings.Contains(tag, `src="data:image/`) {
			t.Errorf("report.html has an image that is not one of its plots: %.120s", tag)
		}
	}

	checkSpreadsheetCells(t, out)
}

// checkEscapedMarkdown reads decision.md as a Markdown renderer would where it
// matters: raw HTML, links, images (other than the record's own plots),
// and tables whose rows have more or fewer cells than their header.
func checkEscapedMarkdown(t *testing.T, md string) {
	t.Helper()
	for _, bad := range []string{"<script", "<img", "<svg", "](javascript:", "](http://example.com"} {
		if i := strings.Index(md, bad); i >= 0 {
			t.Errorf("decision.md holds %q: %s", bad, md[max(0, i-60):min(len(md), i+60)])
		}
	}
	ownPlot := regexp.MustCompile(`^!\[[^\]]*\]\(plots/[a-z0-9-]+\.png\)`)
	for i := strings.Index(md, "!["); i >= 0; i = nextIndex(md, i, "![") {
		if !ownPlot.MatchString(md[i:]) {
			t.Errorf("decision.md has an image that is not one of its plots: %.80s", md[i:])
		}
	}
	cells := func(line string) int {
		n := 0
		for i := 0; i < len(line); i++ {
			switch line[i] {
			case '\\':
				i++
			case '|':
				n++
			}
		}
		return n
	}
	want := -1
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "|") {
			want = -1
			continue
		}
		if want < 0 {
			want = cells(line)
		} else if got := cells(line); got != want {
			t.Errorf("table row has %d cell borders, its header %d: %s", got, want, line)
		}
	}
}

func nextIndex(s string, i int, sub string) int {
	j := strings.Index(s[i+1:], sub)
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// checkSpreadsheetCells reads every cell of results.xlsx and summary.csv: a
// text that starts like a formula is a string cell in the workbook and
// quoted in the CSV; numbers stay numbers.
func checkSpreadsheetCells(t *testing.T, out string) {
	t.Helper()
	f, err := excelize.OpenFile(filepath.Join(out, "results.xlsx"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	formulaText := 0
	for _, sheet := range f.GetSheetList() {
		rows, err := f.GetRows(sheet)
		if err != nil {
			t.Fatal(err)
		}
		for r, row := range rows {
			for c, v := range row {
				cell, _ := excelize.CoordinatesToCellName(c+1, r+1)
				if fm, _ := f.GetCellFormula(sheet, cell); fm != "" {
					t.Errorf("results.xlsx %s!%s is a formula: %q", sheet, cell, fm)
				}
				if strings.ContainsAny(v, "\x1b\x07") {
					t.Errorf("results.xlsx %s!%s holds a control character: %q", sheet, cell, v)
				}
				if strings.HasPrefix(v, "=") {
					formulaText++
					if typ, _ := f.GetCellType(sheet, cell); typ != excelize.CellTypeSharedString && typ != excelize.CellTypeInlineString {
						t.Errorf("results.xlsx %s!%s = %q has type %v; want a string cell", sheet, cell, v, typ)
					}
				}
			}
		}
	}
	if formulaText == 0 {
		t.Error("results.xlsx has no cell with the experiment's =HYPERLINK text: the test checks nothing")
	}

	b, err := os.ReadFile(filepath.Join(out, "summary.csv"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		for _, v := range rec {
			if v == "" {
				continue
			}
			if _, err := strconv.ParseFloat(v, 64); err == nil {
				continue // a number, a negative one too
			}
			if strings.ContainsRune("=+-@\t\r", rune(v[0])) {
				t.Errorf("summary.csv cell %q would be a formula", v)
			}
		}
	}
}
