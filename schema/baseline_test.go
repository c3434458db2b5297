package schema

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const baselineBody = `defaults: {requests: 5, input_tokens: 64, output_tokens: 8, concurrency: 1}
rows: [{id: a}]
acceptance:
  - name: no-slower
    expect: tpot.p95 < 1.10 * baseline.tpot.p95
hypotheses:
  - id: H1
    statement: a is no slower than before
    expect: rows.a.e2e.p50 <= rows.a.baseline.e2e.p50
`

// TestBaselineWithoutOne: a rule or hypothesis that reads baseline.<metric>
// in a file with no baseline key, loaded without --baseline, is refused at
// load time, at the column where it reads it, with a hint naming both ways
// to give one. validate loads this way, so it catches it too.
func TestBaselineWithoutOne(t *testing.T) {
	_, err := Parse("test.yaml", []byte(header+baselineBody), Options{})
	var ps Problems
	if !errors.As(err, &ps) || len(ps) != 2 {
		t.Fatalf("Parse = %v; want two problems", err)
	}
	want := []struct {
		path string
		pos  Pos
	}{
		// "    expect: tpot.p95 < 1.10 * baseline.tpot.p95" on line 8; a
		// hypothesis is pointed at its rows.a.baseline.
		{"acceptance[0].expect", Pos{8, 31}},
		{"hypotheses[0].expect", Pos{12, 31}},
	}
	for i, w := range want {
		p := ps[i]
		if p.Path != w.path || p.Pos != w.pos {
			t.Errorf("problem %d at %s %v; want %s %v (%s)", i, p.Path, p.Pos, w.path, w.pos, p.Message)
		}
		if !strings.Contains(p.Message, "baseline") || !strings.Contains(p.Hint, "--baseline") || !strings.Contains(p.Hint, "baseline: runs/") {
			t.Errorf("problem %d: %q, hint %q; want it to name the baseline, --baseline and the key", i, p.Message, p.Hint)
		}
	}
}

// TestBaselineKeyRelativeToFile: the key is a path relative to the
// experiment file, as datasets are; the flag is relative to the working
// directory and overrides the key.
func TestBaselineKeyRelativeToFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "exp", "runs", "t"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "exp", "t.yaml")
	p, err := Parse(file, []byte(header+"baseline: runs/t\n"+baselineBody), Options{})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if want := filepath.Join(dir, "exp", "runs", "t"); p.Baseline != want {
		t.Errorf("Baseline = %q; want %q", p.Baseline, want)
	}
	other := filepath.Join(dir, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err = Parse(file, []byte(header+"baseline: runs/t\n"+baselineBody), Options{Baseline: other})
	if err != nil || p.Baseline != other {
		t.Errorf("with --baseline: Baseline = %q, %v; want %q", p.Baseline, err, other)
	}
	// The flag alone is enough for a file without the key.
	if _, err := Parse(file, []byte(header+baselineBody), Options{Baseline: other}); err != nil {
		t.Errorf("--baseline without the key: %v", err)
	}
}

// TestBaselineMissing: a baseline that is not there is found before
// anything is sent, at the key, or as --baseline when the flag named it.
func TestBaselineMissing(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "t.yaml")
	_, err := Parse(file, []byte(header+"baseline: runs/nope\n"+baselineBody), Options{})
	var ps Problems
	if !errors.As(err, &ps) || len(ps) != 1 || ps[0].Path != "baseline" || ps[0].Pos != (Pos{4, 11}) ||
		!strings.Contains(ps[0].Message, `"runs/nope" not found`) || !strings.Contains(ps[0].Hint, "relative to the experiment file") {
		t.Errorf("missing baseline key: %v; want one problem at baseline, 4:11", err)
	}
	_, err = Parse(file, []byte(header+baselineBody), Options{Baseline: filepath.Join(dir, "gone")})
	if !errors.As(err, &ps) || len(ps) != 1 || ps[0].Path != "--baseline" {
		t.Errorf("missing --baseline: %v; want one problem at --baseline", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Parse(file, []byte(header+"baseline: f\n"+baselineBody), Options{})
	if !errors.As(err, &ps) || len(ps) != 1 || !strings.Contains(ps[0].Message, "not a run directory") {
		t.Errorf("a file as baseline: %v; want one problem", err)
	}
	// Re-rendering reads the baseline from the run's manifest, not here.
	if _, err := Parse(file, []byte(header+"baseline: runs/nope\n"+baselineBody), Options{SkipFileChecks: true}); err != nil {
		t.Errorf("SkipFileChecks: %v", err)
	}
}
