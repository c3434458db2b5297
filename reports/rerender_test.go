package reports

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

// editedExperiment writes the fixture's experiment.yaml with replacements
// applied, next to the run, and returns its path.
func editedExperiment(t *testing.T, run string, oldNew ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(run, rundir.ExperimentFile))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for i := 0; i < len(oldNew); i += 2 {
		if !strings.Contains(s, oldNew[i]) {
			t.Fatalf("the fixture's experiment has no %q", oldNew[i])
		}
		s = strings.ReplaceAll(s, oldNew[i], oldNew[i+1])
	}
	p := filepath.Join(filepath.Dir(run), "edited.yaml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// judgeRun loads a run directory as Rerender does and judges it, without
// writing anything (the plots take a while under the race detector).
func judgeRun(t *testing.T, run string, opts RerenderOptions) (*Input, []string, error) {
	t.Helper()
	in, notes, err := LoadRun(&rundir.Dir{Path: run}, opts)
	if err != nil {
		return nil, nil, err
	}
	in.Decision = verdict.Judge(in.Plan, in.Summary)
	in.Analysis = analysis.Analyze(in.Plan, in.Summary, in.Decision)
	return in, notes, nil
}

func markdownOf(t *testing.T, in *Input) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteMarkdown(&b, in); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestRerenderRestoresSamples checks that a run read back from disk can be
// judged on any percentile: summary.json has only the reported ones, and
// p(metric, q) needs the samples, which the records give back.
func TestRerenderRestoresSamples(t *testing.T) {
	run := copyRun(t, fixtureRun)
	exp := editedExperiment(t, run, "expect: ttft.p95 < 200 && tpot.p95 < 40 && errors.total == 0",
		"expect: p(ttft, 99.9) < 100 && p(itl, 75) < 15 && errors.total == 0")
	in, notes, err := judgeRun(t, run, RerenderOptions{Experiment: exp})
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) > 0 {
		t.Errorf("notes: %q; want none", notes)
	}
	// The record says which file judged it.
	if !strings.Contains(in.JudgedBy, "by experiment "+exp+" (sha256 ") || !strings.Contains(in.JudgedBy, "made with experiment experiments/golden.yaml (sha256 ") {
		t.Errorf("JudgedBy = %q; want the run's experiment and the edited file, with their hashes", in.JudgedBy)
	}
	got := map[string]string{}
	for _, rv := range in.Decision.Rows {
		got[rv.ID] = rv.Verdict
		for _, rr := range rv.Rules {
			if rr.Reason != "" || (len(rr.Failed) > 0 && rr.Failed[0].Reason != "") {
				t.Errorf("row %s: %+v; want the percentiles evaluated", rv.ID, rr)
			}
		}
	}
	// long_prompt's TTFT is about 310 ms, sweep/c=4's ITL about 19 ms.
	want := map[string]string{"chat": verdict.Pass, "long_prompt": verdict.Fail, "sweep/c=1": verdict.Pass, "sweep/c=4": verdict.Fail}
	for id, v := range want {
		if got[id] != v {
			t.Errorf("row %s: verdict %q; want %q", id, got[id], v)
		}
	}
	if in.Decision.Verdict != verdict.Fail {
		t.Errorf("verdict %q; want fail", in.Decision.Verdict)
	}
	md := markdownOf(t, in)
	if !strings.Contains(md, "`p(ttft, 99.9) < 100` with p(ttft, 99.9) = 310.") {
		t.Errorf("decision.md does not show the failed percentile clause:\n%s", md)
	}
}

// TestRerenderStoredSummaryWhenRecordsDiffer checks the fallback: records
// that do not reproduce summary.json leave the stored summary in charge,
// with a note.
func TestRerenderStoredSummaryWhenRecordsDiffer(t *testing.T) {
	run := copyRun(t, fixtureRun)
	p := filepath.Join(run, "rows", "chat", rundir.RecordsFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	if err := os.WriteFile(p, []byte(strings.Join(lines[:len(lines)-2], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	in, notes, err := judgeRun(t, run, RerenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "row chat: its records do not reproduce summary.json") {
		t.Errorf("notes %q; want one about row chat", notes)
	}
	if in.Decision.Verdict != verdict.Fail || in.Decision.Rows[0].Verdict != verdict.Pass {
		t.Errorf("verdicts %+v; want the stored summary judged as before", in.Decision)
	}
}

func TestRerenderRefusesAnotherWorkload(t *testing.T) {
	run := copyRun(t, fixtureRun)
	tests := []struct {
		name string
		edit []string
		want string
	}{
		{"other lengths", []string{"output_tokens: 8,", "output_tokens: 16,"}, "row chat: output_tokens differs from the run's"},
		{"other load", []string{"    concurrency: 1\n  - id: long_prompt", "    concurrency: 2\n  - id: long_prompt"}, "row chat: load differs from the run's"},
		{"renamed row", []string{"id: chat", "id: talk", "rows: [chat,", "rows: [talk,", "rows.chat.", "rows.talk."}, "row chat: the run measured it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exp := editedExperiment(t, run, tt.edit...)
			_, _, err := judgeRun(t, run, RerenderOptions{Experiment: exp})
			if !errors.Is(err, ErrInvalidExperiment) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v; want ErrInvalidExperiment saying %q", err, tt.want)
			}
		})
	}
	// A reworded question is prose: the rows are the same.
	exp := editedExperiment(t, run, "What does one user see?", "What does a lone user see?")
	if _, _, err := judgeRun(t, run, RerenderOptions{Experiment: exp}); err != nil {
		t.Errorf("reworded question: %v", err)
	}
}

func TestRerenderInvalidExperiment(t *testing.T) {
	run := copyRun(t, fixtureRun)
	exp := editedExperiment(t, run, "expect: ttft.p95 < 200", "expect: ttft.p95x < 200")
	_, _, err := judgeRun(t, run, RerenderOptions{Experiment: exp})
	var ps schema.Problems
	if !errors.As(err, &ps) || !strings.Contains(err.Error(), `unknown metric`) {
		t.Errorf("error %v; want the file's problems", err)
	}
}

// TestRerenderEditedExperimentYAML checks that the run's own copy of the
// experiment is trusted only while it matches the hash the run recorded.
func TestRerenderEditedExperimentYAML(t *testing.T) {
	run := copyRun(t, fixtureRun)
	f := filepath.Join(run, rundir.ExperimentFile)
	b, _ := os.ReadFile(f)
	if err := os.WriteFile(f, append(b, "# edited\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Rerender(run, RerenderOptions{})
	if !errors.Is(err, ErrInvalidExperiment) || !strings.Contains(err.Error(), "edited after the run") {
		t.Errorf("error %v; want the hash mismatch", err)
	}
}

// TestRerenderKeepsTheRunsSettings checks that an edited experiment's SLO
// is noted but not applied: goodput was measured against the run's.
func TestRerenderKeepsTheRunsSettings(t *testing.T) {
	run := copyRun(t, fixtureRun)
	exp := editedExperiment(t, run, "slo: {ttft_ms: 200, tpot_ms: 40}", "slo: {ttft_ms: 50}")
	in, notes, err := judgeRun(t, run, RerenderOptions{Experiment: exp})
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "goodput stays as measured against the run's (TTFT ≤ 200 ms, TPOT ≤ 40 ms)") {
		t.Errorf("notes %q; want the SLO difference", notes)
	}
	if md := markdownOf(t, in); !strings.Contains(md, "Goodput counts requests meeting every SLO: TTFT ≤ 200 ms, TPOT ≤ 40 ms.") {
		t.Errorf("decision.md does not keep the run's SLO")
	}
}

func TestRerenderNotARunDirectory(t *testing.T) {
	_, err := Rerender(t.TempDir(), RerenderOptions{})
	if err == nil || errors.Is(err, ErrInvalidExperiment) || !strings.Contains(err.Error(), rundir.ManifestFile) {
		t.Errorf("error %v; want a runtime error naming the manifest", err)
	}
}

// TestFailedFormatKeepsTheVerdict: a report format that cannot be written
// (here report.html, whose place a directory holds) costs that file, not
// the decision record: decision.md and decision.json are written and the
// error names what is missing.
func TestFailedFormatKeepsTheVerdict(t *testing.T) {
	run := copyRun(t, fixtureRun)
	if err := os.MkdirAll(filepath.Join(run, ReportHTML, "occupied"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"decision.md", DecisionJSON} {
		os.Remove(filepath.Join(run, f))
	}
	res, err := Rerender(run, RerenderOptions{})
	if err == nil || !strings.Contains(err.Error(), ReportHTML) {
		t.Fatalf("error %v; want one naming %s", err, ReportHTML)
	}
	if res == nil || res.Decision == nil {
		t.Fatal("no decision returned with the error")
	}
	for _, f := range []string{"decision.md", DecisionJSON, SummaryCSV} {
		if _, err := os.Stat(filepath.Join(run, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
}

// TestRerenderSummaryWithoutErrorExamples: a run written before summaries
// kept error examples re-renders as it did, its records reproducing its
// figures, and its record now names the first message of each class.
func TestRerenderSummaryWithoutErrorExamples(t *testing.T) {
	run := copyRun(t, fixtureRun)
	for _, f := range []string{"summary.json", filepath.Join("rows", "long_prompt", "summary.json")} {
		path := filepath.Join(run, f)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		old := regexp.MustCompile(`,\s*"examples": \{[^}]*\}`).ReplaceAll(b, nil)
		if bytes.Equal(old, b) {
			t.Fatalf("%s has no error examples to remove", f)
		}
		if err := os.WriteFile(path, old, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Rerender(run, RerenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range res.Notes {
		if strings.Contains(n, "do not reproduce") {
			t.Errorf("note %q", n)
		}
	}
	md, err := os.ReadFile(filepath.Join(run, "decision.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| `long_prompt` | http | 1 | HTTP 503") {
		t.Error("decision.md does not give the first error's message")
	}
}
