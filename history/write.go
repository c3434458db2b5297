package history

import (
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"strings"

	"github.com/infermatrix/infermatrix/internal/textsafe"
	"github.com/infermatrix/infermatrix/reports"
)

// Write draws the trend charts and writes history.md, history.html and
// plots/trend-<metric>.png and .svg into out (created if need be), and
// returns the paths written. The history is derived from the runs, so an
// earlier one in out is replaced; nothing else in out is touched.
func Write(h *History, out string) ([]string, error) {
	plots, err := h.Plots()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(out, PlotsDir), 0o755); err != nil {
		return nil, fmt.Errorf("write history: %w", err)
	}
	var written []string
	put := func(rel string, data []byte) error {
		p := filepath.Join(out, filepath.FromSlash(rel))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return fmt.Errorf("write history: %w", err)
		}
		written = append(written, p)
		return nil
	}
	for _, p := range plots {
		if err := errors.Join(put(plotFile(p, "png"), p.PNG), put(plotFile(p, "svg"), p.SVG)); err != nil {
			return written, err
		}
	}
	if err := put(MarkdownFile, []byte(h.Markdown(plots))); err != nil {
		return written, err
	}
	page, err := h.HTML(plots)
	if err != nil {
		return written, err
	}
	return written, put(HTMLFile, []byte(page))
}

// Markdown is history.md: the runs with their verdicts, what changed
// between consecutive runs fact by fact, each row's figures run by run,
// and the trend charts (plots/, beside it). Every string from a run is
// escaped as a Markdown cell (textsafe.MarkdownCell): folder names, row
// ids, versions and flags are the runs' and the servers', not ours.
func (h *History) Markdown(plots []reports.Plot) string {
	var b strings.Builder
	name := strings.Join(h.experimentNames(), ", ")
	fmt.Fprintf(&b, "# History of %s\n\n", textsafe.MarkdownCell(name))
	fmt.Fprintf(&b, "%s, in %s: ordered by the start time in each run's manifest.json.\n\n", capitalise(h.countText()), textsafe.MarkdownCell(h.Folder))
	if len(h.experimentNames()) > 1 {
		b.WriteString("**The runs are of more than one experiment**: their rows may not measure the same workload.\n\n")
	}

	b.WriteString("## Runs\n\n| # | started (UTC) | tool | verdict | folder | changed since the run before |\n|---:|---|---|---|---|---|\n")
	for i := range h.Runs {
		r := &h.Runs[i]
		verdict := textsafe.MarkdownCell(verdictText(r))
		if r.Note != "" {
			verdict += " (" + textsafe.MarkdownCell(r.Note) + ")"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s |\n", r.Index, startText(r.Started), textsafe.MarkdownCell(toolText(r)),
			verdict, textsafe.MarkdownCell(r.Rel), textsafe.MarkdownCell(changeFields(r)))
	}

	b.WriteString("\n## What changed\n\nFrom the two manifests of each pair of consecutive runs: the tool, the experiment file, the server as declared and as found, the host. Credentials are masked.\n")
	for i := range h.Runs {
		r := &h.Runs[i]
		if r.Index == 1 {
			continue
		}
		fmt.Fprintf(&b, "\n### #%d → #%d\n\n", r.Index-1, r.Index)
		if len(r.Changes) == 0 {
			b.WriteString("Nothing in the manifests changed.\n")
			continue
		}
		fmt.Fprintf(&b, "| fact | #%d | #%d |\n|---|---|---|\n", r.Index-1, r.Index)
		for _, c := range r.Changes {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", textsafe.MarkdownCell(c.Field), cellOrNone(c.Base), cellOrNone(c.New))
		}
	}

	b.WriteString("\n## Rows\n\nEach row's headline figures, run by run. An invalid row's figures are not trusted (its run's decision record says why); — is no value.\n")
	for _, id := range h.Rows {
		fmt.Fprintf(&b, "\n### %s\n\n| # | started (UTC) |", textsafe.MarkdownCell(id))
		for _, m := range Metrics {
			fmt.Fprintf(&b, " %s |", columnName(m))
		}
		b.WriteString(" row verdict |\n|---:|---|" + strings.Repeat("---:|", len(Metrics)) + "---|\n")
		for i := range h.Runs {
			r := &h.Runs[i]
			v := r.Values[id]
			if v == nil {
				continue
			}
			fmt.Fprintf(&b, "| %d | %s |", r.Index, startText(r.Started))
			for k, m := range Metrics {
				fmt.Fprintf(&b, " %s |", formatValue(m, v.Values[k]))
			}
			fmt.Fprintf(&b, " %s |\n", textsafe.MarkdownCell(rowVerdict(v)))
		}
	}

	if len(plots) > 0 {
		b.WriteString("\n## Trends\n\nOne line per row; a hollow point is a run in which the row was invalid.\n\n")
		for _, p := range plots {
			fmt.Fprintf(&b, "![%s](%s)\n\n", textsafe.MarkdownCell(p.Title), plotFile(p, "png"))
		}
	}
	if len(h.Skipped) > 0 {
		b.WriteString("\n## Left out\n\n")
		for _, s := range h.Skipped {
			fmt.Fprintf(&b, "- %s: %s\n", textsafe.MarkdownCell(s.Dir), textsafe.MarkdownCell(s.Why))
		}
	}
	return textsafe.Terminal(b.String())
}

func cellOrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return textsafe.MarkdownCell(s)
}

func rowVerdict(v *RowValues) string {
	switch {
	case v.Verdict == "":
		return "no record"
	case v.Invalid && v.Verdict != "invalid":
		return v.Verdict + ", invalid"
	}
	return v.Verdict
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// htmlView is what history.html shows, as text: html/template escapes it.
type htmlView struct {
	Title, Lead, Mixed string
	Metrics            []string
	Runs               []htmlRun
	Pairs              []htmlPair
	Rows               []htmlRow
	Plots              []htmlPlot
	Skipped            []Skipped
}

type htmlRun struct {
	Index                                                int
	Started, Tool, Verdict, Class, Folder, Changed, Note string
}

type htmlPair struct {
	From, To int
	Changes  [][3]string
}

type htmlRow struct {
	ID    string
	Lines []htmlLine
}

type htmlLine struct {
	Index   int
	Started string
	Values  []string
	Verdict string
	Invalid bool
}

type htmlPlot struct {
	Title string
	Src   template.URL
}

// HTML is history.html: history.md's content as one self-contained page,
// in the decision record's style. It loads nothing (inline styles, no
// script, a Content-Security-Policy allowing data: images only), each
// chart is an SVG data: URL drawn as an image, so that its text is never
// parsed as part of the page, and every string from a run goes through
// html/template's escaping; the page then loses control characters
// (textsafe.Terminal), as report.html does.
func (h *History) HTML(plots []reports.Plot) (string, error) {
	name := strings.Join(h.experimentNames(), ", ")
	v := htmlView{
		Title: "History of " + name,
		Lead:  capitalise(h.countText()) + ", in " + h.Folder + ": ordered by the start time in each run's manifest.json.",
	}
	if len(h.experimentNames()) > 1 {
		v.Mixed = "The runs are of more than one experiment: their rows may not measure the same workload."
	}
	for _, m := range Metrics {
		v.Metrics = append(v.Metrics, columnName(m))
	}
	for i := range h.Runs {
		r := &h.Runs[i]
		v.Runs = append(v.Runs, htmlRun{Index: r.Index, Started: startText(r.Started), Tool: toolText(r), Verdict: verdictText(r),
			Class: verdictClass(r), Folder: r.Rel, Changed: changeFields(r), Note: r.Note})
		if r.Index > 1 {
			p := htmlPair{From: r.Index - 1, To: r.Index}
			for _, c := range r.Changes {
				p.Changes = append(p.Changes, [3]string{c.Field, orNone(c.Base), orNone(c.New)})
			}
			v.Pairs = append(v.Pairs, p)
		}
	}
	for _, id := range h.Rows {
		row := htmlRow{ID: id}
		for i := range h.Runs {
			r := &h.Runs[i]
			rv := r.Values[id]
			if rv == nil {
				continue
			}
			l := htmlLine{Index: r.Index, Started: startText(r.Started), Verdict: rowVerdict(rv), Invalid: rv.Invalid}
			for k, m := range Metrics {
				l.Values = append(l.Values, formatValue(m, rv.Values[k]))
			}
			row.Lines = append(row.Lines, l)
		}
		v.Rows = append(v.Rows, row)
	}
	for _, p := range plots {
		// The SVG is ours, drawn by gonum with every label cleaned
		// (reports' safeText); as an <img> it cannot run anything.
		v.Plots = append(v.Plots, htmlPlot{Title: p.Title, Src: template.URL("data:image/svg+xml;base64," + base64.StdEncoding.EncodeToString(p.SVG))})
	}
	v.Skipped = h.Skipped
	var b strings.Builder
	if err := historyPage.Execute(&b, v); err != nil {
		return "", fmt.Errorf("write %s: %w", HTMLFile, err)
	}
	return textsafe.Terminal(b.String()), nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func verdictClass(r *Run) string {
	switch strings.ToLower(r.Verdict) {
	case "pass":
		return "pass"
	case "fail":
		return "fail"
	case "inconclusive", "incomplete":
		return "incomplete"
	}
	return "none"
}

var historyPage = template.Must(template.New("history").Parse(historyTemplate))

const historyTemplate = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="infermatrix history">
<title>{{.Title}}</title>
<style>
:root {
  --fg: #1f2328; --muted: #59636e; --bg: #ffffff; --panel: #f6f8fa; --line: #d1d9e0;
  --pass-fg: #116329; --pass-bg: #dafbe1; --fail-fg: #a40e26; --fail-bg: #ffebe9;
  --warn-fg: #7d4e00; --warn-bg: #fff8c5; --none-fg: #59636e; --none-bg: #eff2f5;
}
@media (prefers-color-scheme: dark) {
  :root {
    --fg: #e6edf3; --muted: #9198a1; --bg: #0d1117; --panel: #151b23; --line: #3d444d;
    --pass-fg: #7ee787; --pass-bg: #12261e; --fail-fg: #ffa198; --fail-bg: #2d1214;
    --warn-fg: #f2cc60; --warn-bg: #2b2111; --none-fg: #9198a1; --none-bg: #21262d;
  }
  figure img { background: #ffffff; }
}
* { box-sizing: border-box; }
body {
  margin: 0 auto; max-width: 90rem; padding: 1.5rem 1.25rem 4rem;
  font: 16px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", "Noto Sans", "Liberation Sans", Arial, sans-serif;
  color: var(--fg); background: var(--bg);
}
h1 { font-size: 1.75rem; line-height: 1.25; margin: 0 0 .5rem; }
h2 { font-size: 1.3rem; margin: 2.5rem 0 .75rem; padding-bottom: .3rem; border-bottom: 1px solid var(--line); }
h3 { font-size: 1.05rem; margin: 1.5rem 0 .5rem; }
p, ul { margin: .5rem 0 1rem; max-width: 50rem; }
code { font-family: ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, "Liberation Mono", monospace; font-size: .875em; background: var(--panel); border: 1px solid var(--line); border-radius: 4px; padding: .05em .3em; overflow-wrap: anywhere; }
.muted { color: var(--muted); }
.callout { border-left: 4px solid var(--warn-fg); background: var(--warn-bg); padding: .6rem 1rem; border-radius: 0 6px 6px 0; margin: 1rem 0; }
.scroll { overflow-x: auto; margin: .5rem 0 1rem; border: 1px solid var(--line); border-radius: 6px; }
table { border-collapse: collapse; width: 100%; font-size: .875rem; font-variant-numeric: tabular-nums; }
th, td { text-align: left; vertical-align: top; padding: .4rem .6rem; border-bottom: 1px solid var(--line); }
th { background: var(--panel); font-weight: 600; }
tr:last-child td { border-bottom: 0; }
td.num, th.num { text-align: right; white-space: nowrap; }
tr.invalid td { color: var(--muted); font-style: italic; }
.badge { display: inline-block; padding: .05rem .45rem; border-radius: 999px; font-weight: 600; font-size: .8rem; white-space: nowrap; }
.pass { color: var(--pass-fg); background: var(--pass-bg); }
.fail { color: var(--fail-fg); background: var(--fail-bg); }
.incomplete { color: var(--warn-fg); background: var(--warn-bg); }
.none { color: var(--none-fg); background: var(--none-bg); }
figure { margin: 1.5rem 0; break-inside: avoid; }
figure img { display: block; max-width: 100%; height: auto; border: 1px solid var(--line); border-radius: 6px; }
figcaption { font-size: .9rem; color: var(--muted); margin-top: .4rem; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p>{{.Lead}}</p>
{{if .Mixed}}<p class="callout">{{.Mixed}}</p>{{end}}
<h2 id="runs">Runs</h2>
<div class="scroll"><table>
<tr><th class="num">#</th><th>started (UTC)</th><th>tool</th><th>verdict</th><th>folder</th><th>changed since the run before</th></tr>
{{range .Runs}}<tr><td class="num">{{.Index}}</td><td>{{.Started}}</td><td>{{.Tool}}</td><td><span class="badge {{.Class}}">{{.Verdict}}</span>{{if .Note}} <span class="muted">{{.Note}}</span>{{end}}</td><td><code>{{.Folder}}</code></td><td>{{.Changed}}</td></tr>
{{end}}</table></div>
{{if .Pairs}}<h2 id="changes">What changed</h2>
<p>From the two manifests of each pair of consecutive runs: the tool, the experiment file, the server as declared and as found, the host. Credentials are masked.</p>
{{range .Pairs}}<h3>#{{.From}} → #{{.To}}</h3>
{{if .Changes}}<div class="scroll"><table>
<tr><th>fact</th><th>#{{.From}}</th><th>#{{.To}}</th></tr>
{{range .Changes}}<tr><td><code>{{index . 0}}</code></td><td>{{index . 1}}</td><td>{{index . 2}}</td></tr>
{{end}}</table></div>{{else}}<p class="muted">Nothing in the manifests changed.</p>{{end}}
{{end}}{{end}}
<h2 id="rows">Rows</h2>
<p>Each row's headline figures, run by run. An invalid row's figures (in italics) are not trusted; its run's decision record says why. — is no value.</p>
{{$metrics := .Metrics}}{{range .Rows}}<h3><code>{{.ID}}</code></h3>
<div class="scroll"><table>
<tr><th class="num">#</th><th>started (UTC)</th>{{range $metrics}}<th class="num">{{.}}</th>{{end}}<th>row verdict</th></tr>
{{range .Lines}}<tr{{if .Invalid}} class="invalid"{{end}}><td class="num">{{.Index}}</td><td>{{.Started}}</td>{{range .Values}}<td class="num">{{.}}</td>{{end}}<td>{{.Verdict}}</td></tr>
{{end}}</table></div>
{{end}}
{{if .Plots}}<h2 id="trends">Trends</h2>
<p>One line per row; a hollow point is a run in which the row was invalid.</p>
{{range .Plots}}<figure><img src="{{.Src}}" alt="{{.Title}} per run"><figcaption>{{.Title}} per run</figcaption></figure>
{{end}}{{end}}
{{if .Skipped}}<h2 id="left-out">Left out</h2>
<ul>{{range .Skipped}}<li><code>{{.Dir}}</code>: {{.Why}}</li>{{end}}</ul>{{end}}
</body>
</html>
`
