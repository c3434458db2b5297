package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunFormatGitHub: `run --format github` prints the verdict and one
// line per row as Markdown, and nothing else, on stdout (what a CI job
// appends to $GITHUB_STEP_SUMMARY); the record's path and the verdict line
// go to stderr; the exit code is the verdict's as ever. `report` does the
// same from the run directory.
func TestRunFormatGitHub(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	ctx := context.Background()
	for _, args := range [][]string{
		{"run", "testdata/failing.yaml", "--out", out, "--progress", "lines", "--format", "github"},
		{"report", out, "--format", "github"},
	} {
		r := cli(t, ctx, args...)
		if r.code != exitAcceptance {
			t.Fatalf("%s: exit %d; want %d\n%s\n%s", args[0], r.code, exitAcceptance, r.stdout, r.stderr)
		}
		if !strings.HasPrefix(r.stdout, "### infermatrix: failing (SIMULATED)\n") {
			t.Errorf("%s: stdout does not start with the heading:\n%s", args[0], r.stdout)
		}
		for _, want := range []string{"**Verdict: FAIL.**", "| `fine` | ✅ pass |", "| `impossible` | ❌ **fail** |"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%s: stdout lacks %q:\n%s", args[0], want, r.stdout)
			}
		}
		if strings.Contains(r.stdout, "decision record:") || !strings.Contains(r.stderr, "decision record:") || !strings.Contains(r.stderr, "verdict: FAIL") {
			t.Errorf("%s: the path and verdict lines belong on stderr\nstdout:\n%s\nstderr:\n%s", args[0], r.stdout, r.stderr)
		}
	}
	if r := cli(t, ctx, "report", out, "--format", "html"); r.code != exitUsage {
		t.Errorf("--format html: exit %d; want %d", r.code, exitUsage)
	}
}
