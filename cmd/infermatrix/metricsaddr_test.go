package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMetricsAddr(t *testing.T) {
	dir := t.TempDir()
	exp := filepath.Join(dir, "exp.yaml")
	if err := os.WriteFile(exp, []byte(`apiVersion: infermatrix/v1
name: live
server: {target: builtin, sim: {preset: fixed, ttft: 1ms, itl: 1ms}}
rows:
  - {id: a, requests: 5, concurrency: 2, input_tokens: 16, output_tokens: 4}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"nonsense", "127.0.0.1:notaport"} {
		r := cli(t, context.Background(), "run", exp, "--out", filepath.Join(dir, "bad"), "--metrics-addr", bad)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--metrics-addr") || !strings.Contains(r.stderr, "HOST:PORT") && !strings.Contains(r.stderr, "listen") {
			t.Errorf("--metrics-addr %s: exit %d; want %d with why\n%s", bad, r.code, exitUsage, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "bad")); err == nil {
			t.Errorf("--metrics-addr %s: a run directory was made", bad)
		}
	}
	r := cli(t, context.Background(), "run", exp, "--out", filepath.Join(dir, "ok"), "--metrics-addr", "127.0.0.1:0", "--metrics-linger", "0s")
	if r.code != exitOK || !strings.Contains(r.stderr, "live metrics at http://127.0.0.1:") {
		t.Errorf("exit %d; want 0 and the metrics URL logged\n%s", r.code, r.stderr)
	}
}
