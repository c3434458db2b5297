package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/protocol"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/tokenizer"
)

func plan(t *testing.T, yaml string) *schema.Plan {
	t.Helper()
	p, err := schema.Parse(filepath.Join(t.TempDir(), "exp.yaml"), []byte("apiVersion: infermatrix/v1\nname: t\n"+yaml), schema.Options{})
	if err != nil {
		t.Fatalf("plan:\n%v", err)
	}
	return p
}

func builtinTok(t testing.TB) tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.New("builtin")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// testClient is a protocol client for tests that send requests
// themselves, as a row's would be.
func testClient(t testing.TB, api string) *protocol.Client {
	t.Helper()
	hc := protocol.NewHTTPClient(8)
	t.Cleanup(hc.CloseIdleConnections)
	return &protocol.Client{HTTP: hc, API: api, Tok: builtinTok(t), RowStart: time.Now(), Budget: protocol.NewBudget(protocol.MaxBufferedResponses)}
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
	p := plan(t, `server: {target: builtin, sim: {preset: fixed, ttft: 2ms, itl: 1ms}}
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
	p := plan(t, `server: {target: builtin, sim: {preset: fixed, ttft: 5ms, itl: 2ms}}
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
	p := plan(t, `server: {target: builtin, sim: {preset: fixed, ttft: 5ms, itl: 20ms}}
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
	p := plan(t, `server: {target: builtin, sim: {preset: fixed, ttft: 1ms, itl: 2ms}}
defaults: {input_tokens: 16, output_tokens: 30}
rows:
  - {id: c, requests: 40, concurrency: 8, cancel: {fraction: 0.5, after: 20ms}}
`)
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary.Rows[0]
	if s.Requests.Canceled < 8 || s.Requests.Canceled > 32 || s.Errors.Total != 0 {
		t.Errorf("requests %+v errors %+v; want about half cancelled, none counted as the server's errors", s.Requests, s.Errors)
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

// TestDurationStopsOnTime: a closed-loop duration row stops dispatching at
// its duration even while every user waits on a slow response, and the
// requests in flight then get the grace period, no more.
func TestDurationStopsOnTime(t *testing.T) {
	p := plan(t, `server: {target: builtin, sim: {preset: fixed, ttft: 10ms, itl: 20ms}}
defaults: {input_tokens: 16, output_tokens: 100}
rows:
  - {id: d, duration: 500ms, grace: 300ms, concurrency: 2}
`)
	start := time.Now()
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Errorf("row took %v; want about 800ms (500ms, then 300ms grace), not the 2s of a request", el)
	}
	s := res.Summary.Rows[0]
	if s.Requests.Sent != 2 || s.Requests.Canceled != 2 || s.Errors.Total != 0 {
		t.Errorf("requests %+v errors %+v; want the 2 in flight cancelled, and no errors charged to the server", s.Requests, s.Errors)
	}
}

// TestOpenLoopGraceStartsAtTheDuration: in an open-loop row the grace
// period starts when the duration ends, not at the last dispatch.
func TestOpenLoopGraceStartsAtTheDuration(t *testing.T) {
	p := plan(t, `server: {target: builtin, sim: {preset: fixed, ttft: 10ms, itl: 10ms}}
defaults: {input_tokens: 16, output_tokens: 100}
rows:
  - {id: d, duration: 1500ms, grace: 1s, rate: {per_second: 1, arrival: constant}}
`)
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	// Requests go at 0s and 1s and take about 1s: the second ends near 2s,
	// inside the grace that runs to 2.5s.
	for _, r := range records(t, res.Dir, "d") {
		if r.Error != nil {
			t.Errorf("request %d: %+v; it could finish within the grace period", r.Seq, r.Error)
		}
	}
	if n := res.Summary.Rows[0].Requests.Sent; n != 2 {
		t.Errorf("%d requests; want the arrivals at 0s and 1s", n)
	}
}

// TestInterruptDuringDrain: Ctrl-C while a request-count row waits for its
// last requests still applies the grace period, marks the run interrupted,
// and leaves the next rows unrun; it never reads as a complete run.
func TestInterruptDuringDrain(t *testing.T) {
	p := plan(t, `server: {target: builtin, sim: {preset: fixed, ttft: 2s, itl: 1ms}}
defaults: {input_tokens: 16, output_tokens: 2, grace: 200ms}
rows:
  - {id: a, requests: 3, concurrency: 2}
  - {id: b, requests: 5, concurrency: 1}
`)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(2500*time.Millisecond, cancel) // the third request is in flight
	start := time.Now()
	res, err := Run(ctx, p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 3500*time.Millisecond {
		t.Errorf("run took %v; the interrupt's grace should end it near 2.7s", el)
	}
	if !res.Interrupted || res.Manifest.Status != rundir.StatusInterrupted || res.Summary.Rows[1].Status != metrics.RowNotRun {
		t.Errorf("interrupted %v, status %s, row b %s", res.Interrupted, res.Manifest.Status, res.Summary.Rows[1].Status)
	}
	if a := res.Summary.Rows[0]; a.Status != metrics.RowInterrupted || a.Requests.Canceled != 1 {
		t.Errorf("row a: %s %+v; want interrupted with its last request cancelled at the end of the grace", a.Status, a.Requests)
	}
}

// TestScheduleStartsAfterPriming: warm-prefix priming happens before the
// row's load, and the arrival schedule starts after it, not in a burst
// making up for the priming time.
func TestScheduleStartsAfterPriming(t *testing.T) {
	p := plan(t, `server: {target: builtin, sim: {preset: fixed, ttft: 200ms, itl: 1ms}}
defaults: {input_tokens: 64, output_tokens: 2}
rows:
  - {id: w, requests: 6, rate: {per_second: 20, arrival: constant}, prefix: {length: 32, distinct: 2, warm: true}}
`)
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	recs := records(t, res.Dir, "w")
	var primeEnd int64
	var starts []int64
	for _, r := range recs {
		if r.Seq < 2 {
			primeEnd = max(primeEnd, r.StartNS+r.EndNS)
			continue
		}
		starts = append(starts, r.StartNS)
	}
	if len(starts) != 6 || starts[0] < primeEnd {
		t.Fatalf("measured starts %v, priming ended at %d", starts, primeEnd)
	}
	for i := 1; i < len(starts); i++ {
		if gap := time.Duration(starts[i] - starts[i-1]); gap < 35*time.Millisecond {
			t.Errorf("requests %d and %d left %v apart; the schedule is one every 50ms", i-1, i, gap)
		}
	}
	if c := res.Summary.Rows[0].SelfCheck; c.ClientBound {
		t.Errorf("self-check flags the client: %+v", c)
	}
}

// TestCancellationsAreReproducible: which requests a row cancels depends on
// its seed and the requests' order, not on the order they finish in.
func TestCancellationsAreReproducible(t *testing.T) {
	run := func() []int64 {
		p := plan(t, `server: {target: builtin, sim: {preset: fixed, ttft: 1ms, itl: 2ms}}
defaults: {input_tokens: 16, output_tokens: 30}
rows:
  - {id: c, requests: 30, concurrency: 6, cancel: {fraction: 0.4, after: 15ms}}
`)
		res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, r := range records(t, res.Dir, "c") {
			if r.Canceled() {
				out = append(out, r.Seq)
			}
		}
		slices.Sort(out)
		return out
	}
	a, b := run(), run()
	if !slices.Equal(a, b) || len(a) == 0 {
		t.Errorf("cancelled %v, then %v; want the same requests both times", a, b)
	}
}

// TestBuiltinEngineGroundTruth runs rows against an engine preset with the
// ground-truth log on: the server's log lands in the run directory with one
// line per request, and its token counts agree with the client's records.
func TestBuiltinEngineGroundTruth(t *testing.T) {
	p := plan(t, `server: {target: builtin, sim: {preset: qwen3-0.6b-h200, ground_truth: true}}
defaults: {input_tokens: 64, output_tokens: 12, warmup: 1, body: {ignore_eos: true}}
rows:
  - {id: a, requests: 10, concurrency: 4}
`)
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(res.Dir.Path, rundir.SimGroundTruthFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	recs := records(t, res.Dir, "a")
	if len(lines) != len(recs) {
		t.Fatalf("%d ground-truth lines for %d records", len(lines), len(recs))
	}
	serverTokens, clientTokens := 0, 0
	for _, l := range lines {
		var g struct {
			OutputTokens int     `json:"output_tokens"`
			FlushNs      []int64 `json:"flush_ns"`
		}
		if err := json.Unmarshal([]byte(l), &g); err != nil {
			t.Fatal(err)
		}
		if len(g.FlushNs) != g.OutputTokens {
			t.Errorf("line has %d flush times for %d tokens", len(g.FlushNs), g.OutputTokens)
		}
		serverTokens += g.OutputTokens
	}
	for _, r := range recs {
		clientTokens += r.OutputTokens.Client
	}
	if serverTokens != clientTokens || serverTokens != 11*12 {
		t.Errorf("server flushed %d tokens, client counted %d, want %d", serverTokens, clientTokens, 11*12)
	}
}
