package runner

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/validity"
)

// TestClientOutOfFiles runs an open loop without max_concurrency against a
// server (in another process) that answers after 300 ms, in a client
// process allowed only a few dozen more file descriptors: requests in flight pile up until the client cannot
// open another connection. Those arrivals fail in the client. The row must
// be invalid by client_files, saying so; the gate must not read the
// failures as the server refusing (no arrival held back as unsent, no
// "server unreachable"), since the server is up and answering.
func TestClientOutOfFiles(t *testing.T) {
	// The server runs in a process of its own, with descriptors to
	// spare: only the client runs out.
	url, _ := serverProcess(t, slowServer, "")
	dir := t.TempDir()
	p := planIn(t, dir, `server: {urls: [`+url+`], unreachable_after: 300ms}
rows:
  - {id: pileup, requests: 150, rate: {per_second: 300, arrival: constant}, input_tokens: 16, output_tokens: 2}
`, nil)

	// Room for the run's own files and a few dozen requests in flight.
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
		t.Fatal(err)
	}
	low := was
	low.Cur = uint64(len(fds) + 30)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip("cannot lower RLIMIT_NOFILE:", err)
	}
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(dir, "run")})
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("run: %v; a client out of files says nothing of the server", err)
	}
	rs := res.Summary.Row("pileup")
	if rs.Requests.Unsent != 0 {
		t.Errorf("%d arrivals held back: the gate read the client's failures as the server refusing", rs.Requests.Unsent)
	}
	n := 0
	for _, r := range records(t, res.Dir, "pileup") {
		if r.Error != nil && r.Error.Detail == metrics.DetailClientFiles {
			n++
			if r.Error.Class != metrics.ErrConnect || r.ConnNS != 0 {
				t.Errorf("seq %d: %+v, conn at %d; want a connect error before any connection", r.Seq, r.Error, r.ConnNS)
			}
		}
	}
	if n == 0 || rs.SelfCheck.ClientFileErrors != n {
		t.Fatalf("%d records failed for want of a file descriptor, the summary counts %d; want some, the same", n, rs.SelfCheck.ClientFileErrors)
	}
	if rs.Requests.Completed == 0 {
		t.Error("no request completed: the server never answered")
	}
	v := validity.Row(validity.Input{Row: p.Row("pileup"), Summary: rs, Config: p.Validity})
	found := false
	for _, r := range v.Reasons {
		found = found || r.Check == validity.ClientFiles
	}
	if v.Valid || !found {
		t.Errorf("validity %+v; want invalid by client_files", v)
	}
	if !rs.SelfCheck.ClientBound {
		t.Error("the self-check does not call the client the bottleneck")
	}
}
