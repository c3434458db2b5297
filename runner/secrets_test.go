package runner

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/internal/redact"
	"github.com/infermatrix/infermatrix/sim"
)

// The credentials of the tests below: distinctive, so that a grep finds
// any copy.
const (
	testKey  = "SEKRIT-abc123-key"
	testGoog = "SEKRIT-abc123-goog"
)

// echoServer is the simulator behind a gateway that demands both
// credentials and, like a careless server, echoes them: in the Server
// header of every response and in the error body of every second request.
// authed counts the requests that carried both.
func echoServer(t *testing.T) (url string, authed *atomic.Int64) {
	t.Helper()
	s, err := sim.New(sim.Config{Model: "m", TTFT: time.Millisecond, ITL: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	authed = &atomic.Int64{}
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "gateway for "+r.Header.Get("X-Goog-Api-Key"))
		if r.Header.Get("Authorization") != "Bearer "+testKey || r.Header.Get("X-Goog-Api-Key") != testGoog || r.Header.Get("X-Team") != "capacity" {
			http.Error(w, `{"error": {"message": "missing credentials"}}`, http.StatusUnauthorized)
			return
		}
		authed.Add(1)
		if strings.HasSuffix(r.URL.Path, "/completions") && n.Add(1)%2 == 0 {
			http.Error(w, `{"error": {"message": "key `+testKey+` and `+testGoog+` are over quota"}}`, http.StatusTooManyRequests)
			return
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1", authed
}

// TestCredentialsFromTheEnvironment: api_key_env and header_env are sent
// on every request, and neither value is in any file of the run, in the
// log, or in what Run returns, though the server echoes both.
func TestCredentialsFromTheEnvironment(t *testing.T) {
	t.Setenv("IMX_TEST_KEY", testKey)
	t.Setenv("IMX_TEST_GOOG", testGoog)
	url, authed := echoServer(t)
	p := plan(t, `server:
  urls: [`+url+`]
  api_key_env: IMX_TEST_KEY
  header_env: {X-Goog-Api-Key: IMX_TEST_GOOG}
  headers: {X-Team: capacity}
rows: [{id: a, requests: 6, concurrency: 2, input_tokens: 8, output_tokens: 4}]
`)
	out := filepath.Join(t.TempDir(), "run")
	var log bytes.Buffer
	res, err := Run(context.Background(), p, Options{Out: out, Log: &log, Command: []string{"infermatrix", "run", "x.yaml"}})
	if err != nil {
		t.Fatal(err)
	}
	// /models and six requests, all with both credentials.
	if got := authed.Load(); got < 7 {
		t.Fatalf("%d requests carried the credentials; want 7", got)
	}
	var echoed int
	for _, r := range records(t, res.Dir, "a") {
		if r.Error != nil && strings.Contains(r.Error.Message, "key "+redact.Mask+" and "+redact.Mask) {
			echoed++
		}
	}
	if echoed != 3 {
		t.Errorf("%d records hold the scrubbed echo; want 3", echoed)
	}
	if d := res.Manifest.Server.Discovered.Server; d != "gateway for "+redact.Mask {
		t.Errorf("the Server header is kept as %q", d)
	}
	grepRun(t, out, log.String(), "SEKRIT")
}

// grepRun fails for every file under dir, and for the log, holding s.
func grepRun(t *testing.T, dir, log, s string) {
	t.Helper()
	files := 0
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		files++
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(s)) {
			t.Errorf("%s holds %s", p, s)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 4 {
		t.Errorf("only %d files in the run; the walk missed it", files)
	}
	if strings.Contains(log, s) {
		t.Errorf("the log holds %s:\n%s", s, log)
	}
}

// TestUnsetHeaderEnv: a header_env variable that is not set stops the run
// before anything is sent, naming the variable.
func TestUnsetHeaderEnv(t *testing.T) {
	t.Setenv("IMX_TEST_GOOG", "")
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	p := plan(t, `server: {urls: [`+srv.URL+`/v1], model: m, header_env: {X-Goog-Api-Key: IMX_TEST_GOOG}}
rows: [{id: a, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 8}]
`)
	out := filepath.Join(t.TempDir(), "run")
	_, err := Run(context.Background(), p, Options{Out: out})
	if err == nil || !strings.Contains(err.Error(), "server.header_env.X-Goog-Api-Key names IMX_TEST_GOOG, but it is not set") {
		t.Errorf("err = %v; want it to name the header and the unset variable", err)
	}
	if hits.Load() != 0 {
		t.Errorf("%d requests were sent", hits.Load())
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a run directory was created")
	}
}

// TestRunErrorsAreScrubbed: when the run fails on what the server says,
// the error returned (and printed by the CLI) holds no credential.
func TestRunErrorsAreScrubbed(t *testing.T) {
	t.Setenv("IMX_TEST_KEY", testKey)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Two models, one named after the key: the run cannot choose and
		// says which it was offered.
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"object": "list", "data": [{"id": "a"}, {"id": "` + r.Header.Get("Authorization") + `"}]}`))
	}))
	defer srv.Close()
	p := plan(t, `server: {urls: [`+srv.URL+`/v1], api_key_env: IMX_TEST_KEY}
rows: [{id: a, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 8}]
`)
	_, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err == nil || !strings.Contains(err.Error(), "lists several: a, Bearer "+redact.Mask) {
		t.Errorf("err = %v; want the model list with the key masked", err)
	}
}

// TestPlanURLsWithCredentialsAreRefused: a plan built in code, which
// schema never checked, still cannot send or echo a URL's credentials.
func TestPlanURLsWithCredentialsAreRefused(t *testing.T) {
	p := plan(t, `server: {urls: [http://127.0.0.1:9/v1], model: m}
rows: [{id: a, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 8}]
`)
	p.Server.URLs = []string{"http://alice:SEKRIT-pw@127.0.0.1:9/v1"}
	_, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err == nil || strings.Contains(err.Error(), "SEKRIT") || strings.Contains(err.Error(), "alice") || errors.Is(err, ErrServerUnreachable) {
		t.Errorf("err = %v; want a refusal with the URL masked", err)
	}
}
