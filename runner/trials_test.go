package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
)

// TestRepeatTrials runs a repeated row and a plain one: each trial has its
// own records and summary under rows/<id>/trial-<k>/, with prompts of its
// own, the row's summary pools them with an interval per headline figure,
// and the plain row keeps today's layout.
func TestRepeatTrials(t *testing.T) {
	p := plan(t, `server: {target: builtin, sim: {preset: fixed, ttft: 2ms, itl: 1ms}}
defaults: {input_tokens: 32, output_tokens: 8, warmup: 2, concurrency: 2, body: {ignore_eos: true}}
rows:
  - {id: rep, requests: 10, repeat: 3}
  - {id: once, requests: 5}
`)
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	rep, once := res.Summary.Row("rep"), res.Summary.Row("once")
	if rep == nil || once == nil {
		t.Fatalf("rows %+v", res.Summary.Rows)
	}
	if len(rep.Trials) != 3 || rep.Intervals == nil || rep.Intervals.Trials != 3 {
		t.Fatalf("rep: %d trials, intervals %+v; want 3 trials with intervals", len(rep.Trials), rep.Intervals)
	}
	if rep.Requests.Sent != 30 || rep.Requests.Warmup != 6 || rep.Metrics.TPOT.Count != 30 {
		t.Errorf("rep pooled: sent %d, warmup %d, tpot count %d; want 30, 6, 30", rep.Requests.Sent, rep.Requests.Warmup, rep.Metrics.TPOT.Count)
	}
	var windows float64
	for k, tr := range rep.Trials {
		if tr.Trial != k+1 || tr.Requests.Sent != 10 {
			t.Errorf("trial %d: trial %d, sent %d", k+1, tr.Trial, tr.Requests.Sent)
		}
		windows += tr.WindowS
	}
	if d := rep.WindowS - windows; d > 1e-6 || d < -1e-6 {
		t.Errorf("pooled window %v s; want the sum of the trials' %v s", rep.WindowS, windows)
	}
	if len(once.Trials) != 0 || once.Intervals != nil {
		t.Errorf("once: trials %d, intervals %v; want neither", len(once.Trials), once.Intervals)
	}
	if _, err := os.Stat(res.Dir.RecordsPath("once")); err != nil {
		t.Errorf("a row without repeat keeps rows/<id>/requests.jsonl: %v", err)
	}
	if _, err := os.Stat(res.Dir.RecordsPath("rep")); !os.IsNotExist(err) {
		t.Errorf("a repeated row has no records of its own: %v", err)
	}
	ids := map[string]bool{}
	for k := 1; k <= 3; k++ {
		part := rundir.TrialRow("rep", k)
		b, err := os.ReadFile(filepath.Join(res.Dir.Path, rundir.RowFile(part, rundir.SummaryFile)))
		if err != nil {
			t.Fatalf("trial %d summary: %v", k, err)
		}
		var ts metrics.RowSummary
		if err := json.Unmarshal(b, &ts); err != nil || ts.Trial != k {
			t.Errorf("trial %d summary.json: trial %d, %v", k, ts.Trial, err)
		}
		for _, r := range records(t, res.Dir, part) {
			if r.Trial != k {
				t.Errorf("trial %d: record %s says trial %d", k, r.ID, r.Trial)
			}
			if ids[r.ID] {
				t.Errorf("record id %s appears twice", r.ID)
			}
			ids[r.ID] = true
		}
	}
	n := 0
	err = res.Dir.ReadRecords("rep", func(r *metrics.Record) error { n++; return nil })
	if err != nil || n != 36 {
		t.Errorf("ReadRecords(rep) read %d records (%v); want all 3 trials' 36", n, err)
	}
}

// TestRepeatIntervalKnownTPOT: five trials against the built-in server's
// fixed preset, whose every token gap is 4 ms, give a mean-TPOT interval
// that contains 4 ms, to within the client's own stamping error on a busy
// machine (0.1 ms, 2.5%: the client stamps a token when it reads it, a few
// tens of microseconds after the server wrote it, and a busy machine
// delays the last token of a request more often than the first).
// docs/statistics.md ("Repeats") gives the coverage measured over many
// runs.
func TestRepeatIntervalKnownTPOT(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 5 trials of 40 requests in real time (about 4 s)")
	}
	const itl, tol = 4.0, 0.1
	p := plan(t, `server: {target: builtin, sim: {preset: fixed, ttft: 5ms, itl: 4ms}}
defaults: {input_tokens: 32, output_tokens: 16, warmup: 4, concurrency: 4, body: {ignore_eos: true}}
rows:
  - {id: rep, requests: 40, repeat: 5}
`)
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	rs := res.Summary.Row("rep")
	b := rs.Intervals.TPOT.Mean
	if b.N != 5 || b.Lower > b.Upper {
		t.Fatalf("tpot.mean interval %+v; want one over 5 trials", b)
	}
	if b.Lower-tol > itl || b.Upper+tol < itl {
		t.Errorf("tpot.mean interval [%.4f, %.4f] ms (± %.1f ms) misses the server's known TPOT %.1f ms", b.Lower, b.Upper, tol, itl)
	}
	env := metrics.NewRowEnv(rs)
	if env.Upper.TPOT.Mean != b.Upper || env.Lower.TPOT.Mean != b.Lower {
		t.Errorf("rules read upper.tpot.mean %v, lower.tpot.mean %v; want the interval's %v, %v", env.Upper.TPOT.Mean, env.Lower.TPOT.Mean, b.Upper, b.Lower)
	}
}
