package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
)

func plan(t *testing.T, yaml string) *schema.Plan {
	t.Helper()
	p, err := schema.Parse(filepath.Join(t.TempDir(), "exp.yaml"), []byte("apiVersion: infermatrix/v1\nname: t\n"+yaml), schema.Options{})
	if err != nil {
		t.Fatalf("plan:\n%v", err)
	}
	return p
}

// records reads a row's requests.jsonl line by line, failing on any line
// that is not a whole record.
func records(t *testing.T, dir *rundir.Dir, row string) []metrics.Record {
	t.Helper()
	f, err := os.Open(dir.RecordsPath(row))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []metrics.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r metrics.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: bad line %q: %v", row, sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func TestRunWritesEveryRecord(t *testing.T) {
	p := plan(t, `server: {target: builtin, sim: {ttft: 2ms, itl: 1ms}}
defaults: {input_tokens: 32, output_tokens: 8, warmup: 2, body: {ignore_eos: true}}
rows:
  - {id: closed, requests: 20, concurrency: 4}
  - {id: open, requests: 30, rate: {per_second: 300, max_concurrency: 2}}
  - {id: timed, duration: 300ms, concurrency: 2}
  - {id: sw, requests: 6, sweep: {concurrency: [1, 3]}}
`)
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Interrupted || res.Manifest.Status != rundir.StatusComplete {
		t.Errorf("interrupted %v, status %s", res.Interrupted, res.Manifest.Status)
	}
	for _, rs := range res.Summary.Rows {
		recs := records(t, res.Dir, rs.ID)
		if len(recs) != rs.Requests.Sent+rs.Requests.Warmup {
			t.Errorf("%s: %d records on disk; summary counts %d sent + %d warmup", rs.ID, len(recs), rs.Requests.Sent, rs.Requests.Warmup)
		}
		ids := map[string]bool{}
		warm := 0
		for _, r := range recs {
			if r.Error != nil {
				t.Errorf("%s: request %d failed: %+v", rs.ID, r.Seq, r.Error)
			}
			if ids[r.ID] {
				t.Errorf("%s: duplicate record id %s", rs.ID, r.ID)
			}
			ids[r.ID] = true
			if r.Warmup {
				warm++
				if r.Seq >= 2 {
					t.Errorf("%s: warmup record has seq %d; warmup is the first two", rs.ID, r.Seq)
				}
			}
			if *r.OutputTokens.Server != 8 || r.OutputTokens.Client != 8 || *r.InputTokens.Server != 32 || r.InputTokens.Client != 32 {
				t.Errorf("%s: tokens in %+v out %+v; want 32 and 8 everywhere", rs.ID, r.InputTokens, r.OutputTokens)
			}
		}
		if warm != 2 || rs.Requests.Completed != rs.Requests.Sent {
			t.Errorf("%s: %d warmup records, %+v", rs.ID, warm, rs.Requests)
		}
		// Each row's own summary matches the run's.
		var own metrics.RowSummary
		b, err := os.ReadFile(filepath.Join(res.Dir.Path, rundir.RowFile(rs.ID, rundir.SummaryFile)))
		if err != nil || json.Unmarshal(b, &own) != nil || own.Requests != rs.Requests {
			t.Errorf("%s: rows/%s/summary.json = %+v (%v)", rs.ID, rs.ID, own.Requests, err)
		}
	}
	if got := res.Summary.Row("closed").Requests.Sent; got != 20 {
		t.Errorf("closed row sent %d measured requests; want 20", got)
	}
	if n := len(res.Summary.Rows); n != 5 {
		t.Errorf("%d row summaries; want 5 (the sweep expands to two)", n)
	}
	timed := res.Summary.Row("timed")
	if timed.Requests.Sent < 5 || timed.WindowS < 0.3 || timed.WindowS > 3 {
		t.Errorf("timed row: %d requests over %.2fs; want dispatch for 300ms then stop", timed.Requests.Sent, timed.WindowS)
	}
	// The artifacts a run directory promises.
	for _, f := range []string{rundir.ExperimentFile, rundir.HashFile, rundir.ManifestFile, rundir.SummaryFile} {
		if _, err := os.Stat(filepath.Join(res.Dir.Path, f)); err != nil {
			t.Error(err)
		}
	}
	d, err := rundir.Open(res.Dir.Path)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := d.Manifest()
	if m.Format != rundir.Format || len(m.Rows) != 5 || m.Experiment.SHA256 != p.SHA256 || m.Ended == nil || m.Server.Discovered.Models[0].ID != "infermatrix-sim" {
		t.Errorf("manifest = %+v", m)
	}
}

// TestInterruptKeepsRecords is Ctrl-C during a row: dispatching stops,
// requests in flight finish within the grace period, every completed
// request is on disk, and the summaries say interrupted.
func TestInterruptKeepsRecords(t *testing.T) {
	p := plan(t, `server: {target: builtin, sim: {ttft: 5ms, itl: 2ms}}
defaults: {input_tokens: 16, output_tokens: 100, grace: 10s}
rows:
  - {id: long, requests: 10000, concurrency: 4}
  - {id: never, requests: 10, concurrency: 1}
`)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(800*time.Millisecond, cancel)
	res, err := Run(ctx, p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || !res.Summary.Interrupted || res.Manifest.Status != rundir.StatusInterrupted {
		t.Fatalf("interrupted %v/%v status %s", res.Interrupted, res.Summary.Interrupted, res.Manifest.Status)
	}
	long := res.Summary.Row("long")
	if long.Status != metrics.RowInterrupted || res.Summary.Row("never").Status != metrics.RowNotRun {
		t.Errorf("statuses %s, %s", long.Status, res.Summary.Row("never").Status)
	}
	recs := records(t, res.Dir, "long")
	if len(recs) != long.Requests.Sent || len(recs) < 4 || len(recs) >= 10000 {
		t.Errorf("%d records, %d sent", len(recs), long.Requests.Sent)
	}
	for _, r := range recs {
		// With a 10s grace, requests in flight at the interrupt finish.
		if r.Error != nil {
			t.Errorf("request %d: %+v; want it to finish within the grace period", r.Seq, r.Error)
		}
	}
	onDisk, err := rundir.Open(res.Dir.Path)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := onDisk.Summary(); err != nil || !s.Interrupted {
		t.Errorf("summary.json: %v, interrupted %v", err, s != nil && s.Interrupted)
	}
}

func TestGraceExpiryCancelsRequests(t *testing.T) {
	p := plan(t, `server: {target: builtin, sim: {ttft: 5ms, itl: 20ms}}
defaults: {input_tokens: 16, output_tokens: 200, grace: 100ms}
rows:
  - {id: slow, requests: 100, concurrency: 3}
`)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	res, err := Run(ctx, p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("run took %v after a 300ms interrupt and 100ms grace", el)
	}
	recs := records(t, res.Dir, "slow")
	canceled := 0
	for _, r := range recs {
		if r.Error != nil && r.Error.Class == metrics.ErrCanceled {
			canceled++
			if !strings.Contains(r.Error.Message, "grace") {
				t.Errorf("cancel message %q; want it to name the grace period", r.Error.Message)
			}
		}
	}
	if canceled != 3 {
		t.Errorf("%d requests cancelled at the end of the grace period; want the 3 in flight", canceled)
	}
}

func TestCancelFraction(t *testing.T) {
	p := plan(t, `server: {target: builtin, sim: {ttft: 1ms, itl: 2ms}}
defaults: {input_tokens: 16, output_tokens: 30}
rows:
  - {id: c, requests: 40, concurrency: 8, cancel: {fraction: 0.5, after: 20ms}}
`)
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary.Rows[0]
	if s.Requests.Canceled < 8 || s.Requests.Canceled > 32 || s.Errors.ByClass[metrics.ErrCanceled] != s.Requests.Canceled {
		t.Errorf("requests %+v errors %+v; want about half cancelled", s.Requests, s.Errors)
	}
	for _, r := range records(t, res.Dir, "c") {
		if r.Error != nil && r.EndNS < (20*time.Millisecond).Nanoseconds() {
			t.Errorf("request %d cancelled after %v; want after 20ms", r.Seq, time.Duration(r.EndNS))
		}
	}
	if s.Goodput.Ratio != 1 {
		t.Errorf("goodput ratio %v; deliberate cancellations must not count against the server", s.Goodput.Ratio)
	}
}

func TestUnreachableServerFailsBeforeTheRun(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	url := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	p := plan(t, `server: {urls: [`+url+`], model: m}
rows: [{id: a, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 8}]
`)
	out := filepath.Join(t.TempDir(), "run")
	_, err := Run(context.Background(), p, Options{Out: out})
	if !errors.Is(err, ErrServerUnreachable) {
		t.Errorf("err = %v; want ErrServerUnreachable", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a run directory was created for a run that never started")
	}
}

func TestMissingAPIKey(t *testing.T) {
	t.Setenv("INFERMATRIX_TEST_KEY", "")
	p := plan(t, `server: {urls: [http://127.0.0.1:9/v1], model: m, api_key_env: INFERMATRIX_TEST_KEY}
rows: [{id: a, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 8}]
`)
	_, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err == nil || !strings.Contains(err.Error(), "INFERMATRIX_TEST_KEY") {
		t.Errorf("err = %v; want it to name the unset variable", err)
	}
}
