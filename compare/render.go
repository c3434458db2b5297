package compare

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/infermatrix/infermatrix/internal/textsafe"
)

// Output file names in a comparison's directory.
const (
	MarkdownFile = "comparison.md"
	JSONFile     = "comparison.json"
	HTMLFile     = "comparison.html"
)

// terminalKeys are the metrics the terminal's table shows per row; every
// metric is in comparison.md and comparison.json.
var terminalKeys = []string{"ttft.p95", "tpot.p95", "itl.p95", "e2e.p95", "throughput.output_tokens_per_s"}

// pct writes a change: a relative one as a signed percentage, an absolute
// one (a ratio whose base is 0) in points.
func pct(v float64, abs bool) string {
	if abs {
		return fmt.Sprintf("%+.2f pt", 100*v)
	}
	return fmt.Sprintf("%+.1f%%", 100*v)
}

func ciText(m *MetricChange) string {
	if m.CI == nil {
		return ""
	}
	return "[" + pct(m.CI.Lower, m.Absolute) + ", " + pct(m.CI.Upper, m.Absolute) + "]"
}

// num writes a figure with three significant digits or more, as the
// decision records do.
func num(v float64, unit string) string {
	switch {
	case unit == "ratio":
		return fmt.Sprintf("%.2f%%", 100*v)
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func unitSuffix(unit string) string {
	if unit == "ratio" {
		return ""
	}
	return " " + unit
}

// findingLine is one regression, as the terminal and the documents name
// it: "REGRESSION sweep/c=16 tpot.p95 +24.8% [+21.0%, +28.9%] (9.12 → 11.4 ms)".
func findingLine(f Finding) string {
	abs := f.Unit == "ratio" && f.Base == 0
	what := "REGRESSION"
	if f.Possible {
		what = "possible regression"
	}
	return fmt.Sprintf("%s %s %s %s [%s, %s] (%s → %s%s)", what, f.Row, f.Metric, pct(f.Change, abs),
		pct(f.CI.Lower, abs), pct(f.CI.Upper, abs), num(f.Base, f.Unit), num(f.New, f.Unit), unitSuffix(f.Unit))
}

// metric returns a row's metric, or nil.
func (rc *RowComparison) metric(key string) *MetricChange {
	for i := range rc.Metrics {
		if rc.Metrics[i].Metric == key {
			return &rc.Metrics[i]
		}
	}
	return nil
}

// WriteTerminal prints the short form: the regressions first, by name, then
// a table of the compared rows, what changed between the runs, the rows not
// compared and the verdict. Text from the runs (row ids, flags, models) is
// printed without controls.
func (c *Comparison) WriteTerminal(w io.Writer) {
	t := textsafe.Terminal
	fmt.Fprintf(w, "base: %s (%s)\nnew:  %s (%s)\n", t(c.Base.Path), c.Base.Started, t(c.New.Path), c.New.Started)
	for _, f := range append(append([]Finding{}, c.Regressions...), c.Possible...) {
		fmt.Fprintln(w, t(findingLine(f)))
	}
	var rows [][]string
	for i := range c.Rows {
		rc := &c.Rows[i]
		if !rc.Comparable {
			continue
		}
		cells := []string{t(rc.ID)}
		for _, k := range terminalKeys {
			cells = append(cells, shortCell(rc.metric(k)))
		}
		rows = append(rows, cells)
	}
	if len(rows) > 0 {
		fmt.Fprintln(w)
		head := append([]string{"row"}, terminalKeys...)
		head[len(head)-1] = "output tok/s"
		writeTable(w, head, rows)
		fmt.Fprintln(w, "  R regression, I improvement (beyond the threshold, the whole interval included); R? I? possible (beyond it as measured only); * significant within it; ~ not judged")
	}
	for i := range c.Rows {
		if rc := &c.Rows[i]; !rc.Comparable {
			fmt.Fprintf(w, "not comparable: %s (%s)\n", t(rc.ID), t(rc.Reason))
		}
	}
	for _, d := range c.Diffs {
		fmt.Fprintf(w, "not compared: %s %s%s\n", t(d.ID), d.Kind, t(diffDetail(d)))
	}
	if len(c.Changes) > 0 {
		fmt.Fprintln(w, "\nwhat changed between the runs:")
		for _, ch := range c.Changes {
			fmt.Fprintf(w, "  %s: %s → %s\n", ch.Field, t(clip(orNone(ch.Base), 80)), t(clip(orNone(ch.New), 80)))
		}
	}
	for _, n := range c.Notes {
		fmt.Fprintf(w, "note: %s\n", t(n))
	}
	fmt.Fprintf(w, "\ncomparison: %s (%s)\n", strings.ToUpper(c.Verdict), t(c.Why))
}

// shortCell is a metric's change with its verdict's mark.
func shortCell(m *MetricChange) string {
	if m == nil {
		return ""
	}
	s := pct(m.Change, m.Absolute)
	switch m.Verdict {
	case Regression:
		s += " R"
	case Possible:
		s += " R?"
	case Improvement:
		s += " I"
	case PossibleImprovement:
		s += " I?"
	case Within:
		s += " *"
	case NotJudged:
		s += " ~"
	}
	return s
}

func diffDetail(d RowDiff) string {
	if len(d.Changes) == 0 {
		return ""
	}
	parts := make([]string, len(d.Changes))
	for i, ch := range d.Changes {
		parts[i] = fmt.Sprintf("%s %s → %s", ch.Field, clip(orNone(ch.Base), 60), clip(orNone(ch.New), 60))
	}
	return ": " + strings.Join(parts, "; ")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// clip shortens s to n runes with an ellipsis: a table cell, not the fact
// (comparison.json holds it whole).
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func writeTable(w io.Writer, head []string, rows [][]string) {
	width := make([]int, len(head))
	for i, h := range head {
		width[i] = len([]rune(h))
	}
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := width[i] - len([]rune(c))
			if i == 0 {
				b.WriteString(c + strings.Repeat(" ", pad))
			} else {
				b.WriteString(strings.Repeat(" ", pad) + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(head)
	for _, r := range rows {
		line(r)
	}
}

// WriteJSON writes comparison.json.
func (c *Comparison) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(c); err != nil {
		return fmt.Errorf("write %s: %w", JSONFile, err)
	}
	return nil
}

// WriteMarkdown writes comparison.md: every matched row's every metric.
func (c *Comparison) WriteMarkdown(w io.Writer) error {
	return c.markdown(w, false)
}

// WriteGitHub writes GitHub-flavoured Markdown for a pull-request comment
// or a job summary ($GITHUB_STEP_SUMMARY): the verdict, the regressions,
// what changed and one line per row, the full tables folded in a
// <details> block.
func (c *Comparison) WriteGitHub(w io.Writer) error {
	return c.markdown(w, true)
}

func (c *Comparison) markdown(w io.Writer, compact bool) error {
	cell := textsafe.MarkdownCell
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# Comparison: %s\n\n", cell(c.New.Experiment))
	p("**%s**: %s.\n\n", strings.ToUpper(c.Verdict), cell(c.Why))
	p("| | run | started | verdict |\n|---|---|---|---|\n")
	p("| base | `%s` | %s | %s |\n", cell(c.Base.Name), c.Base.Started, cell(c.Base.Verdict))
	p("| new | `%s` | %s | %s |\n\n", cell(c.New.Name), c.New.Started, cell(c.New.Verdict))
	if len(c.Regressions) > 0 {
		p("## Regressions\n\n")
		for _, f := range c.Regressions {
			p("- %s\n", cell(findingLine(f)))
		}
		p("\n")
	}
	if len(c.Possible) > 0 {
		p("## Possible regressions\n\n")
		p("Past the threshold as measured, but the interval reaches back inside it: not a failure. One run's interval does not see how much a second run moves; run again, or use `repeat`, to tell these from noise.\n\n")
		for _, f := range c.Possible {
			p("- %s\n", cell(findingLine(f)))
		}
		p("\n")
	}
	p("## What changed\n\n")
	if len(c.Changes) == 0 {
		p("Nothing in the manifests: same tool, experiment file, server and host.\n\n")
	} else {
		p("| | base | new |\n|---|---|---|\n")
		for _, ch := range c.Changes {
			p("| %s | %s | %s |\n", ch.Field, cell(clip(orNone(ch.Base), 200)), cell(clip(orNone(ch.New), 200)))
		}
		p("\n")
	}
	if len(c.Diffs) > 0 || c.anyNotComparable() {
		p("## Rows not compared\n\n| row | why |\n|---|---|\n")
		for _, d := range c.Diffs {
			p("| %s | %s%s |\n", cell(d.ID), d.Kind, cell(diffDetail(d)))
		}
		for _, rc := range c.Rows {
			if !rc.Comparable {
				p("| %s | not comparable: %s |\n", cell(rc.ID), cell(rc.Reason))
			}
		}
		p("\n")
	}
	if compact {
		p("## Rows (change at p95; R regression, I improvement: beyond the threshold, the whole interval included; R?, I?: beyond it as measured only; * significant within the threshold; ~ not judged)\n\n")
		p("| row | ttft | tpot | itl | e2e | output tok/s |\n|---|---|---|---|---|---|\n")
		for i := range c.Rows {
			rc := &c.Rows[i]
			if !rc.Comparable {
				continue
			}
			p("| %s |", cell(rc.ID))
			for _, k := range terminalKeys {
				p(" %s |", shortCell(rc.metric(k)))
			}
			p("\n")
		}
		p("\n<details><summary>Every metric of every row</summary>\n\n")
	}
	for i := range c.Rows {
		rc := &c.Rows[i]
		if !rc.Comparable {
			continue
		}
		p("### %s\n\n| metric | base | new | change | %g%% CI | verdict | note |\n|---|---|---|---|---|---|---|\n", cell(rc.ID), 100*c.Level)
		for _, m := range rc.Metrics {
			p("| %s | %s | %s | %s | %s | %s | %s |\n", m.Metric, num(m.Base, m.Unit)+unitSuffix(m.Unit), num(m.New, m.Unit)+unitSuffix(m.Unit),
				pct(m.Change, m.Absolute), ciText(&m), m.Verdict, cell(m.Note))
		}
		p("\n")
	}
	if compact {
		p("</details>\n\n")
	}
	p("Method: the change of each latency percentile is bootstrapped from both runs' requests (%d resamples, seed %d); a regression is a change whose %g%% interval excludes zero, in the worse direction, and larger than the threshold (%s by default). See docs/comparison.md.\n",
		c.Resamples, c.Seed, 100*c.Level, pct(c.Threshold, false)[1:])
	for _, n := range c.Notes {
		p("\nNote: %s\n", cell(n))
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("write comparison: %w", err)
	}
	return nil
}

func (c *Comparison) anyNotComparable() bool {
	for _, rc := range c.Rows {
		if !rc.Comparable {
			return true
		}
	}
	return false
}

// DefaultDir is where a comparison goes unless --out says otherwise: beside
// the new run, in runs/<name>/compare-<base>-<new>/, named by the two run
// folders. ListRuns skips it (it has no manifest).
func (c *Comparison) DefaultDir() string {
	return filepath.Join(filepath.Dir(filepath.Clean(c.New.Path)), "compare-"+c.Base.Name+"-"+c.New.Name)
}

// Write writes comparison.md, comparison.json and comparison.html into
// dir, creating it, and returns their paths. The comparison is
// reproducible (a fixed seed), so writing it again over an earlier one
// changes nothing but what the runs changed.
func (c *Comparison) Write(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("write comparison: %w", err)
	}
	figs, err := c.Figures()
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{
		{MarkdownFile, c.WriteMarkdown},
		{JSONFile, c.WriteJSON},
		{HTMLFile, func(w io.Writer) error { return c.WriteHTML(w, figs) }},
	} {
		var b bytes.Buffer
		if err := f.write(&b); err != nil {
			return paths, err
		}
		p := filepath.Join(dir, f.name)
		if err := writeAtomic(p, b.Bytes()); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// writeAtomic writes through a temporary file and a rename, so a reader
// never sees half a comparison.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := tmp.Write(data)
	perr := tmp.Chmod(0o644)
	cerr := tmp.Close()
	if err := errors.Join(werr, perr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
