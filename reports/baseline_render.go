package reports

import (
	"fmt"
	"strings"

	"github.com/infermatrix/infermatrix/internal/numfmt"
	"github.com/infermatrix/infermatrix/verdict"
)

// The Baseline section of the decision record: which run this one was held
// against, and each row's headline figures then and now. decision.md and
// report.html show the same lines (baselineLines), so they cannot differ.

// baselineIntro says which run the baseline is, as prose with the paths
// as code: a path is the user's text and may hold any character, so it is
// never parsed back out of a sentence.
func baselineIntro(b *verdict.BaselineRecord) []seg {
	out := []seg{prose("Held against run "), mono(b.Dir)}
	if b.Given != "" {
		out = append(out, prose(" (the newest complete run in "), mono(b.Given), prose(")"))
	}
	out = append(out, prose(fmt.Sprintf(", started %s with infermatrix %s, experiment %s (sha256 %s). Figures are the baseline's → this run's, with the change; rules read the baseline's as ",
		b.Started.UTC().Format("2006-01-02 15:04:05Z"), orNone(b.Tool.Version), orNone(b.Experiment), verdict.ShortCommit(b.ExperimentSHA256))),
		mono("baseline.<metric>"), prose("."))
	return out
}

// baselineLine is one row of the section: the row id, and either its
// figures or why it has no baseline.
type baselineLine struct {
	Row      string
	Unusable string
	Cells    []string // one per verdict.BaselineHeadline name; "—" where missing
}

func baselineLines(b *verdict.BaselineRecord) []baselineLine {
	var out []baselineLine
	for _, r := range b.Rows {
		l := baselineLine{Row: r.ID, Unusable: r.Unusable}
		if r.Unusable == "" {
			byName := map[string]verdict.BaselineMetric{}
			for _, m := range r.Metrics {
				byName[m.Name] = m
			}
			for _, n := range verdict.BaselineHeadline {
				m, ok := byName[n]
				if !ok {
					l.Cells = append(l.Cells, "—")
					continue
				}
				l.Cells = append(l.Cells, baselineCell(n, m))
			}
		}
		out = append(out, l)
	}
	return out
}

// baselineCell writes "12.3 → 13.1 (+6.5%)"; an error ratio in percent.
func baselineCell(name string, m verdict.BaselineMetric) string {
	f := numfmt.Num
	if name == "errors.ratio" {
		f = func(v float64) string { return numfmt.Num(100*v) + "%" }
	}
	s := f(m.Base) + " → " + f(m.New)
	if m.Change != nil {
		s += fmt.Sprintf(" (%+.1f%%)", *m.Change)
	}
	return s
}

// baselineHeads names the section's columns.
var baselineHeads = []string{"TTFT p95", "TPOT p95", "ITL p95", "E2E p95", "Output tok/s", "Errors"}

// baseline writes decision.md's Baseline section.
func (m *mdWriter) baseline(b *verdict.BaselineRecord) {
	if b == nil {
		return
	}
	m.printf("## Baseline\n\n%s\n\n", mdSegsText(baselineIntro(b)))
	m.printf("| Row | %s |\n|---|%s\n", strings.Join(baselineHeads, " | "), strings.Repeat("---|", len(baselineHeads)))
	for _, l := range baselineLines(b) {
		if l.Unusable != "" {
			m.printf("| %s | no baseline: %s%s |\n", code(l.Row), cell(l.Unusable), strings.Repeat(" |", len(baselineHeads)-1))
			continue
		}
		m.printf("| %s | %s |\n", code(l.Row), strings.Join(l.Cells, " | "))
	}
	m.printf("\n")
}

// mdSegsText writes segments as Markdown: code spans for code, escaped
// text for prose.
func mdSegsText(ss []seg) string {
	var b strings.Builder
	for _, s := range ss {
		if s.Code {
			b.WriteString(code(s.Text))
		} else {
			// cell trims; the spaces around a piece of prose are what
			// separate it from the code spans beside it.
			t := strings.TrimSpace(s.Text)
			lead, trail := s.Text[:strings.Index(s.Text, t)], s.Text[strings.Index(s.Text, t)+len(t):]
			if t == "" {
				lead, trail = s.Text, ""
			}
			b.WriteString(lead + cell(t) + trail)
		}
	}
	return b.String()
}

// htmlBaseline is report.html's Baseline section.
type htmlBaseline struct {
	Intro []seg
	Heads []string
	Lines []baselineLine
}

func newHTMLBaseline(b *verdict.BaselineRecord) *htmlBaseline {
	if b == nil {
		return nil
	}
	return &htmlBaseline{Intro: baselineIntro(b), Heads: baselineHeads, Lines: baselineLines(b)}
}
