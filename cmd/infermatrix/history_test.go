package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHistoryOfTwoRuns: two runs on the built-in server, the second into
// a folder whose name sorts first, listed by history in the order they
// ran, with their verdicts and figures, in the terminal table, in GitHub
// Markdown (alone on stdout, for $GITHUB_STEP_SUMMARY) and in the files.
func TestHistoryOfTwoRuns(t *testing.T) {
	runs := t.TempDir()
	for _, name := range []string{"zz-first", "aa-second"} {
		if r := cli(t, context.Background(), "run", "testdata/history.yaml", "--out", filepath.Join(runs, name)); r.code != exitOK {
			t.Fatalf("run %s: exit %d\n%s%s", name, r.code, r.stdout, r.stderr)
		}
	}
	r := cli(t, context.Background(), "history", runs)
	if r.code != exitOK {
		t.Fatalf("history: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	first, second := strings.Index(r.stdout, "PASS (zz-first)"), strings.Index(r.stdout, "PASS (aa-second)")
	if first < 0 || second < first {
		t.Errorf("history does not list zz-first, then aa-second:\n%s", r.stdout)
	}
	for _, want := range []string{"2 runs, oldest first", "changed since #1:", "     chat ", "     sweep/c=2 ", filepath.Join(runs, "history", "history.html")} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("history lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, f := range []string{"history.md", "history.html", "plots/trend-ttft_p95.png", "plots/trend-tpot_p95.svg"} {
		if _, err := os.Stat(filepath.Join(runs, "history", f)); err != nil {
			t.Error(err)
		}
	}

	out := filepath.Join(t.TempDir(), "h")
	g := cli(t, context.Background(), "history", runs, "--format", "github", "--last", "1", "--rows", "sweep", "--out", out)
	if g.code != exitOK {
		t.Fatalf("history --format github: exit %d\n%s%s", g.code, g.stdout, g.stderr)
	}
	if !strings.HasPrefix(g.stdout, "### History of history\n") || strings.Contains(g.stdout, "history.md") || strings.Contains(g.stdout, "| chat |") ||
		!strings.Contains(g.stdout, "| sweep/c=1 |") || !strings.Contains(g.stdout, "the last 1 of 2 runs") {
		t.Errorf("history --format github stdout:\n%s", g.stdout)
	}
	if !strings.Contains(g.stderr, filepath.Join(out, "history.md")) {
		t.Errorf("history --format github does not say on stderr where it wrote:\n%s", g.stderr)
	}
}

// TestHistoryExitCodes: a row no run has and a bad flag are usage errors
// (2); a folder without runs is a runtime error (1).
func TestHistoryExitCodes(t *testing.T) {
	empty := t.TempDir()
	if r := cli(t, context.Background(), "history", empty); r.code != exitRuntime || !strings.Contains(r.stderr, "no run directory") {
		t.Errorf("history of an empty folder: exit %d, %s", r.code, r.stderr)
	}
	if r := cli(t, context.Background(), "history", empty, "--format", "html"); r.code != exitUsage {
		t.Errorf("--format html: exit %d", r.code)
	}
	if r := cli(t, context.Background(), "history", empty, "--last", "-1"); r.code != exitUsage {
		t.Errorf("--last -1: exit %d", r.code)
	}
	run := filepath.Join(empty, "r")
	if r := cli(t, context.Background(), "run", "testdata/history.yaml", "--out", run); r.code != exitOK {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	if r := cli(t, context.Background(), "history", empty, "--rows", "chta"); r.code != exitUsage || !strings.Contains(r.stderr, `no run has a row "chta"`) {
		t.Errorf("--rows chta: exit %d, %s", r.code, r.stderr)
	}
}
