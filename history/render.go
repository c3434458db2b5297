package history

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/infermatrix/infermatrix/charts"
	"github.com/infermatrix/infermatrix/internal/textsafe"
)

// Output file names, in the history folder (default <folder>/history/).
const (
	MarkdownFile = "history.md"
	HTMLFile     = "history.html"
	PlotsDir     = "plots"
	// DirName is the history folder's name inside the folder of runs. It
	// has no manifest.json, so a later history does not take it for a run.
	DirName = "history"
)

// GitHubRuns is how many of the newest runs each cell of --format
// github's metric table shows: a job summary or pull-request comment is
// read at a glance, and --last chooses the runs when more are wanted.
const GitHubRuns = 6

// timeLayout writes start times in UTC to the second, as run directories
// are named.
const timeLayout = "2006-01-02 15:04:05"

func startText(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return t.UTC().Format(timeLayout)
}

// toolText is the tool's version and short commit.
func toolText(r *Run) string {
	t := r.Manifest.Tool
	s := t.Version
	if c := t.Commit; c != "" {
		if len(c) > 7 {
			c = c[:7]
		}
		// A build between tags is versioned by its commit (git
		// describe): say it once.
		if !strings.HasPrefix(s, c) {
			s += " " + c
		}
	}
	return s
}

// verdictText is the run's verdict, with "rebuilt" when its summaries were
// rebuilt from records after it was killed.
func verdictText(r *Run) string {
	if r.Rebuilt {
		return r.Verdict + " (rebuilt)"
	}
	return r.Verdict
}

// formatValue writes one headline figure: a ratio as a percentage, other
// figures with three significant digits (four for thousands), "—" for none.
func formatValue(m Metric, v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	if m.Key == "error_ratio" {
		return strconv.FormatFloat(v*100, 'f', 2, 64) + "%"
	}
	a := math.Abs(v)
	switch {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// columnName is a metric's column heading, with its unit.
func columnName(m Metric) string {
	if m.Unit == "ms" {
		return m.Name + " (ms)"
	}
	return m.Name
}

// clip shortens s to n runes with an ellipsis: a sha256 or a flag list
// would push everything else off a terminal line.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// changeText is one change for a line of text: field base → new. For a
// list ("k=v, k=v": flags, headers, models), only the items that differ
// are shown, so that the one flag changed is not clipped away behind the
// ones that did not.
func changeText(field, base, new string, n int) string {
	base, new = listDiff(base, new)
	if base == "" {
		base = "(none)"
	}
	if new == "" {
		new = "(none)"
	}
	return fmt.Sprintf("%s %s → %s", field, clip(base, n), clip(new, n))
}

// listDiff drops the items two comma-separated lists share.
func listDiff(a, b string) (string, string) {
	as, bs := strings.Split(a, ", "), strings.Split(b, ", ")
	if len(as) < 2 && len(bs) < 2 {
		return a, b
	}
	in := func(x string, xs []string) bool { return contains(xs, x) }
	var ra, rb []string
	for _, x := range as {
		if !in(x, bs) {
			ra = append(ra, x)
		}
	}
	for _, x := range bs {
		if !in(x, as) {
			rb = append(rb, x)
		}
	}
	return strings.Join(ra, ", "), strings.Join(rb, ", ")
}

// pad is a value padded for the terminal.
func pad(s string, w int, right bool) string {
	n := utf8.RuneCountInString(s)
	if n >= w {
		return s
	}
	if right {
		return strings.Repeat(" ", w-n) + s
	}
	return s + strings.Repeat(" ", w-n)
}

// WriteText prints the history for a terminal: one line per run (number,
// start, tool, verdict, folder), then what changed since the run before,
// then a line per row with its headline figures. Every string from a run
// is printed without control characters.
func (h *History) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", textsafe.TerminalLine(h.Folder), h.countText())
	idW := len("row")
	for _, id := range h.Rows {
		idW = max(idW, utf8.RuneCountInString(textsafe.TerminalLine(id))+len(" (invalid)"))
	}
	const numW = 12
	header := "     " + pad("row", idW, false)
	for _, m := range Metrics {
		header += "  " + pad(columnName(m), numW, true)
	}
	fmt.Fprintf(&b, "\n  #  %-19s  %-16s  %s\n%s\n", "started (UTC)", "tool", "verdict (folder)", header)
	for i := range h.Runs {
		r := &h.Runs[i]
		fmt.Fprintf(&b, "%3d  %-19s  %-16s  %s (%s)\n", r.Index, startText(r.Started),
			textsafe.TerminalLine(toolText(r)), textsafe.TerminalLine(verdictText(r)), textsafe.TerminalLine(r.Rel))
		if r.Note != "" {
			fmt.Fprintf(&b, "     note: %s\n", textsafe.TerminalLine(r.Note))
		}
		if r.Index > 1 {
			if len(r.Changes) == 0 {
				fmt.Fprintf(&b, "     changed since #%d: nothing in the manifests\n", r.Index-1)
			} else {
				parts := make([]string, len(r.Changes))
				for k, c := range r.Changes {
					parts[k] = textsafe.TerminalLine(changeText(c.Field, c.Base, c.New, 24))
				}
				fmt.Fprintf(&b, "     changed since #%d: %s\n", r.Index-1, strings.Join(parts, "; "))
			}
		}
		for _, id := range h.Rows {
			v := r.Values[id]
			if v == nil {
				continue
			}
			label := textsafe.TerminalLine(id)
			if v.Invalid {
				label += " (invalid)"
			}
			line := "     " + pad(label, idW, false)
			for k, m := range Metrics {
				line += "  " + pad(formatValue(m, v.Values[k]), numW, true)
			}
			b.WriteString(strings.TrimRight(line, " ") + "\n")
		}
	}
	h.writeSkipped(&b, textsafe.TerminalLine)
	_, err := io.WriteString(w, b.String())
	return err
}

func (h *History) countText() string {
	s := fmt.Sprintf("%d run%s, oldest first", h.Total, plural(h.Total))
	if len(h.Runs) < h.Total {
		s = fmt.Sprintf("the last %d of %d runs, oldest first", len(h.Runs), h.Total)
	}
	return s
}

func (h *History) writeSkipped(b *strings.Builder, esc func(string) string) {
	if len(h.Skipped) == 0 {
		return
	}
	fmt.Fprintf(b, "\nleft out:\n")
	for _, s := range h.Skipped {
		fmt.Fprintf(b, "  %s: %s\n", esc(s.Dir), esc(s.Why))
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// experimentNames is the experiments' names, in order of first
// appearance: usually one.
func (h *History) experimentNames() []string {
	var names []string
	for _, r := range h.Runs {
		if n := r.Manifest.Experiment.Name; n != "" && !contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// changeFields is the names of what changed, for a table cell.
func changeFields(r *Run) string {
	if r.Index == 1 {
		return "(first run)"
	}
	if len(r.Changes) == 0 {
		return "nothing"
	}
	fs := make([]string, len(r.Changes))
	for i, c := range r.Changes {
		fs[i] = c.Field
	}
	return strings.Join(fs, ", ")
}

// WriteGitHub prints a compact GitHub-flavoured Markdown summary for a job
// summary or a pull-request comment: a table of runs with their verdicts
// and what changed, and a table of rows whose cells hold each headline
// figure over the newest GitHubRuns runs, oldest to newest. Every string
// from a run is escaped as a Markdown table cell (textsafe.MarkdownCell).
func (h *History) WriteGitHub(w io.Writer) error {
	var b strings.Builder
	name := strings.Join(h.experimentNames(), ", ")
	fmt.Fprintf(&b, "### History of %s\n\n%s.\n\n", textsafe.MarkdownCell(name), h.countText())
	b.WriteString("| # | started (UTC) | tool | verdict | changed since the run before |\n|---:|---|---|---|---|\n")
	for i := range h.Runs {
		r := &h.Runs[i]
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", r.Index, startText(r.Started), textsafe.MarkdownCell(toolText(r)),
			textsafe.MarkdownCell(verdictText(r)), textsafe.MarkdownCell(changeFields(r)))
	}
	runs := h.Runs
	if len(runs) > GitHubRuns {
		runs = runs[len(runs)-GitHubRuns:]
	}
	idx := make([]string, len(runs))
	for i, r := range runs {
		idx[i] = "#" + strconv.Itoa(r.Index)
	}
	fmt.Fprintf(&b, "\nRuns %s, oldest to newest; † the row was invalid in that run (its figures are not trusted).\n\n| row |", strings.Join(idx, " → "))
	for _, m := range Metrics {
		fmt.Fprintf(&b, " %s |", columnName(m))
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(Metrics)) + "\n")
	for _, id := range h.Rows {
		fmt.Fprintf(&b, "| %s |", textsafe.MarkdownCell(id))
		for k, m := range Metrics {
			vals := make([]string, len(runs))
			for i := range runs {
				vals[i] = "—"
				if v := runs[i].Values[id]; v != nil {
					vals[i] = formatValue(m, v.Values[k])
					if v.Invalid {
						vals[i] += "†"
					}
				}
			}
			fmt.Fprintf(&b, " %s |", strings.Join(vals, " → "))
		}
		b.WriteString("\n")
	}
	if len(h.Skipped) > 0 {
		fmt.Fprintf(&b, "\n%d folder%s with a manifest.json left out; `infermatrix history` on the terminal says why.\n", len(h.Skipped), plural(len(h.Skipped)))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// runTick is a run's label under the trend charts' x axis: its number and
// start, to the minute.
func runTick(r *Run) string {
	if r.Started.IsZero() {
		return "#" + strconv.Itoa(r.Index)
	}
	return fmt.Sprintf("#%d\n%s", r.Index, r.Started.UTC().Format("01-02 15:04"))
}

// Plots draws one trend chart per headline metric, one line per row,
// leaving out a metric no run has a value for. A point from a run in which
// the row was invalid is hollow.
func (h *History) Plots() ([]charts.Plot, error) {
	ticks := make([]string, len(h.Runs))
	for i := range h.Runs {
		ticks[i] = runTick(&h.Runs[i])
	}
	name := strings.Join(h.experimentNames(), ", ")
	var out []charts.Plot
	for k, m := range Metrics {
		c := charts.TrendChart{
			Name:     "trend-" + m.Key,
			Title:    m.Name + " per run",
			Subtitle: fmt.Sprintf("%s: %s; x is the run number and start (UTC), evenly spaced", name, h.countText()),
			XLabel:   "run",
			YLabel:   m.Name,
			Runs:     ticks,
		}
		if m.Unit != "" {
			c.YLabel += " (" + m.Unit + ")"
		}
		if m.Key == "error_ratio" {
			c.YLabel = "error ratio (0–1)"
		}
		any := false
		for _, id := range h.Rows {
			s := charts.TrendSeries{Label: id}
			for i := range h.Runs {
				if v := h.Runs[i].Values[id]; v != nil && !math.IsNaN(v.Values[k]) {
					s.Points = append(s.Points, charts.TrendPoint{Run: i + 1, Value: v.Values[k], Invalid: v.Invalid})
					any = true
				}
			}
			c.Series = append(c.Series, s)
		}
		if !any {
			continue
		}
		p, err := charts.RenderTrend(c)
		if err != nil {
			return nil, err
		}
		p.Title = m.Name
		out = append(out, p)
	}
	return out, nil
}

// plotFile is a plot's PNG, relative to the history folder.
func plotFile(p charts.Plot, ext string) string {
	return filepath.ToSlash(filepath.Join(PlotsDir, p.Name+"."+ext))
}
