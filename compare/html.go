package compare

import (
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"strings"

	"github.com/infermatrix/infermatrix/internal/htmlstyle"
	"github.com/infermatrix/infermatrix/internal/textsafe"
)

// WriteHTML writes comparison.html: one self-contained page (inline CSS,
// plots as data: URLs, a Content-Security-Policy that loads nothing), in
// the style of report.html. html/template escapes every text from the runs;
// textsafe.TerminalLine removes controls first.
func (c *Comparison) WriteHTML(w io.Writer, figs []Figure) error {
	v := htmlView{C: c, Level: fmt.Sprintf("%g%%", 100*c.Level), Verdict: strings.ToUpper(c.Verdict)}
	switch c.Verdict {
	case VerdictOK:
		v.VerdictClass = "pass"
	case VerdictRegression:
		v.VerdictClass = "fail"
	default:
		v.VerdictClass = "none"
	}
	for _, f := range c.Possible {
		v.Possible = append(v.Possible, findingLine(f))
	}
	for _, f := range c.Regressions {
		v.Regressions = append(v.Regressions, findingLine(f))
	}
	for _, ch := range c.Changes {
		v.Changes = append(v.Changes, [3]string{ch.Field, orNone(ch.Base), orNone(ch.New)})
	}
	for _, d := range c.Diffs {
		v.NotCompared = append(v.NotCompared, [2]string{d.ID, d.Kind + diffDetail(d)})
	}
	for _, rc := range c.Rows {
		if !rc.Comparable {
			v.NotCompared = append(v.NotCompared, [2]string{rc.ID, "not comparable: " + rc.Reason})
			continue
		}
		hr := htmlRow{ID: rc.ID}
		for _, m := range rc.Metrics {
			cls := ""
			switch m.Verdict {
			case Regression:
				cls = "fail"
			case Possible:
				cls = "warn"
			case Improvement:
				cls = "pass"
			}
			hr.Metrics = append(hr.Metrics, htmlMetric{Metric: m.Metric,
				Base: num(m.Base, m.Unit) + unitSuffix(m.Unit), New: num(m.New, m.Unit) + unitSuffix(m.Unit),
				Change: pct(m.Change, m.Absolute), CI: ciText(&m), Verdict: m.Verdict, Class: cls, Note: m.Note})
		}
		v.Rows = append(v.Rows, hr)
	}
	for _, f := range figs {
		v.Figures = append(v.Figures, htmlFigure{Title: f.Title,
			Src: template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(f.PNG))})
	}
	t, err := template.New("c").Funcs(template.FuncMap{"safe": textsafe.TerminalLine}).Parse(htmlTemplate)
	if err != nil {
		return fmt.Errorf("write %s: %w", HTMLFile, err)
	}
	if err := t.Execute(w, v); err != nil {
		return fmt.Errorf("write %s: %w", HTMLFile, err)
	}
	return nil
}

type htmlView struct {
	C              *Comparison
	Level, Verdict string
	VerdictClass   string
	Regressions    []string
	Possible       []string
	Changes        [][3]string
	NotCompared    [][2]string
	Rows           []htmlRow
	Figures        []htmlFigure
}

type htmlRow struct {
	ID      string
	Metrics []htmlMetric
}

type htmlMetric struct {
	Metric, Base, New, Change, CI, Verdict, Class, Note string
}

type htmlFigure struct {
	Title string
	Src   template.URL
}

const htmlTemplate = `<!DOCTYPE html>
<html lang="en">
<head>
` + htmlstyle.Meta + `<meta name="generator" content="infermatrix">
<title>Comparison: {{safe .C.New.Experiment}}</title>
<style>
` + htmlstyle.CSS + `</style>
</head>
<body>
<h1>Comparison: {{safe .C.New.Experiment}}</h1>
<p class="muted">base <code>{{safe .C.Base.Name}}</code> ({{.C.Base.Started}}, {{safe .C.Base.Verdict}}) · new <code>{{safe .C.New.Name}}</code> ({{.C.New.Started}}, {{safe .C.New.Verdict}})</p>
<div class="verdict {{.VerdictClass}}"><strong>{{.Verdict}}</strong>{{safe .C.Why}}</div>
{{if .Regressions}}<h2>Regressions</h2>
<ul>{{range .Regressions}}<li><code>{{safe .}}</code></li>{{end}}</ul>{{end}}
{{if .Possible}}<h2>Possible regressions</h2>
<p>Past the threshold as measured, but the interval reaches back inside it: not a failure. One run's interval does not see how much a second run moves; run again, or use <code>repeat</code>, to tell these from noise.</p>
<ul>{{range .Possible}}<li><code>{{safe .}}</code></li>{{end}}</ul>{{end}}
<h2>What changed</h2>
{{if .Changes}}<div class="scroll"><table><tr><th></th><th>base</th><th>new</th></tr>
{{range .Changes}}<tr><td><code>{{index . 0}}</code></td><td>{{safe (index . 1)}}</td><td>{{safe (index . 2)}}</td></tr>
{{end}}</table></div>{{else}}<p>Nothing in the manifests: same tool, experiment file, server and host.</p>{{end}}
{{if .NotCompared}}<h2>Rows not compared</h2>
<div class="scroll"><table><tr><th>row</th><th>why</th></tr>
{{range .NotCompared}}<tr><td><code>{{safe (index . 0)}}</code></td><td>{{safe (index . 1)}}</td></tr>
{{end}}</table></div>{{end}}
<h2>Rows</h2>
{{range .Rows}}<h3><code>{{safe .ID}}</code></h3>
<div class="scroll"><table><tr><th>metric</th><th>base</th><th>new</th><th>change</th><th>{{$.Level}} CI</th><th>verdict</th><th>note</th></tr>
{{range .Metrics}}<tr><td><code>{{.Metric}}</code></td><td class="num">{{.Base}}</td><td class="num">{{.New}}</td><td class="num">{{.Change}}</td><td class="num">{{.CI}}</td><td class="{{.Class}}">{{.Verdict}}</td><td class="muted">{{.Note}}</td></tr>
{{end}}</table></div>
{{end}}
{{if .Figures}}<h2>Overlays</h2>
{{range .Figures}}<figure><img src="{{.Src}}" alt="{{safe .Title}}"><figcaption>{{safe .Title}}: base solid (blue), new dashed (orange)</figcaption></figure>
{{end}}{{end}}
<p class="muted">Each latency percentile's change is bootstrapped from both runs' requests ({{.C.Resamples}} resamples, seed {{.C.Seed}}); a regression is a change whose {{.Level}} interval excludes zero, in the worse direction, and beyond its threshold. docs/comparison.md gives the method and its false-alarm rate.</p>
{{range .C.Notes}}<p class="muted">Note: {{safe .}}</p>{{end}}
</body>
</html>
`
