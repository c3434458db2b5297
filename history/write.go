package history

import (
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"strings"

	"github.com/infermatrix/infermatrix/charts"
	"github.com/infermatrix/infermatrix/internal/htmlstyle"
	"github.com/infermatrix/infermatrix/internal/textsafe"
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
func (h *History) Markdown(plots []charts.Plot) string {
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
func (h *History) HTML(plots []charts.Plot) (string, error) {
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
` + htmlstyle.Meta + `<meta name="generator" content="infermatrix history">
<title>{{.Title}}</title>
<style>
` + htmlstyle.CSS + `</style>
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
