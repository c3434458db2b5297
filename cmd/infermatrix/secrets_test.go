package main

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/sim"
)

// TestNoSecretInTheRun runs the whole CLI against a gateway that demands an
// API key (api_key_env) and a Google-style key header (header_env), and
// echoes both back: in the Server header of every response and in the
// error body of every second request. Neither value may be in any file of
// the run directory (the workbook's parts included), nor on stdout or
// stderr.
func TestNoSecretInTheRun(t *testing.T) {
	const marker = "SEKRIT-abc123"
	key, goog := marker+"-key", marker+"-goog"
	t.Setenv("IMX_SECRET_TEST_KEY", key)
	t.Setenv("IMX_SECRET_TEST_GOOG", goog)

	s, err := sim.New(sim.Config{Model: "m", TTFT: time.Millisecond, ITL: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var authed, n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "gateway for "+r.Header.Get("X-Goog-Api-Key"))
		if r.Header.Get("Authorization") != "Bearer "+key || r.Header.Get("X-Goog-Api-Key") != goog {
			http.Error(w, `{"error": {"message": "missing credentials"}}`, http.StatusUnauthorized)
			return
		}
		authed.Add(1)
		if strings.HasSuffix(r.URL.Path, "/completions") && n.Add(1)%2 == 0 {
			http.Error(w, `{"error": {"message": "`+key+` / `+goog+` over quota"}}`, http.StatusTooManyRequests)
			return
		}
		s.ServeHTTP(w, r)
	}))
	defer srv.Close()

	dir := t.TempDir()
	file := filepath.Join(dir, "e.yaml")
	exp := `apiVersion: infermatrix/v1
name: secrets
server:
  urls: [` + srv.URL + `/v1]
  api_key_env: IMX_SECRET_TEST_KEY
  header_env: {X-Goog-Api-Key: IMX_SECRET_TEST_GOOG}
  headers: {X-Team: capacity}
report: {formats: [markdown, json, csv, html, xlsx, aiperf]}
rows: [{id: a, requests: 6, concurrency: 2, input_tokens: 8, output_tokens: 4}]
`
	if err := os.WriteFile(file, []byte(exp), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "run")
	r := cli(t, context.Background(), "run", file, "--out", out, "--progress", "lines")
	// Half the requests fail on the gateway's quota: a runtime failure.
	if r.code != exitRuntime && r.code != exitOK && r.code != exitInconclusive {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if got := authed.Load(); got < 7 {
		t.Fatalf("%d requests carried both credentials; want /models and six requests", got)
	}
	for name, text := range map[string]string{"stdout": r.stdout, "stderr": r.stderr} {
		if strings.Contains(text, marker) {
			t.Errorf("%s holds the secret:\n%s", name, text)
		}
	}
	var files []string
	err = filepath.WalkDir(out, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		files = append(files, filepath.Base(p))
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for part, text := range unpacked(t, p, b) {
			if bytes.Contains(text, []byte(marker)) {
				t.Errorf("%s%s holds the secret", p, part)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk must have seen the artifacts it vouches for.
	for _, want := range []string{"manifest.json", "summary.json", "decision.md", "decision.json", "report.html",
		"results.xlsx", "summary.csv", "requests.jsonl", "experiment.yaml"} {
		if !strings.Contains(" "+strings.Join(files, " ")+" ", " "+want+" ") {
			t.Errorf("the run has no %s: %v", want, files)
		}
	}
	// The variable names are recorded; the echo is kept, masked.
	man := readFile(t, filepath.Join(out, "manifest.json"))
	if !strings.Contains(man, `"X-Goog-Api-Key": "IMX_SECRET_TEST_GOOG"`) || !strings.Contains(man, "gateway for (redacted)") {
		t.Errorf("manifest.json lacks the header_env names or the masked echo:\n%s", man)
	}
}

// unpacked returns a file's text by part: the file itself, and for a zip
// (the workbook) each of its entries, whose compressed bytes a plain
// search would miss.
func unpacked(t *testing.T, path string, b []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{"": b}
	if !strings.HasSuffix(path, ".xlsx") {
		return out
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out["/"+f.Name] = data
	}
	return out
}
