package runner

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/validity"
)

// runVirtual runs p on virtual time into a fresh directory.
func runVirtual(t *testing.T, p *schema.Plan) *Result {
	t.Helper()
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run"), Virtual: true})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The same experiment on virtual time twice gives the same bytes: every
// summary and every record, whatever the host did meanwhile.
func TestVirtualRunIsDeterministic(t *testing.T) {
	src := `server: {target: builtin, sim: {preset: llama-3.1-8b-h100, seed: 7}}
defaults: {input_tokens: 300, output_tokens: 40, warmup: 2}
rows:
  - {id: users, concurrency: 6, requests: 40}
  - {id: poisson, rate: {per_second: 20, arrival: poisson, max_concurrency: 4}, requests: 60, input_tokens: {mean: 400, stddev: 100}}
  - {id: timed, concurrency: 4, duration: 2s, cancel: {fraction: 0.2, after: 100ms}}
`
	a, b := runVirtual(t, plan(t, src)), runVirtual(t, plan(t, src))
	files := []string{rundir.SummaryFile}
	for _, id := range []string{"users", "poisson", "timed"} {
		files = append(files, rundir.RowFile(id, rundir.SummaryFile), rundir.RowFile(id, rundir.RecordsFile))
	}
	for _, f := range files {
		x, err := os.ReadFile(filepath.Join(a.Dir.Path, f))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b.Dir.Path, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two virtual runs of the same experiment", f)
		}
	}
	if !a.Manifest.Virtual || !a.Summary.Virtual {
		t.Errorf("manifest virtual %v, summary virtual %v; want both to say so", a.Manifest.Virtual, a.Summary.Virtual)
	}
	recs := records(t, a.Dir, "poisson")
	queued := 0
	for _, r := range recs {
		if !r.Virtual {
			t.Fatalf("record %s does not say it ran on virtual time", r.ID)
		}
		if r.Error != nil || r.FirstTokenNS <= 0 || len(r.Events) != 40 || r.OutputTokens.Server == nil || *r.OutputTokens.Server != 40 {
			t.Fatalf("record %+v: want 40 streamed tokens, each stamped, and the server's usage", r)
		}
		if r.QueueNS > 0 {
			queued++
		}
	}
	if queued == 0 {
		t.Errorf("no request of a 20 req/s row capped at 4 in flight waited for a slot")
	}
	// Stamps are the server's release times: the gaps between events are
	// engine steps, never zero, and TTFT is at least the front end's.
	r := recs[len(recs)-1]
	for i := 1; i < len(r.Events); i++ {
		if r.Events[i] <= r.Events[i-1] {
			t.Fatalf("event %d at %d ns, not after event %d at %d ns", i, r.Events[i], i-1, r.Events[i-1])
		}
	}
}

// A row's duration, the grace period, timeouts and cancellations all run on
// the virtual clock, and requests they end are recorded as in real time.
func TestVirtualRowStopsAndCuts(t *testing.T) {
	p := plan(t, `server: {target: builtin, sim: {preset: llama-3.1-8b-h100}}
defaults: {input_tokens: 100}
rows:
  - {id: timeouts, concurrency: 2, requests: 4, output_tokens: 400, timeout: 300ms}
  - {id: graced, concurrency: 3, duration: 1s, output_tokens: 1000, grace: 200ms}
  - {id: cancels, concurrency: 4, requests: 40, output_tokens: 60, cancel: {fraction: 0.5, after: 50ms}}
`)
	res := runVirtual(t, p)
	for _, r := range records(t, res.Dir, "timeouts") {
		if r.Error == nil || r.Error.Class != metrics.ErrTimeout {
			t.Fatalf("record %d: error %+v; want a timeout (400 tokens take over a second)", r.Seq, r.Error)
		}
		if r.EndNS != (300 * time.Millisecond).Nanoseconds() {
			t.Errorf("record %d ended at %v; want exactly at the 300ms timeout", r.Seq, time.Duration(r.EndNS))
		}
		if len(r.Events) == 0 {
			t.Errorf("record %d kept none of the tokens that came before its timeout", r.Seq)
		}
	}
	graced := records(t, res.Dir, "graced")
	if len(graced) != 3 {
		t.Fatalf("%d records; want the 3 users' first requests (each takes longer than the row)", len(graced))
	}
	for _, r := range graced {
		if r.Error == nil || r.Error.Class != metrics.ErrCanceled || !strings.Contains(r.Error.Message, "grace") {
			t.Fatalf("record %d: error %+v; want cancelled at the end of the grace period", r.Seq, r.Error)
		}
		// The duration opens with the first measured request, so its
		// end and the grace after it are 1.2 s from that request's start.
		if end := time.Duration(r.StartNS + r.EndNS); end < 1200*time.Millisecond || end > 1210*time.Millisecond {
			t.Errorf("record %d cut %v into the row; want 1s + 200ms grace", r.Seq, end)
		}
	}
	s := res.Summary.Rows[2]
	if s.Requests.Canceled < 8 || s.Requests.Canceled > 32 || s.Errors.Total != 0 {
		t.Errorf("requests %+v errors %+v; want about half cancelled, none counted as the server's errors", s.Requests, s.Errors)
	}
	for _, r := range records(t, res.Dir, "cancels") {
		if r.Error != nil && r.EndNS != (50*time.Millisecond).Nanoseconds() {
			t.Errorf("request %d cancelled after %v; want at 50ms", r.Seq, time.Duration(r.EndNS))
		}
	}
}

// What virtual time cannot simulate is refused before anything runs, every
// reason at once.
func TestVirtualRefusesWhatItCannotSimulate(t *testing.T) {
	p := plan(t, `server: {target: builtin, sim: {preset: fixed, faults: [{kind: stall, probability: 0.1, for: 1s}]}}
defaults: {input_tokens: 100, output_tokens: 10}
rows:
  - {id: ok, concurrency: 2, requests: 4}
`)
	dir := filepath.Join(t.TempDir(), "run")
	_, err := Run(context.Background(), p, Options{Out: dir, Virtual: true})
	if !errors.Is(err, ErrNotVirtual) {
		t.Fatalf("error %v; want ErrNotVirtual", err)
	}
	for _, want := range []string{"preset fixed", "stall faults"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a refused virtual run left a run directory (%v)", err)
	}
	p = plan(t, `server: {urls: [http://127.0.0.1:9/v1], model: m}
rows: [{id: a, concurrency: 1, requests: 1, input_tokens: 10, output_tokens: 10}]
`)
	if _, err := Run(context.Background(), p, Options{Out: dir, Virtual: true}); !errors.Is(err, ErrNotVirtual) || !strings.Contains(err.Error(), "not the built-in server") {
		t.Errorf("error %v; want a real server refused on virtual time", err)
	}
}

// publishedQwen is the published vLLM 0.11 table of Qwen3-0.6B on 8×H200
// (ISL 1000, OSL 500) that experiments/qwen3-0.6b-sweep.yaml reruns:
// output tokens/s, and mean TTFT where the table gives the cell (else the
// range it gives, 250-420 ms). sim/engine's calibration test holds the same
// table for the engine alone; this is the whole tool's path.
var publishedQwen = map[int]struct{ throughput, ttft float64 }{
	10: {3045, 250}, 50: {12890, 0}, 100: {22521, 0}, 200: {35999, 420},
}

// The Qwen sweep on virtual time lands within the tolerances of the
// published table: output and per-user tokens/s ±15%, mean TTFT ±25%, and
// at c=100 TTFT p99/p50 and per-request TPOT p99/p50 within ±30%. Under
// the race detector, which slows the simulation several times over, only
// c=100 runs.
func TestVirtualQwenSweepMatchesPublished(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the Qwen sweep's rows on virtual time (seconds of CPU)")
	}
	p, err := schema.Load("../experiments/qwen3-0.6b-sweep.yaml", schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	keep := func(r schema.PlannedRow) bool {
		users := r.Load.Concurrency
		if _, ok := publishedQwen[users]; !ok {
			return true
		}
		return raceEnabled && users != 100
	}
	p.Rows = slices.DeleteFunc(p.Rows, keep)
	res := runVirtual(t, p)
	check := func(what string, got, want, tol float64) {
		t.Helper()
		dev := got/want - 1
		t.Logf("%-30s virtual %9.4g  published %9.4g  %+6.1f%%", what, got, want, 100*dev)
		if math.Abs(dev) > tol {
			t.Errorf("%s: %.4g against published %.4g: %+.1f%%, beyond ±%.0f%%", what, got, want, 100*dev, 100*tol)
		}
	}
	for _, s := range res.Summary.Rows {
		row := res.Manifest.Rows[slices.IndexFunc(res.Manifest.Rows, func(r schema.PlannedRow) bool { return r.ID == s.ID })]
		users := row.Load.Concurrency
		pub := publishedQwen[users]
		if v := validity.Row(validity.Input{Row: &row, Summary: &s, Config: p.Validity}); !v.Valid {
			t.Errorf("%s is not valid: %+v", s.ID, v.Reasons)
		}
		check(s.ID+" output tok/s", s.Throughput.OutputTokensPerS, pub.throughput, 0.15)
		// Per-user speed as the table's client sees it: output tokens
		// over each request's end-to-end time, averaged.
		var sum float64
		var n int
		for _, r := range records(t, res.Dir, s.ID) {
			if !r.Warmup && r.Error == nil {
				sum += float64(r.OutputTokens.Count()) / time.Duration(r.EndNS).Seconds()
				n++
			}
		}
		check(s.ID+" per-user tok/s", sum/float64(n), pub.throughput/float64(users), 0.15)
		ttft := s.Metrics.TTFT.Mean
		if pub.ttft > 0 {
			check(s.ID+" mean TTFT ms", ttft, pub.ttft, 0.25)
		} else if ttft < 0.75*250 || ttft > 1.25*420 {
			t.Errorf("%s mean TTFT %.0f ms is beyond ±25%% of the published range 250-420 ms", s.ID, ttft)
		}
		if users == 100 {
			check(s.ID+" TTFT p99/p50", s.Metrics.TTFT.P99/s.Metrics.TTFT.P50, 2.8, 0.30)
			check(s.ID+" TPOT p99/p50", s.Metrics.TPOT.P99/s.Metrics.TPOT.P50, 1.66, 0.30)
		}
	}
}

// BenchmarkVirtualQwenSweep runs experiments/qwen3-0.6b-sweep.yaml (five
// rows of 45 s each, c=10 to 500) on virtual time, and reports how many
// seconds of the server's time and how many requests it simulates per
// second of CPU. The target: the sweep in well under a minute.
//
//	go test -run '^$' -bench VirtualQwenSweep -benchtime 1x ./runner/
func BenchmarkVirtualQwenSweep(b *testing.B) {
	p, err := schema.Load("../experiments/qwen3-0.6b-sweep.yaml", schema.Options{})
	if err != nil {
		b.Fatal(err)
	}
	var simulated time.Duration
	var requests int
	start := time.Now()
	for b.Loop() {
		res, err := Run(context.Background(), p, Options{Out: filepath.Join(b.TempDir(), "run"), Virtual: true})
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range res.Summary.Rows {
			requests += s.Requests.Completed
			simulated += time.Duration(s.WindowS * float64(time.Second))
		}
	}
	wall := time.Since(start).Seconds()
	b.ReportMetric(wall/float64(b.N), "s/sweep")
	b.ReportMetric(simulated.Seconds()/wall, "window-s/s")
	b.ReportMetric(float64(requests)/wall, "requests/s")
}

// Conversations, ramps and the prefill cap run on virtual time as in real
// time: later turns find their history in the prefix cache, a ramp's users
// join step by step, and requests beyond the prefill cap queue for it.
func TestVirtualConversationsRampsAndPrefill(t *testing.T) {
	p := plan(t, `server: {target: builtin, sim: {preset: llama-3.1-8b-h100}}
defaults: {input_tokens: 512, output_tokens: 32}
rows:
  - {id: chat, concurrency: 4, requests: 24, conversation: {turns: 3, user_tokens: 64, think_time: 500ms}}
  - {id: ramp, ramp: {concurrency: {from: 2, to: 6, step: 2}, step_duration: 2s}}
  - {id: gated, concurrency: 16, requests: 48, prefill_concurrency: 2}
  - {id: embed, api: embeddings, batch: 4, concurrency: 2, requests: 10}
`)
	res := runVirtual(t, p)
	byTurn := map[int][]metrics.Record{}
	for _, r := range records(t, res.Dir, "chat") {
		if r.Turn == nil || r.Error != nil {
			t.Fatalf("record %+v: want a successful turn", r)
		}
		byTurn[*r.Turn] = append(byTurn[*r.Turn], r)
	}
	for turn := 1; turn <= 2; turn++ {
		for _, r := range byTurn[turn] {
			if r.CachedTokens == nil || *r.CachedTokens < 512 {
				t.Fatalf("turn %d cached %v tokens; want the history (over 512) from the cache", turn, r.CachedTokens)
			}
			// think_time separates a turn from the reply before it.
			prev := slices.IndexFunc(byTurn[turn-1], func(o metrics.Record) bool { return o.ConversationID == r.ConversationID })
			if prev < 0 {
				t.Fatalf("turn %d of %s has no turn %d", turn, r.ConversationID, turn-1)
			}
			o := byTurn[turn-1][prev]
			if gap := r.StartNS - (o.StartNS + o.EndNS); gap != (500 * time.Millisecond).Nanoseconds() {
				t.Errorf("turn %d of %s sent %v after the reply; want think_time 500ms", turn, r.ConversationID, time.Duration(gap))
			}
		}
	}
	steps := map[int]int{}
	for _, r := range records(t, res.Dir, "ramp") {
		steps[r.Step]++
	}
	if steps[1] == 0 || steps[2] <= steps[1] || steps[3] <= steps[2] {
		t.Errorf("requests per ramp step %v; want each step busier than the last", steps)
	}
	queued := 0
	for _, r := range records(t, res.Dir, "gated") {
		if r.QueueNS > 0 {
			queued++
		}
	}
	if queued == 0 {
		t.Errorf("no request of 16 users behind a prefill cap of 2 waited for it")
	}
	for _, r := range records(t, res.Dir, "embed") {
		if r.Error != nil || r.Inputs != 4 || r.InputTokens.Server == nil || *r.InputTokens.Server < 4*512 || r.EndNS <= 0 {
			t.Fatalf("embeddings record %+v: want 4 inputs answered with their tokens counted", r)
		}
	}
}
