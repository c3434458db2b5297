package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlanShowsSearchWorstCase: plan shows a search row's range, its
// worst-case number of probes and the requests they send at most.
func TestPlanShowsSearchWorstCase(t *testing.T) {
	r := cli(t, context.Background(), "plan", "testdata/search.yaml")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"search concurrency 1 to 256, ≤12 probes", "≤1200", "1200 requests, about"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestSearchMisuseIsInvalid: a search that contradicts itself is an
// invalid experiment (exit 4), reported at its key.
func TestSearchMisuseIsInvalid(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bad.yaml")
	src := `apiVersion: infermatrix/v1
name: bad
server: {urls: ["http://127.0.0.1:8000/v1"], model: m}
defaults: {requests: 10, input_tokens: 16, output_tokens: 16}
rows:
  - {id: sat, search: {concurrency: {min: 8, max: 4}}}
acceptance:
  - {name: slo, expect: ttft.p95 < 1000}
`
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, context.Background(), "validate", file)
	if r.code != exitInvalid || !strings.Contains(r.stderr, "bad.yaml:6:51: rows[0].search.concurrency.max: max 4 is not above min 8") {
		t.Errorf("exit %d; want %d with the problem at its key:\n%s", r.code, exitInvalid, r.stderr)
	}
}
