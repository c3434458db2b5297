package main

import (
	"context"
	"encoding/json"
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
