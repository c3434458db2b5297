package runner

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
)

// A variant whose server cannot be reached leaves its rows not run, with
// why, in the summary and the manifest; the next variant gets its own
// built-in server with its own settings, and the run completes.
func TestVariantUnreachableThenBuiltin(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	p := plan(t, `server:
  target: builtin
  sim: {preset: fixed, ttft: 2ms, itl: 1ms}
  variants:
    - {name: gone, urls: [`+closed+`]}
    - {name: local, sim: {model: other-model}}
defaults: {input_tokens: 16, output_tokens: 4, requests: 4, concurrency: 2}
rows: [{id: a}, {id: b}]
`)
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Manifest.Status != rundir.StatusComplete {
		t.Errorf("status %s; want complete: a variant's server is data, not a failure of the tool", res.Manifest.Status)
	}
	want := map[string]string{"a@gone": metrics.RowNotRun, "b@gone": metrics.RowNotRun, "a@local": metrics.RowComplete, "b@local": metrics.RowComplete}
	for _, rs := range res.Summary.Rows {
		if rs.Status != want[rs.ID] {
			t.Errorf("%s: status %s; want %s", rs.ID, rs.Status, want[rs.ID])
		}
		if rs.Status == metrics.RowNotRun && !strings.Contains(rs.Error, "server unreachable") {
			t.Errorf("%s: not run because %q; want the server unreachable", rs.ID, rs.Error)
		}
	}
	vs := res.Manifest.Variants
	if len(vs) != 2 || !strings.Contains(vs[0].Error, "server unreachable") || vs[1].Error != "" {
		t.Fatalf("manifest variants %+v", vs)
	}
	if vs[1].Model != "other-model" || vs[1].Discovered.Simulated == nil || !strings.HasPrefix(vs[1].Discovered.URL, "http://127.0.0.1:") {
		t.Errorf("local variant %+v; want its own built-in server serving other-model", vs[1])
	}
	recs := records(t, res.Dir, "a@local")
	if len(recs) == 0 || recs[0].Error != nil {
		t.Fatalf("a@local records %+v", recs)
	}
}
