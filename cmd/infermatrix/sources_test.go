package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestBadDatasetIsInvalidEverywhere: validate reads the dataset and trace
// files as run does, so a file that validates also runs; and run, finding
// a bad line, sends nothing and leaves no run directory behind.
func TestBadDatasetIsInvalidEverywhere(t *testing.T) {
	r := cli(t, context.Background(), "validate", "testdata/grid.yaml", "testdata/bad-dataset.yaml")
	if r.code != exitInvalid || !strings.Contains(r.stderr, "testdata/bad-dataset.jsonl:2: want \"prompt\"") ||
		!strings.Contains(r.stdout, "testdata/grid.yaml: ok") || strings.Contains(r.stdout, "bad-dataset.yaml: ok") ||
		!strings.Contains(r.stderr, "1 of 2 files invalid") {
		t.Errorf("validate: exit %d; want %d, the bad line named, the good file ok\nstdout: %s\nstderr: %s", r.code, exitInvalid, r.stdout, r.stderr)
	}

	// A device as a dataset: refused at once, not read forever.
	dir := t.TempDir()
	exp := filepath.Join(dir, "zero.yaml")
	yaml := strings.Replace(readFile(t, "testdata/bad-dataset.yaml"), "file: bad-dataset.jsonl", "file: /dev/zero", 1)
	if err := os.WriteFile(exp, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := cli(t, context.Background(), "validate", exp); r.code != exitInvalid || !strings.Contains(r.stderr, "/dev/zero") {
		t.Errorf("validate /dev/zero: exit %d\nstderr: %s", r.code, r.stderr)
	}

	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"data": [{"id": "m"}]}`))
	}))
	defer srv.Close()
	out := filepath.Join(dir, "run")
	r = cli(t, context.Background(), "run", "testdata/bad-dataset.yaml", "--target", srv.URL+"/v1", "--out", out)
	if r.code != exitInvalid || !strings.Contains(r.stderr, "bad-dataset.jsonl:2:") || !strings.Contains(r.stderr, "nothing was run") {
		t.Errorf("run: exit %d; want %d\nstderr: %s", r.code, exitInvalid, r.stderr)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("run sent %d requests for an experiment with a bad dataset line; want none", n)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("run left %s behind (%v); want no run directory", out, err)
	}
}
