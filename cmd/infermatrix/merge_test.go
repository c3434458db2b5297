package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const mergeExperiment = `apiVersion: infermatrix/v1
name: mergetest
server:
  target: builtin
  api: chat
  sim: {preset: llama-3.1-8b-h100}
defaults: {input_tokens: 64, output_tokens: 16}
rows:
  - id: arrivals
    question: open loop
    requests: 40
    rate: {per_second: RATE, arrival: poisson}
acceptance:
  - {name: ok, rows: [arrivals], expect: errors.total == 0}
`

// TestMergeShards runs an experiment's shards on virtual time and merges
// them as a user would: the whole row back, the verdict judged once, and
// the exit codes of a missing shard, another plan and a directory that is
// not a shard.
func TestMergeShards(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	file := func(name, rate string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(mergeExperiment, "RATE", rate)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := file("a.yaml", "20"), file("b.yaml", "10")
	shard := func(f, i, out string) string {
		out = filepath.Join(dir, out)
		// A shard alone may be judged invalid (it offers only its share
		// of the row's rate); the merged run is what is judged.
		if r := cli(t, ctx, "run", f, "--virtual", "--shard", i, "--out", out); r.code != exitOK && r.code != exitInconclusive {
			t.Fatalf("run --shard %s: exit %d\n%s", i, r.code, r.stderr)
		}
		return out
	}
	s1, s2, other := shard(a, "1/2", "s1"), shard(a, "2/2", "s2"), shard(b, "2/2", "other")

	merged := filepath.Join(dir, "merged")
	r := cli(t, ctx, "merge", s1, s2, "-o", merged)
	if r.code != exitOK || !strings.Contains(r.stdout, "verdict: PASS") {
		t.Fatalf("merge: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var sum struct {
		Rows []struct {
			Requests struct{ Completed int } `json:"requests"`
		} `json:"rows"`
	}
	data, err := os.ReadFile(filepath.Join(merged, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &sum); err != nil || len(sum.Rows) != 1 || sum.Rows[0].Requests.Completed != 40 {
		t.Errorf("merged summary: %v %+v, want the row's 40 requests", err, sum)
	}

	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing shard", []string{s1, "-o", filepath.Join(dir, "m1")}, exitInconclusive, "merged without shard 2"},
		{"another plan", []string{s1, other, "-o", filepath.Join(dir, "m2")}, exitInvalid, "shards of different plans"},
		{"not a shard", []string{merged, "-o", filepath.Join(dir, "m3")}, exitUsage, "not sharded"},
		{"output not empty", []string{s1, s2, "-o", merged}, exitUsage, "not empty"},
		{"no -o", []string{s1, s2}, exitUsage, "-o OUT is required"},
	} {
		r := cli(t, ctx, append([]string{"merge"}, tt.args...)...)
		if r.code != tt.code || !strings.Contains(r.stdout+r.stderr, tt.want) {
			t.Errorf("%s: exit %d, want %d with %q\n%s\n%s", tt.name, r.code, tt.code, tt.want, r.stdout, r.stderr)
		}
	}

	// --termination-log: every ending in one paragraph, for Kubernetes.
	tlog := filepath.Join(dir, "termination-log")
	for _, tt := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"pass", []string{s1, s2, "-o", filepath.Join(dir, "t1")}, exitOK,
			[]string{"verdict PASS (exit 0)", "1 of 1 judged rows pass", "Merged 2 of 2 shards", "Output: " + filepath.Join(dir, "t1")}},
		{"waited, one never came", []string{s1, filepath.Join(dir, "absent"), "-o", filepath.Join(dir, "t2"), "--wait", "50ms"}, exitInconclusive,
			[]string{"verdict INCONCLUSIVE (exit 5)", "merged without shard 2", "missing: 2", filepath.Join(dir, "absent") + ": no run directory after waiting 50ms"}},
		{"refused", []string{s1, other, "-o", filepath.Join(dir, "t3")}, exitInvalid, []string{"merge refused (exit 4)", "nothing was merged"}},
		{"none finished", []string{filepath.Join(dir, "absent"), "-o", filepath.Join(dir, "t4"), "--wait", "10ms"}, exitRuntime, []string{"merge failed (exit 1)", "no shard finished"}},
	} {
		r := cli(t, ctx, append([]string{"merge", "--termination-log", tlog}, tt.args...)...)
		b, err := os.ReadFile(tlog)
		if r.code != tt.code || err != nil {
			t.Errorf("%s: exit %d, want %d; termination log: %v\n%s", tt.name, r.code, tt.code, err, r.stderr)
			continue
		}
		if strings.Count(strings.TrimSpace(string(b)), "\n") > 0 {
			t.Errorf("%s: termination log is not one paragraph: %q", tt.name, b)
		}
		for _, w := range tt.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s: termination log %q does not say %q", tt.name, b, w)
			}
		}
	}
}

// A repeated row's shards are merged trial by trial: each trial of the
// merged run is the union of that trial on every shard, summarised and
// pooled as a single run's would be.
func TestMergeRepeatedRow(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	exp := filepath.Join(dir, "repeat.yaml")
	body := strings.Replace(mergeExperiment, "    requests: 40\n", "    requests: 24\n    repeat: 3\n", 1)
	// Constant arrivals: 24 Poisson ones drift from the rate by chance
	// (the load check), which is not what this test is about.
	body = strings.ReplaceAll(strings.ReplaceAll(body, "RATE", "20"), "poisson", "constant")
	if err := os.WriteFile(exp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var shards []string
	for _, i := range []string{"1/2", "2/2"} {
		out := filepath.Join(dir, "s"+i[:1])
		if r := cli(t, ctx, "run", exp, "--virtual", "--shard", i, "--out", out); r.code != exitOK && r.code != exitInconclusive {
			t.Fatalf("run --shard %s: exit %d\n%s", i, r.code, r.stderr)
		}
		shards = append(shards, out)
	}
	merged := filepath.Join(dir, "merged")
	r := cli(t, ctx, "merge", shards[0], shards[1], "-o", merged)
	if r.code != exitOK || !strings.Contains(r.stdout, "verdict: PASS") {
		t.Fatalf("merge: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	type counts struct {
		Completed int `json:"completed"`
	}
	var sum struct {
		Rows []struct {
			Requests counts `json:"requests"`
			Trials   []struct {
				Trial    int    `json:"trial"`
				Status   string `json:"status"`
				Requests counts `json:"requests"`
			} `json:"trials"`
		} `json:"rows"`
	}
	data, err := os.ReadFile(filepath.Join(merged, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &sum); err != nil || len(sum.Rows) != 1 {
		t.Fatalf("merged summary: %v %s", err, data)
	}
	row := sum.Rows[0]
	if row.Requests.Completed != 72 || len(row.Trials) != 3 {
		t.Fatalf("merged row: %d completed over %d trials, want 72 over 3", row.Requests.Completed, len(row.Trials))
	}
	for k, tr := range row.Trials {
		if tr.Trial != k+1 || tr.Requests.Completed != 24 || tr.Status != "complete" {
			t.Errorf("trial %d: %+v, want trial %d complete with the row's 24 requests", k+1, tr, k+1)
		}
		lines := 0
		for _, s := range shards {
			b, err := os.ReadFile(filepath.Join(s, "rows", "arrivals", fmt.Sprintf("trial-%d", k+1), "requests.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			lines += strings.Count(string(b), "\n")
		}
		b, err := os.ReadFile(filepath.Join(merged, "rows", "arrivals", fmt.Sprintf("trial-%d", k+1), "requests.jsonl"))
		if err != nil || strings.Count(string(b), "\n") != lines {
			t.Errorf("trial %d: merged records %v, %d lines; the shards hold %d", k+1, err, strings.Count(string(b), "\n"), lines)
		}
		if _, err := os.Stat(filepath.Join(merged, "rows", "arrivals", fmt.Sprintf("trial-%d", k+1), "summary.json")); err != nil {
			t.Errorf("trial %d: no summary.json of its own: %v", k+1, err)
		}
	}
	// The merged run reads back as any run does.
	if r := cli(t, ctx, "report", merged); r.code != exitOK || strings.Contains(r.stdout+r.stderr, "do not reproduce") {
		t.Errorf("report of the merged run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
