package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
)

// TestTelemetryFromTheSimulator runs two rows against the simulator on its
// own port, as a user points infermatrix at a server: each row scrapes the
// server's /metrics, keeps the raw samples in rows/<id>/telemetry.jsonl on
// the records' clock, and its summary carries server and GPU figures. The
// server's token counters agree with the records. The warm-prefix row finds
// its prefixes in the server's cache; its cold twin does not.
func TestTelemetryFromTheSimulator(t *testing.T) {
	inst := startPreset(t, "llama-3.1-8b-h100")
	dir := t.TempDir()
	p := planIn(t, dir, `server: {urls: [`+inst.BaseURL+`]}
telemetry: {interval: 200ms}
defaults: {requests: 24, concurrency: 4, input_tokens: 1200, output_tokens: 24, warmup: 2, body: {ignore_eos: true}}
rows:
  - {id: cold, prefix: {length: 1024, distinct: 24}}
  - {id: warm, prefix: {length: 1024, distinct: 4, warm: true}}
`, nil)
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(dir, "run")})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*metrics.RowSummary{}
	for i := range res.Summary.Rows {
		rs := &res.Summary.Rows[i]
		byID[rs.ID] = rs
		s, g := rs.Server, rs.GPU
		if s == nil || g == nil {
			t.Fatalf("row %s: server %v, gpu %v; want both", rs.ID, s, g)
		}
		if s.Mapping != "infermatrix-sim" || s.Scrapes == 0 || s.Failed != 0 {
			t.Errorf("row %s: mapping %q, %d scrapes in the window, %d failed; want infermatrix-sim (vLLM's names), some, none", rs.ID, s.Mapping, s.Scrapes, s.Failed)
		}
		if s.NumRequestsRunning == nil || s.NumRequestsRunning.Max < 1 || s.KVCacheUsage == nil || s.KVCacheUsage.Max <= 0 {
			t.Errorf("row %s: running %+v, KV %+v; want the load seen", rs.ID, s.NumRequestsRunning, s.KVCacheUsage)
		}
		if s.TTFT == nil || s.TTFT.Count < 1 || s.TTFTGap == nil {
			t.Errorf("row %s: server TTFT %+v, gap %+v; want the engine's histogram and the gap", rs.ID, s.TTFT, s.TTFTGap)
		}
		if s.Tokens == nil || s.Tokens.Mismatch || !s.Tokens.Prompt.Compared || !s.Tokens.Generation.Compared {
			t.Errorf("row %s: token check %+v; want compared and agreeing", rs.ID, s.Tokens)
		} else if s.Tokens.Generation.Server != s.Tokens.Generation.Records || s.Tokens.Generation.Records == 0 {
			t.Errorf("row %s: generation tokens server %v, records %v; want equal", rs.ID, s.Tokens.Generation.Server, s.Tokens.Generation.Records)
		}
		if g.GPUs != 1 || g.Utilization == nil || g.Utilization.Max <= 0 || g.PowerW == nil || g.MemoryUsedGB == nil {
			t.Errorf("row %s: gpu %+v; want one simulated GPU, busy", rs.ID, g)
		}
		if len(rs.Telemetry) < 2 {
			t.Errorf("row %s: %d telemetry points; want the row over time", rs.ID, len(rs.Telemetry))
		}
		checkTelemetryFile(t, res.Dir, rs)
	}
	cold, warm := byID["cold"].Server, byID["warm"].Server
	if cold.PrefixCacheHitRate == nil || warm.PrefixCacheHitRate == nil {
		t.Fatalf("hit rates cold %v warm %v; want both", cold.PrefixCacheHitRate, warm.PrefixCacheHitRate)
	}
	t.Logf("prefix-cache hit rate: cold %.3f, warm %.3f", *cold.PrefixCacheHitRate, *warm.PrefixCacheHitRate)
	// The cold row takes its 24 prefixes in turn over 26 requests: only
	// the last two (seq 24, 25) meet a prefix the first two used. The
	// warm row's 4, cached before it starts, are always found.
	if *cold.PrefixCacheHitRate > 0.15 || *warm.PrefixCacheHitRate < 0.6 {
		t.Errorf("hit rate cold %.3f, warm %.3f; want the cold row's prefixes new and the warm row's found",
			*cold.PrefixCacheHitRate, *warm.PrefixCacheHitRate)
	}
	// The server's counters and its per-request usage tell the same story.
	for _, id := range []string{"cold", "warm"} {
		rs := byID[id]
		if d := *rs.Server.PrefixCacheHitRate - rs.Cache.HitRatio; d < -0.1 || d > 0.1 {
			t.Errorf("row %s: server hit rate %.3f, usage's %.3f; want them close", id, *rs.Server.PrefixCacheHitRate, rs.Cache.HitRatio)
		}
	}
	man, err := res.Dir.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if d := man.Server.Discovered; len(d.GPUModels) != 1 || !strings.Contains(d.GPUModels[0], "H100") || d.Properties["max_model_len"] == "" {
		t.Errorf("discovered GPUs %v, properties %v; want the simulated H100 and the context limit", d.GPUModels, d.Properties)
	}
}

// checkTelemetryFile: the row's raw samples are on disk, one line per
// scrape, on the records' clock: the first before the first request, the
// last after the last one ended, and the phases in the row's order.
func checkTelemetryFile(t *testing.T, dir *rundir.Dir, rs *metrics.RowSummary) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir.Path, rundir.RowFile(rs.ID, rundir.TelemetryFile)))
	if err != nil {
		t.Fatalf("row %s: %v", rs.ID, err)
	}
	defer f.Close()
	var first, last struct {
		TNS   int64  `json:"t_ns"`
		Phase string `json:"phase"`
	}
	phases := map[string]bool{}
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var line struct {
			TNS   int64  `json:"t_ns"`
			Phase string `json:"phase"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("row %s line %d: %v", rs.ID, n+1, err)
		}
		if line.Error != "" {
			t.Errorf("row %s line %d: scrape failed: %s", rs.ID, n+1, line.Error)
		}
		if n == 0 {
			first.TNS, first.Phase = line.TNS, line.Phase
		}
		last.TNS, last.Phase = line.TNS, line.Phase
		phases[line.Phase] = true
		n++
	}
	var firstStart, lastEnd int64 = 1 << 62, 0
	if err := dir.ReadRecords(rs.ID, func(r *metrics.Record) error {
		firstStart = min(firstStart, r.StartNS)
		lastEnd = max(lastEnd, r.StartNS+r.EndNS)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n < 3 || first.TNS > firstStart || last.TNS < lastEnd {
		t.Errorf("row %s: %d samples from %d to %d ns; want the first before the first request (%d) and the last after the last ended (%d)",
			rs.ID, n, first.TNS, last.TNS, firstStart, lastEnd)
	}
	if first.Phase != metrics.PhaseBetween || last.Phase != metrics.PhaseBetween || !phases[metrics.PhaseLoad] {
		t.Errorf("row %s: phases %v, first %q, last %q; want between … load … between", rs.ID, phases, first.Phase, last.Phase)
	}
}

// TestTelemetryAbsentEndpoint: a server without a metrics endpoint is a
// note in the record, never an error of the run; the row has no server
// figures rather than zeros.
func TestTelemetryAbsentEndpoint(t *testing.T) {
	inst := startPreset(t, "tiny-fast")
	// A front that serves the API and answers /metrics with 404, as a
	// server started without --metrics does.
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			http.NotFound(w, r)
			return
		}
		inst.Server.ServeHTTP(w, r)
	}))
	defer front.Close()
	dir := t.TempDir()
	p := planIn(t, dir, `server: {urls: [`+front.URL+`/v1]}
telemetry: {interval: 100ms}
defaults: {requests: 6, concurrency: 2, input_tokens: 64, output_tokens: 4}
rows: [{id: a}]
`, nil)
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(dir, "run")})
	if err != nil {
		t.Fatalf("run: %v; a missing metrics endpoint must not fail it", err)
	}
	rs := res.Summary.Rows[0]
	if rs.Status != metrics.RowComplete || rs.Requests.Completed != 6 {
		t.Fatalf("row %+v; want complete", rs.Status)
	}
	s := rs.Server
	if s == nil || s.Failed == 0 || len(s.Notes) == 0 || !strings.Contains(strings.Join(s.Notes, " "), "404") {
		t.Fatalf("server telemetry %+v; want failed scrapes noted with the status", s)
	}
	if s.KVCacheUsage != nil || s.NumRequestsRunning != nil || s.Tokens != nil && s.Tokens.Mismatch {
		t.Errorf("server telemetry %+v; want no figures and no mismatch from a failed endpoint", s)
	}
	if rs.GPU != nil {
		t.Errorf("gpu %+v; want none", rs.GPU)
	}
}
