package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/search"
	"github.com/infermatrix/infermatrix/verdict"
)

// searchServer is a built-in server whose limit sits low and sharp: four
// sequences at a time, so from five users on a request is always waiting
// for a batch slot, and up to four none waits longer than a step. Requests
// are long (64 tokens) beside the gap between a user's requests, so at five
// users one waits three quarters of the time (0.74 on the virtual clock),
// and at four a scrape only rarely catches a request waiting for the next
// step: the rule's bound of 0.4 sits clear of both. The rule
// reads the server's queue (its gauge, scraped every 100 ms) rather than a
// latency, which the test machine's other work would blur. Checks that
// read that machine's own load are off: other tests share its cores. So is
// load: a closed loop's mean in flight falls short of its users by the
// client's own time between a user's requests, which a busy machine
// stretches (2.68 of 3 under the race detector beside three busy loops);
// and steady_state, which rows this short (24 requests, six rounds at four
// users) sit near by design.
const searchServer = `server: {target: builtin, sim: {preset: qwen3-0.6b-h200, engine: {max_num_seqs: 4, step_overhead: 5ms}}}
telemetry: {interval: 100ms}
validity: {ignore: [client_stall, bursts, simulator, client_cpu, stamp_error, load, steady_state]}
defaults: {input_tokens: 64, output_tokens: 64, requests: 24, warmup: 4, body: {ignore_eos: true}}
`

// TestSearchAgreesWithSweep: a search brackets the limit within its
// resolution, and a sweep over every load of the same range, judged by the
// same rule, finds the same limit. Each probe is a row of the run: in the
// summary, the manifest on disk and the plan the record judges.
func TestSearchAgreesWithSweep(t *testing.T) {
	p := plan(t, searchServer+`rows:
  - {id: sat, search: {concurrency: {min: 3, max: 6}}}
  - {id: grid, sweep: {concurrency: [3, 4, 5, 6]}}
acceptance:
  - {name: slo, rows: [sat, grid], sweep: operating_point, expect: server.num_requests_waiting.mean < 0.4}
`)
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	d := verdict.Judge(p, res.Summary)

	var probes []search.Probe
	var strategy search.Plan
	var why []string
	for _, r := range p.Rows {
		if r.Search != nil {
			t.Fatalf("search row %s left in the plan", r.ID)
		}
		if r.Probe == nil {
			continue
		}
		if r.Base != "sat" || r.ID != "sat/c="+search.FormatValue(r.SweepPoint["concurrency"]) || res.Summary.Row(r.ID) == nil {
			t.Errorf("probe %s (base %s) is not a row of the run", r.ID, r.Base)
		}
		strategy = r.Probe.Plan.Strategy()
		out := verdict.OutcomeOf(d.Row(r.ID))
		probes = append(probes, search.Probe{Value: float64(r.Load.Concurrency), Passed: out.Passed})
		why = append(why, r.ID+": "+out.Why)
	}
	got := search.Replay(strategy, probes)
	if got.Status != search.Bracketed {
		t.Fatalf("search: %+v\n%s", got, strings.Join(why, "\n"))
	}

	// The sweep's limit: the highest load up to which every point passes.
	limit := 0.0
	for _, c := range []int{3, 4, 5, 6} {
		id := "grid/c=" + search.FormatValue(float64(c))
		rv := d.Row(id)
		why = append(why, id+": "+verdict.OutcomeOf(rv).Why)
		if rv == nil || rv.Verdict != verdict.Pass {
			break
		}
		limit = float64(c)
	}
	lo, hi := *got.Passing, *got.Failing
	if limit == 0 || lo > limit || hi <= limit {
		var ttft []string
		for _, rs := range res.Summary.Rows {
			ttft = append(ttft, fmt.Sprintf("%s %+v", rs.ID, rs.Server))
		}
		t.Errorf("search brackets [%g, %g]; the sweep's limit is %g\n%s\nserver: %s", lo, hi, limit, strings.Join(why, "\n"), strings.Join(ttft, ", "))
	}
	if hi-lo > 1 {
		t.Errorf("bracket [%g, %g] is wider than one user", lo, hi)
	}

	var man rundir.Manifest
	b, err := os.ReadFile(filepath.Join(res.Dir.Path, rundir.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &man); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range man.Rows {
		if r.Probe != nil && r.Probe.Search == "sat" {
			n++
		}
		if r.Search != nil {
			t.Errorf("manifest keeps search row %s", r.ID)
		}
	}
	if n != len(probes) || n > search.WorstCase(strategy) {
		t.Errorf("manifest lists %d probes; the search ran %d", n, len(probes))
	}
}

// TestInvalidProbeDoesNotPass: a probe whose figures cannot be trusted
// (too few samples for the p95 its rule reads) counts as not passing, the
// search says the minimum already fails, and why.
func TestInvalidProbeDoesNotPass(t *testing.T) {
	p := plan(t, `server: {target: builtin, sim: {preset: fixed, ttft: 2ms, itl: 1ms}}
validity: {ignore: [client_stall, bursts, simulator, client_cpu, stamp_error, load]}
defaults: {input_tokens: 16, output_tokens: 4, requests: 10, body: {ignore_eos: true}}
rows:
  - {id: sat, search: {concurrency: {min: 1, max: 4}}}
acceptance:
  - {name: slo, rows: [sat], expect: ttft.p95 < 1000}
`)
	var log strings.Builder
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run"), Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Summary.Rows) != 1 || res.Summary.Rows[0].ID != "sat/c=1" || res.Summary.Rows[0].Status != metrics.RowComplete {
		t.Fatalf("rows %+v; want the one probe sat/c=1", res.Summary.Rows)
	}
	d := verdict.Judge(p, res.Summary)
	out := verdict.OutcomeOf(d.Row("sat/c=1"))
	if out.Passed || !out.Invalid || !strings.HasPrefix(out.Why, "invalid (") || !strings.Contains(out.Why, "samples: too few samples for ttft.p95") {
		t.Errorf("outcome %+v; want invalid for too few samples", out)
	}
	if d.Verdict != verdict.Inconclusive {
		t.Errorf("run verdict %s; want inconclusive", d.Verdict)
	}
	if !strings.Contains(log.String(), "probe 1, sat/c=1: invalid (") || !strings.Contains(log.String(), "search sat: min_fails") {
		t.Errorf("log does not say the probe was invalid:\n%s", log.String())
	}
}
