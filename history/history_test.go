package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/internal/redact"
	"github.com/infermatrix/infermatrix/metrics"
)

// row is one row's figures in a synthetic run.
type row struct {
	id                   string
	ttft, tpot, e2e, tok float64
	errRatio             float64
	verdict              string // the row's verdict in decision.json
	invalid              bool
	noTPOT               bool // no sample measured TPOT
}

// run is a synthetic run directory, written by hand: the files history
// reads, with known figures.
type run struct {
	started   time.Time
	tool      string
	driver    string
	flags     map[string]any
	status    string // manifest status; "complete" when empty
	verdict   string // decision.json's; no decision.json when empty
	noSummary bool
	rows      []row
	sha       string
}

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeRun writes r's manifest.json, summary.json and decision.json into
// dir as raw JSON, as an older or a foreign build might have: nothing of
// ours masks or normalises them on the way in.
func writeRun(t *testing.T, dir string, r run) {
	t.Helper()
	if r.status == "" {
		r.status = "complete"
	}
	if r.sha == "" {
		r.sha = "aaaa"
	}
	var planned []map[string]any
	for _, rw := range r.rows {
		base, _, _ := strings.Cut(rw.id, "/")
		planned = append(planned, map[string]any{"id": rw.id, "base": base})
	}
	writeJSON(t, filepath.Join(dir, "manifest.json"), map[string]any{
		"format":     "infermatrix.run/v1",
		"tool":       map[string]any{"version": r.tool, "go": "go1.26.0"},
		"host":       map[string]any{"name": "ci-1", "os": "linux", "arch": "amd64", "cpus": 4},
		"experiment": map[string]any{"name": "chat-h100", "file": "chat.yaml", "sha256": r.sha},
		"started":    r.started,
		"status":     r.status,
		"server": map[string]any{
			"declared": map[string]any{
				"urls": []string{"http://gpu-1:8000/v1"}, "api": "chat", "model": "llama",
				"engine":   map[string]any{"name": "vllm", "version": "0.11.0", "flags": r.flags},
				"hardware": map[string]any{"gpu": "H100-SXM", "driver": r.driver},
			},
			"discovered": map[string]any{},
		},
		"rows": planned,
	})
	if !r.noSummary {
		var rows []map[string]any
		for _, rw := range r.rows {
			tpotCount := 10
			if rw.noTPOT {
				tpotCount = 0
			}
			rows = append(rows, map[string]any{
				"id": rw.id, "status": "ok", "requests": map[string]any{"sent": 10, "completed": 10},
				"metrics": map[string]any{
					"ttft_ms": map[string]any{"count": 10, "p95": rw.ttft},
					"tpot_ms": map[string]any{"count": tpotCount, "p95": rw.tpot},
					"e2e_ms":  map[string]any{"count": 10, "p95": rw.e2e},
				},
				"throughput": map[string]any{"output_tokens_per_s": rw.tok},
				"errors":     map[string]any{"total": 0, "ratio": rw.errRatio},
			})
		}
		writeJSON(t, filepath.Join(dir, "summary.json"), map[string]any{
			"format": metrics.SummaryFormat, "experiment": "chat-h100", "percentiles": []float64{50, 90, 95, 99}, "rows": rows,
		})
	}
	if r.verdict != "" {
		var rows []map[string]any
		for _, rw := range r.rows {
			rows = append(rows, map[string]any{"id": rw.id, "verdict": rw.verdict, "validity": map[string]any{"valid": !rw.invalid}})
		}
		writeJSON(t, filepath.Join(dir, "decision.json"), map[string]any{"verdict": r.verdict, "rows": rows})
	}
}

// ciFolder is CI artifacts unpacked under names that sort in no useful
// order: the oldest run is last by name, the newest first, one is nested
// two levels down, and beside them are things that are not runs.
func ciFolder(t *testing.T) string {
	dir := t.TempDir()
	writeRun(t, filepath.Join(dir, "zz-artifact-9913"), run{
		started: t0, tool: "v1.2.0", driver: "570.86", flags: map[string]any{"max-num-seqs": 64, "api-key": "SEKRIT-1"}, verdict: "pass",
		rows: []row{
			{id: "chat", ttft: 120, tpot: 20, e2e: 2700, tok: 900, verdict: "pass"},
			{id: "sweep/c=1", ttft: 80, tpot: 15, e2e: 2000, tok: 60, verdict: "no rules"},
		},
	})
	writeRun(t, filepath.Join(dir, "bench-results", "run-b"), run{
		started: t0.Add(24 * time.Hour), tool: "v1.2.0", driver: "580.95", flags: map[string]any{"max-num-seqs": 64, "api-key": "SEKRIT-2"}, verdict: "fail",
		rows: []row{
			{id: "chat", ttft: 150, tpot: 26, e2e: 3400, tok: 700, errRatio: 0.02, verdict: "fail"},
			{id: "sweep/c=1", ttft: 81, tpot: 15.5, e2e: 2050, tok: 59, verdict: "invalid", invalid: true},
			{id: "sweep/c=4", ttft: 95, tpot: 18, e2e: 2400, tok: 210, verdict: "no rules"},
		},
	})
	writeRun(t, filepath.Join(dir, "aaa-artifact-0001"), run{
		started: t0.Add(48 * time.Hour), tool: "v1.3.0", driver: "580.95", flags: map[string]any{"max-num-seqs": 128, "api-key": "SEKRIT-2"}, verdict: "pass",
		rows: []row{
			{id: "chat", ttft: 118, tpot: 19.5, e2e: 2650, tok: 910, verdict: "pass"},
			{id: "sweep/c=1", ttft: 79, tpot: 15, e2e: 1990, tok: 61, verdict: "no rules", noTPOT: true},
		},
	})
	// Not runs: a link to one, a comparison and a re-judgement (each with
	// a manifest-like file, which must not make them runs), and notes.
	if err := os.Symlink("aaa-artifact-0001", filepath.Join(dir, "latest")); err != nil {
		t.Fatal(err)
	}
	writeRun(t, filepath.Join(dir, "compare-a-b"), run{started: t0.Add(99 * time.Hour), tool: "x", verdict: "pass"})
	writeRun(t, filepath.Join(dir, "bench-results", "rejudged"), run{started: t0.Add(98 * time.Hour), tool: "x", verdict: "pass"})
	if err := os.WriteFile(filepath.Join(dir, "README.txt"), []byte("artifacts"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "notes", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestOrderByStartNotName: runs come in the order their manifests say
// they started, whatever their folders are called, and only folders with
// a manifest that are not links, comparisons or re-judgements are runs.
func TestOrderByStartNotName(t *testing.T) {
	dir := ciFolder(t)
	h, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var rels []string
	for _, r := range h.Runs {
		rels = append(rels, filepath.ToSlash(r.Rel))
	}
	if got, want := strings.Join(rels, " "), "zz-artifact-9913 bench-results/run-b aaa-artifact-0001"; got != want {
		t.Fatalf("runs = %s; want %s", got, want)
	}
	for i, r := range h.Runs {
		if r.Index != i+1 {
			t.Errorf("run %s index %d; want %d", r.Rel, r.Index, i+1)
		}
	}
	if got := strings.Join([]string{h.Runs[0].Verdict, h.Runs[1].Verdict, h.Runs[2].Verdict}, " "); got != "PASS FAIL PASS" {
		t.Errorf("verdicts = %s", got)
	}
	if got := strings.Join(h.Rows, " "); got != "chat sweep/c=1 sweep/c=4" {
		t.Errorf("rows = %s", got)
	}
	if h.Total != 3 || len(h.Skipped) != 0 {
		t.Errorf("total %d, skipped %+v", h.Total, h.Skipped)
	}
}

// TestMetricsFromSummaries: each row's headline figures are the run's
// summary's, a distribution without samples is no value (not 0), and a
// row the decision record found invalid is marked so.
func TestMetricsFromSummaries(t *testing.T) {
	h, err := Load(ciFolder(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	chat := h.Runs[1].Values["chat"]
	if want := []float64{150, 26, 3400, 700, 0.02}; !equalFloats(chat.Values, want) {
		t.Errorf("run 2 chat = %v; want %v", chat.Values, want)
	}
	if chat.Invalid || chat.Verdict != "fail" {
		t.Errorf("run 2 chat: invalid %v, verdict %q", chat.Invalid, chat.Verdict)
	}
	if s := h.Runs[1].Values["sweep/c=1"]; !s.Invalid {
		t.Error("run 2 sweep/c=1 is invalid in decision.json, not marked")
	}
	if v := h.Runs[2].Values["sweep/c=1"].Values[1]; !math.IsNaN(v) {
		t.Errorf("run 3 sweep/c=1 TPOT with no sample = %v; want no value", v)
	}
	if h.Runs[0].Values["sweep/c=4"] != nil {
		t.Error("run 1 has a value for sweep/c=4, which it did not run")
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return true
}

// TestChangesBetweenConsecutiveRuns: what changed is read from each pair
// of consecutive manifests, in time order, and a credential flag is masked
// even when the manifest holds it in clear.
func TestChangesBetweenConsecutiveRuns(t *testing.T) {
	h, err := Load(ciFolder(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if h.Runs[0].Changes != nil {
		t.Errorf("the first run has changes: %+v", h.Runs[0].Changes)
	}
	fields := func(r Run) map[string][2]string {
		m := map[string][2]string{}
		for _, c := range r.Changes {
			m[c.Field] = [2]string{c.Base, c.New}
		}
		return m
	}
	c2 := fields(h.Runs[1])
	if got := c2["server.declared.hardware.driver"]; got != [2]string{"570.86", "580.95"} {
		t.Errorf("run 2 driver change = %v; changes %+v", got, h.Runs[1].Changes)
	}
	if len(c2) != 1 {
		t.Errorf("run 2 changes = %+v; want the driver only (the api key differs, but masked it reads the same)", h.Runs[1].Changes)
	}
	c3 := fields(h.Runs[2])
	if got := c3["tool.version"]; got != [2]string{"v1.2.0", "v1.3.0"} {
		t.Errorf("run 3 tool change = %v", got)
	}
	if got := c3["server.declared.engine.flags"]; !strings.Contains(got[0], "max-num-seqs=64") || !strings.Contains(got[1], "max-num-seqs=128") {
		t.Errorf("run 3 flags change = %v", got)
	}
	if _, ok := c3["server.declared.hardware.driver"]; ok {
		t.Error("run 3: the driver did not change, but is listed")
	}
	var all bytes.Buffer
	if err := h.WriteText(&all); err != nil {
		t.Fatal(err)
	}
	md := h.Markdown(nil)
	page, err := h.HTML(nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"text": all.String(), "markdown": md, "html": page} {
		if strings.Contains(text, "SEKRIT") {
			t.Errorf("%s output shows a credential flag's value", name)
		}
	}
	if !strings.Contains(md, "api-key="+redact.Mask) && !strings.Contains(md, "api-key=\""+redact.Mask) {
		t.Errorf("history.md does not show the masked flag:\n%s", md)
	}
}

// TestKilledAndBrokenRuns: a run killed before its summary is listed as
// killed with the command that rebuilds it; one with a summary but no
// decision record says so; a manifest that cannot be read leaves the run
// out with why; a folder without a manifest is not a run.
func TestKilledAndBrokenRuns(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, filepath.Join(dir, "first"), run{started: t0, tool: "v1", verdict: "pass", rows: []row{{id: "chat", ttft: 100, verdict: "pass"}}})
	writeRun(t, filepath.Join(dir, "killed"), run{started: t0.Add(time.Hour), tool: "v1", status: "running", noSummary: true, rows: []row{{id: "chat"}}})
	writeRun(t, filepath.Join(dir, "unjudged"), run{started: t0.Add(2 * time.Hour), tool: "v1", rows: []row{{id: "chat", ttft: 110}}})
	if err := os.MkdirAll(filepath.Join(dir, "torn"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "torn", "manifest.json"), []byte(`{"format":"infermatrix.run/v1","sta`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "scratch", "plots"), 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Runs) != 3 {
		t.Fatalf("%d runs; want 3: %+v", len(h.Runs), h.Runs)
	}
	k := h.Runs[1]
	if !k.Killed || k.Verdict != "killed, run `infermatrix report "+filepath.Join(dir, "killed")+"`" || len(k.Values) != 0 {
		t.Errorf("killed run: killed %v, verdict %q, values %v", k.Killed, k.Verdict, k.Values)
	}
	u := h.Runs[2]
	if u.Verdict != "no record" || u.Values["chat"] == nil || u.Values["chat"].Values[0] != 110 {
		t.Errorf("run without decision.json: verdict %q, values %+v", u.Verdict, u.Values)
	}
	if len(h.Skipped) != 1 || filepath.Base(h.Skipped[0].Dir) != "torn" || !strings.Contains(h.Skipped[0].Why, "infermatrix report") {
		t.Errorf("skipped = %+v", h.Skipped)
	}
	var out bytes.Buffer
	if err := h.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"killed, run `infermatrix report", "no record", "left out:", "torn: manifest.json cannot be read"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, out.String())
		}
	}
}

// TestNoRuns: a folder with no run is an error that says where it looked.
func TestNoRuns(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "compare-x-y"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, Options{}); err == nil || !strings.Contains(err.Error(), "no run directory") {
		t.Errorf("Load(empty) = %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing"), Options{}); err == nil {
		t.Error("Load(missing folder) succeeded")
	}
}

// TestCopiesListedOnce: the same run unpacked twice (two artifacts of one
// job) is listed once, and the copy is said to be left out.
func TestCopiesListedOnce(t *testing.T) {
	dir := t.TempDir()
	r := run{started: t0, tool: "v1", verdict: "pass", rows: []row{{id: "chat", ttft: 100, verdict: "pass"}}}
	writeRun(t, filepath.Join(dir, "a"), r)
	writeRun(t, filepath.Join(dir, "b", "copy"), r)
	h, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Runs) != 1 || len(h.Skipped) != 1 || !strings.Contains(h.Skipped[0].Why, "the same run as a") {
		t.Errorf("runs %d, skipped %+v", len(h.Runs), h.Skipped)
	}
}

// TestLastAndRows: --last keeps the newest runs with their numbers and
// what changed since the run before them; --rows keeps rows by id or by a
// swept row's base id; a row no run has is a usage error.
func TestLastAndRows(t *testing.T) {
	dir := ciFolder(t)
	h, err := Load(dir, Options{Last: 2, Rows: []string{"sweep"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Runs) != 2 || h.Runs[0].Index != 2 || h.Total != 3 {
		t.Fatalf("runs %d, first index %d, total %d", len(h.Runs), h.Runs[0].Index, h.Total)
	}
	if len(h.Runs[0].Changes) == 0 {
		t.Error("the first run kept lost what changed since the run before it")
	}
	if got := strings.Join(h.Rows, " "); got != "sweep/c=1 sweep/c=4" {
		t.Errorf("rows = %s", got)
	}
	var out bytes.Buffer
	if err := h.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "the last 2 of 3 runs") || strings.Contains(s, "chat ") || !strings.Contains(s, "changed since #1") {
		t.Errorf("text:\n%s", s)
	}
	_, err = Load(dir, Options{Rows: []string{"chta"}})
	var unknown *UnknownRowError
	if !errors.As(err, &unknown) || unknown.Row != "chta" {
		t.Errorf("Load(--rows chta) = %v", err)
	}
}

// TestRenderings: the terminal table, the GitHub summary, history.md and
// history.html carry each run's verdict and each row's figures in order,
// mark invalid rows, and the files are written with a chart per metric.
func TestRenderings(t *testing.T) {
	dir := ciFolder(t)
	h, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := h.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	s := text.String()
	i1, i2, i3 := strings.Index(s, "zz-artifact-9913"), strings.Index(s, "run-b"), strings.Index(s, "aaa-artifact-0001")
	if !(i1 >= 0 && i1 < i2 && i2 < i3) {
		t.Errorf("runs out of order in the text:\n%s", s)
	}
	for _, want := range []string{
		"  2  2026-03-02 10:00:00  v1.2.0            FAIL (bench-results/run-b)",
		"changed since #1: server.declared.hardware.driver 570.86 → 580.95\n",
		// Only the flag that changed, not the whole list.
		"changed since #2: tool.version v1.2.0 → v1.3.0; server.declared.engine.flags max-num-seqs=64 → max-num-seqs=128\n",
		"sweep/c=1 (invalid)",
		"2.00%", // run 2's error ratio
	} {
		if !strings.Contains(s, want) {
			t.Errorf("text lacks %q:\n%s", want, s)
		}
	}

	var gh bytes.Buffer
	if err := h.WriteGitHub(&gh); err != nil {
		t.Fatal(err)
	}
	g := gh.String()
	for _, want := range []string{
		"| 2 | 2026-03-02 10:00:00 | v1.2.0 | FAIL | server.declared.hardware.driver |",
		"| chat | 120 → 150 → 118 | 20.0 → 26.0 → 19.5 |",
		"| sweep/c=1 | 80.0 → 81.0† → 79.0 | 15.0 → 15.5† → — |",
		"| sweep/c=4 | — → 95.0 → — |",
	} {
		if !strings.Contains(g, want) {
			t.Errorf("github output lacks %q:\n%s", want, g)
		}
	}

	out := filepath.Join(t.TempDir(), "hist")
	written, err := Write(h, out)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 5*2+2 {
		t.Errorf("wrote %d files; want 5 charts × 2 formats + 2 documents: %v", len(written), written)
	}
	md := readFile(t, filepath.Join(out, MarkdownFile))
	for _, want := range []string{
		"| 3 | 2026-03-03 10:00:00 | v1.3.0 | PASS | aaa-artifact-0001 | tool.version, server.declared.engine.flags |",
		"### #1 → #2",
		"| server.declared.hardware.driver | 570.86 | 580.95 |",
		"| 2 | 2026-03-02 10:00:00 | 81.0 | 15.5 | 2050 | 59.0 | 0.00% | invalid |",
		"![TPOT p95](plots/trend-tpot_p95.png)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("history.md lacks %q:\n%s", want, md)
		}
	}
	page := readFile(t, filepath.Join(out, HTMLFile))
	if n := strings.Count(page, `src="data:image/svg`); n != 5 {
		t.Errorf("history.html has %d inline charts; want 5", n)
	}
	if strings.Contains(page, "<script") || strings.Contains(page, `src="http`) {
		t.Error("history.html loads or runs something")
	}
	if _, err := os.Stat(filepath.Join(out, "plots", "trend-error_ratio.png")); err != nil {
		t.Error(err)
	}
	// The history folder is not taken for a run by the next history.
	if _, err := Write(h, filepath.Join(dir, DirName)); err != nil {
		t.Fatal(err)
	}
	if h2, err := Load(dir, Options{}); err != nil || len(h2.Runs) != 3 || len(h2.Skipped) != 0 {
		t.Errorf("history after writing into the folder: %v, %+v", err, h2)
	}
}

// TestHostileNames: a folder name, a row id and a tool version from the
// runs cannot print an escape sequence, break a Markdown table or form a
// tag in the page.
func TestHostileNames(t *testing.T) {
	dir := t.TempDir()
	id := "chat|<img src=x onerror=alert(1)>"
	writeRun(t, filepath.Join(dir, "evil\x1b]0;owned\x07"), run{started: t0, tool: "v1\x1b[2J", verdict: "pass",
		rows: []row{{id: id, ttft: 100, tpot: 10, e2e: 1000, tok: 100, verdict: "pass"}}})
	writeRun(t, filepath.Join(dir, "b"), run{started: t0.Add(time.Hour), tool: "v2[x](http://e)", verdict: "pass",
		rows: []row{{id: id, ttft: 101, tpot: 10, e2e: 1000, tok: 100, verdict: "pass"}}})
	h, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var text, gh bytes.Buffer
	if err := h.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := h.WriteGitHub(&gh); err != nil {
		t.Fatal(err)
	}
	md := h.Markdown(nil)
	page, err := h.HTML(nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{"text": text.String(), "github": gh.String(), "markdown": md, "html": page} {
		if strings.ContainsAny(s, "\x1b\x07") {
			t.Errorf("%s output holds a control character", name)
		}
		if name != "text" && strings.Contains(s, "<img") {
			t.Errorf("%s output holds a tag from a row id", name)
		}
		if (name == "github" || name == "markdown") && strings.Contains(s, "](http") {
			t.Errorf("%s output forms a link", name)
		}
	}
	if !strings.Contains(gh.String(), `| chat\|&lt;img`) {
		t.Errorf("github table does not escape the row id's pipe:\n%s", gh.String())
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
