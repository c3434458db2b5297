// Package recordfixture holds the judged run that the tests of the
// decision record's renderers share: reports (decision.md, report.html)
// and workbook (results.xlsx) read the same plan, manifest, summary,
// decision, analysis and requests, so that their tests show the same
// words in every format. It is for tests only; nothing else imports it.
package recordfixture

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/internal/buildinfo"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

// Experiment is the plan New parses: a chat row and a concurrency sweep.
const Experiment = `apiVersion: infermatrix/v1
name: xlsx-fixture
description: A chat row and a concurrency sweep.
server:
  urls: [http://127.0.0.1:8000/v1]
  model: meta-llama/Llama-3.1-8B-Instruct
  headers: {X-Team: sk-header-secret}
  engine: {name: vllm, version: "0.11.0", flags: {max-num-seqs: 64, api-key: sk-flag-secret}}
  hardware: {gpu: H100-SXM, count: 1, driver: "580.95", cuda: "12.8"}
defaults: {requests: 5, input_tokens: 16, output_tokens: 8}
slo: {ttft_ms: 100}
rows:
  - {id: chat, concurrency: 1}
  - id: sat
    sweep: {concurrency: [1, 4, 8]}
acceptance:
  - name: latency
    rows: [chat, sat]
    expect: ttft.p95 < 100 && tpot.p95 < 40
report: {formats: [xlsx]}
# Five requests a row: the workbook's layout is under test, not the checks.
validity: {ignore: [samples, errors, steady_state, load]}
`

// row builds a row summary whose latencies are the given values.
func row(id, base string, ttft, tpot float64, outTokS float64) metrics.RowSummary {
	rs := metrics.RowSummary{ID: id, Base: base, Status: metrics.RowComplete}
	rs.Metrics.TTFT = metrics.NewDist([]float64{ttft * 0.8, ttft, ttft * 1.1}, nil)
	rs.Metrics.TPOT = metrics.NewDist([]float64{tpot * 0.9, tpot, tpot * 1.05}, nil)
	rs.Metrics.ITL = metrics.NewDist([]float64{tpot, tpot, tpot}, nil)
	rs.Metrics.E2E = metrics.NewDist([]float64{ttft + 7*tpot}, nil)
	rs.Requests = metrics.Requests{Sent: 5, Completed: 5}
	rs.Throughput = metrics.Throughput{RequestsPerS: 2.5, OutputTokensPerS: outTokS, OutputTokensPerSU: 1000 / tpot}
	rs.Goodput = metrics.Goodput{Good: 4, Ratio: 0.8, RequestsPerS: 2}
	return rs
}

// RecordsPerRow is how many requests each fixture row has.
var RecordsPerRow = map[string]int{"chat": 5, "sat/c=1": 2, "sat/c=4": 2, "sat/c=8": 3}

// Run is a judged run as the renderers read it.
type Run struct {
	Plan     *schema.Plan
	Manifest *rundir.Manifest
	Summary  *metrics.Summary
	Decision *verdict.Decision
	Analysis *analysis.Analysis
	// Records streams RecordsPerRow requests of each row; the last of
	// sat/c=8 failed with a 503.
	Records func(rowID string, fn func(*metrics.Record) error) error
}

// New builds the run: chat and sat/c=1 pass, sat/c=4 is near the SLO,
// sat/c=8 fails with an error; the analysis has a sweep and a prediction.
func New(t testing.TB) *Run {
	t.Helper()
	plan, err := schema.Parse("xlsx.yaml", []byte(Experiment), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fail := row("sat/c=8", "sat", 450, 55, 1800)
	fail.Requests = metrics.Requests{Sent: 5, Completed: 4, Failed: 1}
	fail.Errors = metrics.Errors{Total: 1, Ratio: 0.2, ByClass: map[string]int{metrics.ErrHTTP: 1}}
	fail.SelfCheck.ClientBound = true
	sum := &metrics.Summary{Format: metrics.SummaryFormat, Experiment: "xlsx-fixture", SLO: plan.SLO, Semantics: metrics.SemInfermatrix,
		Rows: []metrics.RowSummary{
			row("chat", "chat", 40, 12, 80),
			row("sat/c=1", "sat", 38, 11, 90),
			row("sat/c=4", "sat", 60, 14, 1234.5),
			fail,
		}}
	started := time.Date(2026, 3, 1, 12, 0, 0, 123e6, time.UTC)
	ended := started.Add(95 * time.Second)
	man := &rundir.Manifest{
		Format:     rundir.Format,
		Tool:       buildinfo.Info{Version: "v0.3.0", Commit: "0123456789abcdef", Go: "go1.26.0"},
		Host:       rundir.Host{Name: "client", OS: "linux", Arch: "amd64", CPUs: 16},
		Command:    []string{"infermatrix", "run", "xlsx.yaml", "--target", "http://bench:s3cret-pw@127.0.0.1:8000/v1"},
		Experiment: rundir.ExperimentInfo{Name: "xlsx-fixture", File: "xlsx.yaml", SHA256: plan.SHA256},
		Started:    started,
		Ended:      &ended,
		Status:     rundir.StatusComplete,
		Server:     rundir.ServerInfo{Declared: plan.Server},
		Semantics:  metrics.SemInfermatrix,
		Rows:       plan.Rows,
	}
	in := &Run{Plan: plan, Manifest: man, Summary: sum}
	in.Decision = verdict.Judge(plan, sum)
	in.Analysis = &analysis.Analysis{
		Sweeps: []analysis.SweepAnalysis{{Base: "sat", Rows: []string{"sat/c=1", "sat/c=4", "sat/c=8"}, Why: "c=4 is the operating point."}},
		Predictions: []analysis.RowPrediction{{Row: "chat", Context: 20, DecodeTokensPerS: 150, TPOTBoundMS: 6.67, PrefillBoundMS: 1.5,
			KVCapacityTokens: 450000, MaxConcurrency: 18000, MeasuredTPOTMS: 12, TPOTRatio: 1.8, Regime: analysis.RegimeOverhead, Evidence: "TPOT 1.8x the bound"}},
	}
	in.Records = func(rowID string, fn func(*metrics.Record) error) error {
		n, ok := RecordsPerRow[rowID]
		if !ok {
			return fmt.Errorf("read records: %w", os.ErrNotExist)
		}
		for i := range n {
			srv := 16
			r := &metrics.Record{ID: fmt.Sprintf("%s-%d", rowID, i), Row: rowID, Seq: int64(i), Warmup: i == 0, Stream: true,
				ScheduledNS: int64(i) * 1e9, StartNS: int64(i)*1e9 + 5e5, FirstTokenNS: 42e6, LastTokenNS: 112e6, EndNS: 113e6,
				Status: 200, ResponseID: fmt.Sprintf("chatcmpl-%d", i), FinishReason: "length",
				InputTokens: metrics.Tokens{Requested: 16, Server: &srv, Client: 16}, OutputTokens: metrics.Tokens{Requested: 8, Client: 8}}
			if rowID == "sat/c=8" && i == 2 {
				r.Error = &metrics.Error{Class: metrics.ErrHTTP, Message: "503 \x00overloaded"}
				r.Status, r.FirstTokenNS, r.LastTokenNS, r.ResponseID = 503, 0, 0, ""
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	}
	return in
}

// HostileNote is a telemetry note as a server could make it: a metric name
// or error text with markup, a table pipe and an escape sequence.
const HostileNote = "scrape failed: <script>alert(1)</script> | [x](http://evil.example) \x1b[2J"

// Diagnosed is New with telemetry on two rows: sat/c=8 preempted and
// queued, chat is healthy; sat/c=1 and sat/c=4 have none. It is judged
// again and its analysis holds no diagnosis, so the renderers compute it.
func Diagnosed(t testing.TB) *Run {
	in := New(t)
	f := func(v float64) *float64 { return &v }
	for i := range in.Summary.Rows {
		rs := &in.Summary.Rows[i]
		switch rs.ID {
		case "sat/c=8":
			rs.Metrics.TTFT = metrics.NewDist([]float64{100, 110, 120, 130, 2000}, nil)
			rs.Server = &metrics.ServerTelemetry{Scrapes: 12, Failed: 1,
				KVCacheUsage:       &metrics.Gauge{Mean: 0.91, Min: 0.4, Max: 0.99, Samples: 12},
				NumRequestsRunning: &metrics.Gauge{Mean: 6.5, Min: 2, Max: 8, Samples: 12},
				NumRequestsWaiting: &metrics.Gauge{Mean: 2.5, Min: 0, Max: 6, Samples: 12},
				Preemptions:        f(7), PrefixCacheHitRate: f(0.125), PrefixCacheQueries: f(8000),
				TTFT:    &metrics.ServerDist{Count: 5, Mean: 410, P50: 95, P95: 1900},
				TTFTGap: &metrics.Gap{Mean: 12.5, P50: 15, P95: 20},
				Tokens: &metrics.CounterCheck{Mismatch: true, Prompt: metrics.CounterDiff{Server: 160, Records: 80, Diff: 1, Compared: true},
					Notes: []string{"prompt counter differs"}},
				Notes: []string{HostileNote}}
			rs.GPU = &metrics.GPUTelemetry{GPUs: 2, Scrapes: 12, GPUGauges: metrics.GPUGauges{Utilization: &metrics.Gauge{Mean: 0.75, Max: 1, Samples: 24}, PowerW: &metrics.Gauge{Mean: 900, Max: 1300, Samples: 12}, MemoryUsedGB: &metrics.Gauge{Mean: 70.5, Max: 75.25, Samples: 24}}}
		case "chat":
			rs.Server = &metrics.ServerTelemetry{Scrapes: 10, NumRequestsWaiting: &metrics.Gauge{Samples: 10}, Preemptions: f(0)}
		}
	}
	in.Decision = verdict.Judge(in.Plan, in.Summary)
	in.Analysis.Diagnosis = nil
	return in
}
