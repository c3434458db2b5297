package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestReportRerendersByteForByte runs a small experiment on the built-in
// server, copies its run directory, re-renders the copy with `report` and
// compares every file with the original: re-rendering needs nothing but the
// run directory, and gives the same bytes. Then an edited experiment with a
// stricter rule judges the same measurements, and fails them.
func TestReportRerendersByteForByte(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	r := cli(t, context.Background(), "run", "testdata/rerender.yaml", "--out", out)
	if r.code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	orig := readTree(t, out)
	for _, f := range []string{"decision.md", "decision.json", "summary.csv", "report.html", "profile_export.jsonl"} {
		if _, ok := orig[f]; !ok {
			t.Errorf("the run wrote no %s", f)
		}
	}

	cp := filepath.Join(t.TempDir(), "copy")
	writeTree(t, cp, orig)
	r = cli(t, context.Background(), "report", cp)
	if r.code != exitOK {
		t.Fatalf("report: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		// A format this build does not produce yet is no departure.
		if l != "" && !strings.HasPrefix(l, "note: report format ") {
			t.Errorf("report: %s", l)
		}
	}
	if want := "decision record: " + filepath.Join(cp, "decision.md") + "\nverdict: PASS (4 of 4 judged rows pass)\n"; r.stdout != want {
		t.Errorf("stdout %q; want %q", r.stdout, want)
	}
	again := readTree(t, cp)
	compareTrees(t, orig, again)

	// The same measurements, judged by a stricter rule.
	src := readFile(t, "testdata/rerender.yaml")
	strict := strings.Replace(src, "expect: ttft.p95 < 5000 && p(ttft, 99.9) < 5000", "expect: p(ttft, 99.9) < 0.001", 1)
	if strict == src {
		t.Fatal("the rule to make stricter is not in testdata/rerender.yaml")
	}
	exp := filepath.Join(t.TempDir(), "stricter.yaml")
	if err := os.WriteFile(exp, []byte(strict), 0o644); err != nil {
		t.Fatal(err)
	}
	r = cli(t, context.Background(), "report", cp, "--experiment", exp)
	if r.code != exitAcceptance {
		t.Fatalf("report --experiment: exit %d; want %d\n%s%s", r.code, exitAcceptance, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "verdict: FAIL (0 of 4 judged rows pass)") {
		t.Errorf("stdout %q", r.stdout)
	}
	// The judgement goes beside the run's record, never over it.
	rejudged := rejudgedRecord(t, r.stdout, cp)
	md := readFile(t, filepath.Join(rejudged, "decision.md"))
	if !strings.Contains(md, "| `chat` | relaxed | **fail**: `p(ttft, 99.9) < 0.001` with p(ttft, 99.9) = ") {
		t.Errorf("decision.md does not show the stricter rule failing:\n%s", md)
	}
	// Its top names both experiments and their hashes.
	head := md[:strings.Index(md, "## ")]
	for _, want := range []string{"**Re-judged.**", "made with experiment testdata/rerender.yaml (sha256 ", "by experiment " + exp + " (sha256 "} {
		if !strings.Contains(head, want) {
			t.Errorf("the re-judged record's top lacks %q:\n%s", want, head)
		}
	}
	// The run's own record, records and summaries are byte for byte as
	// they were.
	compareTrees(t, orig, withoutRejudged(readTree(t, cp)))

	// The same records summarised as vllm bench serve would: beside too.
	r = cli(t, context.Background(), "report", cp, "--semantics", "vllm")
	if r.code != exitOK {
		t.Fatalf("report --semantics vllm: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	vdir := rejudgedRecord(t, r.stdout, cp)
	if vdir == rejudged {
		t.Errorf("two judgements went to one folder, %s", vdir)
	}
	if s := readFile(t, filepath.Join(vdir, "summary.json")); !strings.Contains(s, `"semantics": "vllm"`) {
		t.Errorf("the re-summarised summary.json is not under vllm's definitions")
	}
	if md := readFile(t, filepath.Join(vdir, "decision.md")); !strings.Contains(md, "**semantics `vllm`**") {
		t.Errorf("the re-summarised record does not say its semantics")
	}
	compareTrees(t, orig, withoutRejudged(readTree(t, cp)))

	// Another workload is not this run's.
	other := filepath.Join(t.TempDir(), "other.yaml")
	if err := os.WriteFile(other, []byte(strings.Replace(src, "output_tokens: 8", "output_tokens: 9", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r = cli(t, context.Background(), "report", cp, "--experiment", other)
	if r.code != exitInvalid || !strings.Contains(r.stderr, "row chat: output_tokens differs from the run's") {
		t.Errorf("report with another workload: exit %d; want %d\n%s", r.code, exitInvalid, r.stderr)
	}
}

func TestReportExitCodes(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: infermatrix/v1\nname: x\nrows: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no run directory", []string{"report"}, exitUsage, "accepts 1 arg(s)"},
		{"not a run directory", []string{"report", t.TempDir()}, exitRuntime, "manifest.json"},
		{"unknown flag", []string{"report", "x", "--experimnet", "y"}, exitUsage, "unknown flag: --experimnet"},
		{"invalid experiment", []string{"report", "../../reports/testdata/run", "--experiment", bad}, exitInvalid, "nothing was re-rendered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := cli(t, context.Background(), tt.args...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, tt.code, tt.stderr)
			}
		})
	}
}

// rejudgedRecord returns the folder a re-judging report printed its
// record in, checking that it is under the run's rejudged/.
func rejudgedRecord(t *testing.T, stdout, run string) string {
	t.Helper()
	for _, l := range strings.Split(stdout, "\n") {
		if p, ok := strings.CutPrefix(l, "decision record: "); ok {
			dir := filepath.Dir(p)
			if filepath.Dir(dir) != filepath.Join(run, "rejudged") {
				t.Fatalf("the record went to %s; want a folder of %s", dir, filepath.Join(run, "rejudged"))
			}
			return dir
		}
	}
	t.Fatalf("no decision record in %q", stdout)
	return ""
}

// withoutRejudged drops the rejudged/ folder from a tree.
func withoutRejudged(files map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range files {
		if !strings.HasPrefix(k, "rejudged/") {
			out[k] = v
		}
	}
	return out
}

// readTree reads every file under dir, keyed by slash-separated path.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func writeTree(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for rel, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// compareTrees reports every file that differs, is missing or is new.
func compareTrees(t *testing.T, want, got map[string][]byte) {
	t.Helper()
	var names []string
	for n := range want {
		names = append(names, n)
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		w, inWant := want[n]
		g, inGot := got[n]
		switch {
		case !inGot:
			t.Errorf("%s: in the run, not re-rendered", n)
		case !inWant:
			t.Errorf("%s: re-rendered, not in the run", n)
		case !bytes.Equal(w, g):
			t.Errorf("%s: re-rendered differently (%d bytes, was %d)%s", n, len(g), len(w), lineDiff(w, g))
		}
	}
}

// lineDiff shows the first differing line of two texts.
func lineDiff(a, b []byte) string {
	x, y := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(x) && i < len(y); i++ {
		if x[i] != y[i] {
			return "\n  was: " + trim(x[i]) + "\n  now: " + trim(y[i])
		}
	}
	return ""
}

func trim(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
