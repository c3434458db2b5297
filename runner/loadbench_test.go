package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/internal/cheapsse"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/protocol"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/sim"
)

// The load benchmarks run the built-in server in a separate process, the
// test binary itself started with serverEnv set, so that the client's
// figures are the client's and not the server's; both share this machine's
// cores, as they would on a laptop. Each is compared with a minimal raw SSE
// drain client measured in the same run.
const (
	serverEnv = "INFERMATRIX_BENCH_SERVER" // the preset to serve
	truthEnv  = "INFERMATRIX_BENCH_TRUTH"  // where to write the ground-truth log
)

func TestMain(m *testing.M) {
	if preset := os.Getenv(serverEnv); preset != "" {
		os.Exit(serveForBenchmark(preset, os.Getenv(truthEnv)))
	}
	os.Exit(m.Run())
}

// cheapServer is the preset name that serves internal/cheapsse instead of
// the built-in server: pre-encoded chunks and no engine, so that the CPU
// the benchmark sees spent is the client's.
const cheapServer = "cheap"

// slowServer is the preset name that serves the built-in server with a
// fixed 300 ms to the first token, for tests whose requests must stay in
// flight a while.
const slowServer = "slow"

// serveForBenchmark serves preset on loopback, prints the base URL, and
// stops when its standard input closes.
func serveForBenchmark(preset, truthPath string) int {
	if preset == cheapServer {
		return cheapsse.Serve()
	}
	cfg := sim.Config{TTFT: 300 * time.Millisecond, ITL: time.Millisecond}
	var err error
	if preset != slowServer {
		cfg, err = BuiltinConfig(schema.SimSettings{Preset: preset})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var truth *bufio.Writer
	if truthPath != "" {
		f, err := os.Create(truthPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		truth = bufio.NewWriterSize(f, 1<<20)
		defer truth.Flush()
		cfg.GroundTruth = truth
	}
	inst, err := sim.Start(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(inst.BaseURL)
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := inst.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// serverProcess starts the server process and returns its base URL and a
// function that stops it and waits for it to exit.
func serverProcess(tb testing.TB, preset, truth string) (string, func()) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), serverEnv+"="+preset, truthEnv+"="+truth)
	if v := os.Getenv("INFERMATRIX_BENCH_SERVER_PROCS"); v != "" {
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+v)
	}
	cmd.Stderr = os.Stderr
	url, stopProc, err := cheapsse.StartProcess(cmd)
	if err != nil {
		tb.Fatal(err)
	}
	stop := func() {
		if err := stopProc(); err != nil {
			tb.Errorf("server process: %v", err)
		}
	}
	tb.Cleanup(stop)
	return url, stop
}

// runRowAgainst runs one row of yaml through Run against url and returns
// its summary.
func runRowAgainst(tb testing.TB, url, rowYAML string) metrics.RowSummary {
	tb.Helper()
	dir := tb.TempDir()
	p, err := schema.Parse(filepath.Join(dir, "exp.yaml"), []byte(fmt.Sprintf(`apiVersion: infermatrix/v1
name: bench
server: {urls: [%q]}
rows:
  - %s
`, url, rowYAML)), schema.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(dir, "run")})
	if err != nil {
		tb.Fatal(err)
	}
	rs := res.Summary.Rows[0]
	if rs.Requests.Failed > 0 {
		tb.Fatalf("%d requests failed: %+v", rs.Requests.Failed, rs.Errors)
	}
	return rs
}

// BenchmarkStreamThroughput measures sustained streamed tokens/s through
// the whole client (SSE framing, chunk decoding, stamping, records written
// to disk, aggregation) against internal/cheapsse in another process, and
// the same for the raw drain on the same server in the same run; ratio is
// ours ÷ drain. The goal is at least 0.7. The server is the cheapest one
// can be (the built-in one, which models a GPU, would saturate two cores
// and hide the client's cost behind its own).
func BenchmarkStreamThroughput(b *testing.B) {
	for _, users := range []int{64, 256} {
		b.Run(fmt.Sprintf("c=%d", users), func(b *testing.B) {
			url, _ := serverProcess(b, cheapServer, "")
			const out = 256
			requests := 16 * users
			var drain, ours float64
			for b.Loop() {
				d, err := cheapsse.DrainThroughput(url, users, requests, out)
				if err != nil {
					b.Fatal(err)
				}
				drain += d
				rs := runRowAgainst(b, url, fmt.Sprintf(`{id: t, concurrency: %d, requests: %d, input_tokens: 16, output_tokens: %d, body: {ignore_eos: true}}`, users, requests, out))
				ours += rs.Throughput.OutputTokensPerS
			}
			n := float64(b.N)
			b.ReportMetric(drain/n, "drain-tok/s")
			b.ReportMetric(ours/n, "client-tok/s")
			b.ReportMetric(ours/drain, "ratio")
		})
	}
}

// truthLine is the part of the server's ground-truth log the timing check
// reads.
func readTruth(tb testing.TB, path string) map[string]truthLine {
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]truthLine{}
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var t truthLine
		if err := json.Unmarshal(l, &t); err != nil {
			tb.Fatal(err)
		}
		out[t.ID] = t
	}
	return out
}

// timingErrors returns, for every token of every response, how long after
// the server flushed it the client stamped it, in ms. events are each
// response's wall-clock stamps of its text events; the first data line of a
// vLLM-shaped stream carries the role, and is dropped by the caller.
func timingErrors(tb testing.TB, truth map[string]truthLine, id string, events []int64) []float64 {
	t, ok := truth[id]
	if !ok {
		tb.Fatalf("response %q is not in the ground truth", id)
	}
	if len(events) != len(t.FlushNs) {
		tb.Fatalf("response %s: %d events, server flushed %d tokens", id, len(events), len(t.FlushNs))
	}
	out := make([]float64, len(events))
	for i, e := range events {
		out[i] = float64(e-(t.ArrivalUnixNs+t.FlushNs[i])) / 1e6
	}
	return out
}

// BenchmarkTimingError compares each token's client timestamp with the
// server's ground-truth flush time, for the client and for the raw drain,
// at 100, 500 and 1,000 concurrent streams against llama-3.1-8b-h100 in
// another process. Goals: p99 at most 1 ms at 100 streams, and no worse
// than 1.5× the drain's at 500 and 1,000.
func BenchmarkTimingError(b *testing.B) {
	for _, streams := range []int{100, 500, 1000} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			const out = 64
			var ours, drain []float64
			for b.Loop() {
				// The raw drain.
				truthPath := filepath.Join(b.TempDir(), "truth.jsonl")
				url, stop := serverProcess(b, "llama-3.1-8b-h100", truthPath)
				hc := protocol.NewHTTPClient(streams)
				stamps := make([]cheapsse.Stamps, streams)
				var wg sync.WaitGroup
				for i := range streams {
					wg.Go(func() {
						st, err := cheapsse.RawDrain(context.Background(), hc, url, cheapsse.StreamBody(out), true)
						if err != nil {
							b.Error(err)
						}
						stamps[i] = st
					})
				}
				wg.Wait()
				hc.CloseIdleConnections()
				stop()
				truth := readTruth(b, truthPath)
				for _, st := range stamps {
					// Data lines: role, out tokens, finish, usage, [DONE].
					drain = append(drain, timingErrors(b, truth, st.ID, st.Events[1:1+out])...)
				}

				// The client.
				truthPath = filepath.Join(b.TempDir(), "truth.jsonl")
				url, stop = serverProcess(b, "llama-3.1-8b-h100", truthPath)
				c := testClient(b, "chat")
				c.HTTP = protocol.NewHTTPClient(streams)
				recs := make([]*metrics.Record, streams)
				for i := range streams {
					wg.Go(func() {
						rec := &metrics.Record{ID: fmt.Sprintf("b-%d", i), Stream: true}
						c.Do(context.Background(), &protocol.Call{URL: url, Body: cheapsse.StreamBody(out), Rec: rec})
						recs[i] = rec
					})
				}
				wg.Wait()
				c.HTTP.CloseIdleConnections()
				stop()
				truth = readTruth(b, truthPath)
				for _, rec := range recs {
					if rec.Error != nil {
						b.Fatalf("%+v", rec.Error)
					}
					wall := make([]int64, len(rec.Events))
					for i, e := range rec.Events {
						wall[i] = rec.StartUnixNS + e
					}
					ours = append(ours, timingErrors(b, truth, rec.ResponseID, wall)...)
				}
			}
			slices.Sort(ours)
			slices.Sort(drain)
			q := func(s []float64, p float64) float64 { return s[min(len(s)-1, int(p*float64(len(s))))] }
			b.ReportMetric(q(ours, 0.5), "client-p50-ms")
			b.ReportMetric(q(ours, 0.99), "client-p99-ms")
			b.ReportMetric(q(drain, 0.5), "drain-p50-ms")
			b.ReportMetric(q(drain, 0.99), "drain-p99-ms")
			b.ReportMetric(q(ours, 0.99)/q(drain, 0.99), "p99-ratio")
		})
	}
}

// BenchmarkPoisson5000 dispatches Poisson arrivals at 5,000 requests per
// second with short outputs against internal/cheapsse in another process, and
// reports the achieved rate against the schedule's and the dispatch lag.
// Goals: within 1%, and p99 lag at most 1 ms.
func BenchmarkPoisson5000(b *testing.B) {
	url, _ := serverProcess(b, cheapServer, "")
	for b.Loop() {
		rs := runRowAgainst(b, url, `{id: p, requests: 20000, rate: {per_second: 5000, arrival: poisson}, input_tokens: 16, output_tokens: 4, body: {ignore_eos: true}}`)
		sc := rs.SelfCheck
		b.ReportMetric(sc.AchievedRate, "achieved-req/s")
		b.ReportMetric(sc.ScheduledRate, "scheduled-req/s")
		b.ReportMetric(100*(sc.AchievedRate/sc.ScheduledRate-1), "rate-error-%")
		b.ReportMetric(sc.DispatchLag.P50, "lag-p50-ms")
		b.ReportMetric(sc.DispatchLag.P99, "lag-p99-ms")
		b.ReportMetric(sc.DispatchLag.P90, "lag-p90-ms")
		b.ReportMetric(sc.SchedDelayP99MS, "sched-p99-ms")
		b.ReportMetric(sc.ClientCPU, "client-cpu")
	}
}

// BenchmarkMillionRequests runs one row of 1,000,000 short requests against
// internal/cheapsse in another process and reports this process's peak resident
// memory. Goal: at most 512 MB. It takes minutes, so it runs only with
// INFERMATRIX_BENCH_MILLION=1; otherwise it runs 100,000 requests and
// reports the peak for that.
func BenchmarkMillionRequests(b *testing.B) {
	n := 100_000
	if os.Getenv("INFERMATRIX_BENCH_MILLION") == "1" {
		n = 1_000_000
	}
	url, _ := serverProcess(b, cheapServer, "")
	for b.Loop() {
		rs := runRowAgainst(b, url, fmt.Sprintf(`{id: m, requests: %d, concurrency: 64, input_tokens: 8, output_tokens: 2, body: {ignore_eos: true}}`, n))
		b.ReportMetric(rs.Throughput.RequestsPerS, "req/s")
	}
	if mb, ok := peakRSSMB(); ok {
		b.ReportMetric(mb, "peak-rss-MB")
	}
	b.ReportMetric(float64(n), "requests")
}
