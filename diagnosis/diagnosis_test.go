package diagnosis

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

func f64(v float64) *float64 { return &v }

func gauge(mean, max float64) *metrics.Gauge {
	return &metrics.Gauge{Mean: mean, Min: 0, Max: max, Samples: 10}
}

// dist is a client distribution with the given p50, p95 and p99 (and
// nothing else the rules read).
func dist(p50, p95, p99 float64) metrics.Dist {
	return metrics.Dist{Count: 100, Mean: p50, P50: p50, P90: p95, P95: p95, P99: p99}
}

// plainRow is a healthy closed-loop row of c users: TTFT 100 ms with a
// modest tail, TPOT 20 ms, no telemetry.
func plainRow(id string, c int) Row {
	p := &schema.PlannedRow{ID: id, Base: id, Load: schema.LoadPlan{Mode: schema.ModeConcurrency, Concurrency: c},
		Input: schema.Length{Mean: 1000}, Output: schema.Length{Mean: 100}, UniquePrompts: schema.UniquePerRun}
	s := &metrics.RowSummary{ID: id, Base: id, Status: metrics.RowComplete, Requests: metrics.Requests{Sent: 100, Completed: 100}}
	s.Metrics.TTFT = dist(100, 150, 180)
	s.Metrics.TPOT = dist(20, 22, 25)
	s.Metrics.InputTokens = dist(1000, 1000, 1000)
	s.Throughput.OutputTokensPerS = 1000
	return Row{Plan: p, Summary: s}
}

// withServer gives a row server telemetry that finds nothing wrong.
func withServer(r Row) Row {
	r.Summary.Server = &metrics.ServerTelemetry{Scrapes: 10,
		KVCacheUsage:       gauge(0.3, 0.5),
		NumRequestsRunning: gauge(float64(r.Plan.Load.Concurrency), float64(r.Plan.Load.Concurrency)),
		NumRequestsWaiting: gauge(0, 0),
		Preemptions:        f64(0),
		TTFT:               &metrics.ServerDist{Count: 100, Mean: 95, P50: 95, P95: 140, P99: 170},
		TTFTGap:            &metrics.Gap{Mean: 5, P50: 5, P95: 10},
	}
	return r
}

func ruleList(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Row+":"+f.Rule+":"+f.Severity)
	}
	return out
}

func evidence(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "%s: %s\n", f.Rule, strings.Join(f.Evidence, " | "))
	}
	return b.String()
}

// TestHealthyRows: rows with nothing wrong get no finding, and the
// diagnosis still says what it examined and which rows had telemetry.
func TestHealthyRows(t *testing.T) {
	d := Diagnose(Input{Rows: []Row{plainRow("a", 1), withServer(plainRow("b", 4)), {Plan: &schema.PlannedRow{ID: "gone"}}}})
	if len(d.Findings) != 0 {
		t.Errorf("findings on healthy rows: %+v", d.Findings)
	}
	if !reflect.DeepEqual(d.Examined, []string{"a", "b"}) || !reflect.DeepEqual(d.Telemetry, []string{"b"}) || !reflect.DeepEqual(d.NoTelemetry, []string{"a"}) {
		t.Errorf("examined %q, telemetry %q, none %q", d.Examined, d.Telemetry, d.NoTelemetry)
	}
}

// TestRules builds one row per rule of docs/diagnosis.md, with just the
// evidence the rule needs, and the same row without the decisive figure,
// which must give no finding.
func TestRules(t *testing.T) {
	cases := []struct {
		name   string
		rule   string
		build  func() Input
		strip  func(in Input) // removes the evidence
		quoted []string       // in the finding's evidence
	}{{
		name: "preemptions", rule: ruleKV,
		build: func() Input {
			r := withServer(plainRow("r", 64))
			r.Summary.Server.Preemptions = f64(12)
			r.Summary.Server.KVCacheUsage = gauge(0.9, 0.99)
			return Input{Rows: []Row{r}}
		},
		strip: func(in Input) {
			in.Rows[0].Summary.Server.Preemptions = nil
			in.Rows[0].Summary.Server.KVCacheUsage = nil
		},
		quoted: []string{"`server.preemptions` 12", "`server.kv_cache_usage` mean 90%, max 99%"},
	}, {
		// The file predicts room for 315 sequences, the server ran out
		// with 32: the finding says the prediction's memory is wrong.
		name: "another client", rule: ruleShared,
		build: func() Input {
			r := withServer(plainRow("r", 8))
			r.Summary.InFlight = metrics.InFlight{Mean: 7.9, Max: 8}
			r.Summary.Server.NumRequestsRunning = gauge(14, 20)
			return Input{Rows: []Row{r}}
		},
		strip:  func(in Input) { in.Rows[0].Summary.Server.NumRequestsRunning = nil },
		quoted: []string{"`server.num_requests_running` max 20", "the client had at most 8 of the row's requests in flight"},
	}, {
		name: "preemptions the prediction does not expect", rule: ruleKV,
		build: func() Input {
			r := withServer(plainRow("r", 32))
			r.Summary.Server.Preemptions = f64(12)
			r.Summary.InFlight = metrics.InFlight{Mean: 22.4, Max: 32}
			r.Prediction = &Prediction{MaxConcurrency: 315}
			return Input{Rows: []Row{r}}
		},
		strip: func(in Input) { in.Rows[0].Summary.Server.Preemptions = nil },
		quoted: []string{"the prediction's KV cache holds 315 sequences",
			"the server ran out with at most 32 in flight, fewer than the 315 the prediction's cache holds"},
	}, {
		name: "queueing", rule: ruleQueueing,
		build: func() Input {
			r := withServer(plainRow("r", 32))
			r.Summary.Metrics.TTFT = dist(120, 900, 1500)
			r.Summary.Server.NumRequestsWaiting = gauge(4.2, 11)
			return Input{Rows: []Row{r}}
		},
		strip:  func(in Input) { in.Rows[0].Summary.Server.NumRequestsWaiting = nil },
		quoted: []string{"`server.num_requests_waiting` mean 4.2, max 11"},
	}, {
		name: "queueing in the client", rule: ruleQueueing,
		build: func() Input {
			r := plainRow("r", 8)
			r.Plan.Load = schema.LoadPlan{Mode: schema.ModeRate, Rate: 20, MaxConcurrency: 8}
			r.Summary.Metrics.TTFT = dist(120, 900, 1500)
			r.Summary.Metrics.Queue = dist(300, 700, 800)
			return Input{Rows: []Row{r}}
		},
		strip:  func(in Input) { in.Rows[0].Summary.Metrics.Queue = metrics.Dist{} },
		quoted: []string{"`queue` p50 300 ms, p95 700 ms: requests waited in the client behind max_concurrency 8"},
	}, {
		name: "prefill by prediction", rule: rulePrefill,
		build: func() Input {
			r := withServer(plainRow("r", 1))
			r.Summary.Metrics.TTFT = dist(900, 950, 980)
			r.Prediction = &Prediction{Regime: PredictedPrefill, TTFTBoundMS: 700, TTFTRatio: 900.0 / 700}
			return Input{Rows: []Row{r}, SLO: metrics.SLO{TTFTms: 500}}
		},
		strip:  func(in Input) { in.Rows[0].Prediction = nil },
		quoted: []string{"TTFT p50 900 ms is 1.29× the compute-bound prefill bound of 700 ms", "`server.num_requests_waiting` mean 0: nothing queued"},
	}, {
		name: "prefill across an input sweep", rule: rulePrefill,
		build: func() Input {
			var rows []Row
			for i, in := range []float64{1000, 4000, 16000} {
				r := withServer(plainRow(fmt.Sprintf("long/in=%d", int(in)), 4))
				r.Plan.Base = "long"
				r.Plan.SweepPoint = map[string]float64{"input_tokens": in}
				r.Summary.Metrics.TTFT = dist(100*float64(1+3*i*i), 200, 300)
				rows = append(rows, r)
			}
			return Input{Rows: rows}
		},
		strip:  func(in Input) { in.Rows[1].Summary.Server = nil }, // one point cannot rule out a queue
		quoted: []string{"across the sweep `long`, TTFT p50 went 100 ms → 1300 ms (×13.00) as input went 1,000 → 16,000 tokens (×16.00), with no queue at any point"},
	}, {
		name: "memory-bound decode", rule: ruleMemoryBound,
		build: func() Input {
			r := plainRow("r", 1)
			r.Summary.GPU = &metrics.GPUTelemetry{GPUs: 1, Scrapes: 10, GPUGauges: metrics.GPUGauges{MemCopyUtilization: gauge(0.85, 0.95), Utilization: gauge(0.97, 1)}}
			r.Prediction = &Prediction{Regime: PredictedBandwidth, TPOTBoundMS: 16, TPOTRatio: 1.25}
			return Input{Rows: []Row{r}}
		},
		strip:  func(in Input) { in.Rows[0].Summary.GPU = nil }, // a passing row without the counters is not notable
		quoted: []string{"TPOT p50 20.0 ms is 1.25× the bandwidth bound of 16.0 ms", "`gpu.mem_copy_utilization` mean 85%"},
	}, {
		name: "host-bound decode", rule: ruleNonMemory,
		build: func() Input {
			r := plainRow("r", 1)
			r.Summary.GPU = &metrics.GPUTelemetry{GPUs: 1, Scrapes: 10, GPUGauges: metrics.GPUGauges{Utilization: gauge(0.3, 0.6)}}
			r.Prediction = &Prediction{Regime: PredictedOverhead, TPOTBoundMS: 5, TPOTRatio: 4}
			return Input{Rows: []Row{r}}
		},
		strip:  func(in Input) { in.Rows[0].Summary.GPU = nil },
		quoted: []string{"TPOT p50 20.0 ms is 4.00× the bandwidth bound of 5.00 ms", "`gpu.utilization` mean 30%"},
	}, {
		name: "throttled clocks", rule: ruleClocks,
		build: func() Input {
			r := plainRow("r", 1)
			r.Summary.GPU = &metrics.GPUTelemetry{GPUs: 1, Scrapes: 10, GPUGauges: metrics.GPUGauges{Utilization: gauge(0.9, 1), SMClockMHz: &metrics.Gauge{Mean: 1600, Min: 1100, Max: 1980, Samples: 10}, TemperatureC: gauge(80, 89)}}
			return Input{Rows: []Row{r}}
		},
		strip:  func(in Input) { in.Rows[0].Summary.GPU.SMClockMHz = nil },
		quoted: []string{"`gpu.sm_clock_mhz` min 1,100, mean 1,600, max 1,980", "`gpu.temperature_c` max 89.0 °C"},
	}, {
		name: "batching trade-off", rule: ruleBatching,
		build: func() Input {
			var rows []Row
			for i, c := range []int{8, 16, 32} {
				r := withServer(plainRow(fmt.Sprintf("sat/c=%d", c), c))
				r.Plan.Base = "sat"
				r.Plan.SweepPoint = map[string]float64{"concurrency": float64(c)}
				r.Summary.Metrics.TPOT = dist(20*float64(1+i*i), 30, 40)
				r.Summary.Throughput.OutputTokensPerS = []float64{1000, 1800, 2000}[i]
				rows = append(rows, r)
			}
			return Input{Rows: rows}
		},
		strip: func(in Input) {
			for _, r := range in.Rows {
				r.Summary.Server.NumRequestsRunning = nil
			}
		},
		quoted: []string{"from `sat/c=16` to `sat/c=32` (concurrency 16 → 32): TPOT p50 40.0 ms → 100 ms (+150%)",
			"output throughput 1800 → 2000 tok/s (+11% for +100% load)", "`server.num_requests_running` mean 32 of 32"},
	}, {
		name: "warm prefix missed", rule: ruleCacheMiss,
		build: func() Input {
			r := withServer(plainRow("r", 4))
			r.Plan.Prefix = &schema.Prefix{Length: 800, Distinct: 4, Warm: true}
			r.Summary.Server.PrefixCacheQueries, r.Summary.Server.PrefixCacheHits, r.Summary.Server.PrefixCacheHitRate = f64(100000), f64(5000), f64(0.05)
			return Input{Rows: []Row{r}}
		},
		strip:  func(in Input) { in.Rows[0].Summary.Server.PrefixCacheHitRate = nil },
		quoted: []string{"`server.prefix_cache_hit_rate` 5.0% of 100,000 prompt tokens looked up", "the warm prefix of 800 tokens in 1,000 would give about 80%"},
	}, {
		name: "cold row contaminated", rule: ruleContamination,
		build: func() Input {
			r := plainRow("r", 4)
			r.Summary.Cache = metrics.Cache{Requests: 100, PromptTokens: 100000, CachedTokens: 60000, HitRatio: 0.6, UnexpectedRatio: 0.55}
			return Input{Rows: []Row{r}}
		},
		strip:  func(in Input) { in.Rows[0].Summary.Cache = metrics.Cache{} },
		quoted: []string{"`cache.unexpected_ratio` 55%"},
	}, {
		name: "time outside the engine", rule: ruleGap,
		build: func() Input {
			r := withServer(plainRow("r", 1))
			r.Summary.Server.TTFTGap = &metrics.Gap{Mean: 45, P50: 40, P95: 60}
			r.Summary.Server.TTFT = &metrics.ServerDist{Count: 100, Mean: 55, P50: 60}
			return Input{Rows: []Row{r}}
		},
		// A p50 gap that the exact means do not show is the histogram's
		// bucket interpolation, not the network.
		strip:  func(in Input) { in.Rows[0].Summary.Server.TTFTGap.Mean = 2.5 },
		quoted: []string{"`server.ttft_gap` mean 45.0 ms, p50 40.0 ms: the client's TTFT mean 100 ms, p50 100 ms against the server's 55.0 ms, 60.0 ms"},
	}, {
		name: "token counters", rule: ruleCounters,
		build: func() Input {
			r := withServer(plainRow("r", 1))
			r.Summary.Server.Tokens = &metrics.CounterCheck{Mismatch: true,
				Prompt:     metrics.CounterDiff{Server: 200000, Records: 100000, Diff: 1, Compared: true},
				Generation: metrics.CounterDiff{Server: 10000, Records: 10000, Compared: true}}
			return Input{Rows: []Row{r}}
		},
		strip:  func(in Input) { in.Rows[0].Summary.Server.Tokens.Mismatch = false },
		quoted: []string{"prompt tokens: server 200,000, records 100,000 (+100.0%)"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.build()
			d := Diagnose(in)
			var got *Finding
			for i := range d.Findings {
				if d.Findings[i].Rule == c.rule {
					got = &d.Findings[i]
				}
			}
			if got == nil {
				t.Fatalf("no %s finding; got %q\n%s", c.rule, ruleList(d.Findings), evidence(d.Findings))
			}
			if got.Symptom == "" || got.Regime == "" || got.Next == "" || got.Severity == "" {
				t.Errorf("incomplete finding: %+v", *got)
			}
			all := strings.Join(got.Evidence, "\n")
			for _, q := range c.quoted {
				if !strings.Contains(all, q) {
					t.Errorf("evidence lacks %q:\n%s", q, all)
				}
			}
			// The same input gives the same words.
			if again := Diagnose(c.build()); !reflect.DeepEqual(again, d) {
				t.Errorf("a second diagnosis differs:\n%+v\n%+v", d, again)
			}
			in = c.build()
			c.strip(in)
			for _, f := range Diagnose(in).Findings {
				if f.Rule == c.rule {
					t.Errorf("without its evidence, the %s finding is still stated: %+v", c.rule, f)
				}
			}
		})
	}
}

// TestQueueTrend: the sweep's highest load quotes how the queue grew.
func TestQueueTrend(t *testing.T) {
	var rows []Row
	for i, c := range []int{1, 8, 32} {
		r := withServer(plainRow(fmt.Sprintf("sat/c=%d", c), c))
		r.Plan.Base = "sat"
		r.Plan.SweepPoint = map[string]float64{"concurrency": float64(c)}
		r.Summary.Server.NumRequestsWaiting = gauge([]float64{0, 0.2, 6}[i], 10)
		if c == 32 {
			r.Summary.Metrics.TTFT = dist(200, 1500, 2500)
		}
		rows = append(rows, r)
	}
	d := Diagnose(Input{Rows: rows})
	if len(d.Findings) != 1 || d.Findings[0].Row != "sat/c=32" || d.Findings[0].Rule != ruleQueueing {
		t.Fatalf("findings = %q; want one queueing finding on sat/c=32", ruleList(d.Findings))
	}
	want := "across the sweep `sat`, `server.num_requests_waiting` mean went 0 → 0.2 → 6 as concurrency went 1 → 8 → 32"
	if ev := d.Findings[0].Evidence; ev[len(ev)-1] != want {
		t.Errorf("trend = %q; want %q", ev[len(ev)-1], want)
	}
}

// TestFailingRows: a failing row's findings are offered as causes; one
// with no supported cause is listed as unexplained, not given a guess.
func TestFailingRows(t *testing.T) {
	bare := plainRow("bare", 1)
	bare.Failed = true
	// Without telemetry or prediction a failing row gets nothing.
	d := Diagnose(Input{Rows: []Row{bare}})
	if len(d.Findings) != 0 || !reflect.DeepEqual(d.Unexplained, []string{"bare"}) {
		t.Errorf("findings %q, unexplained %q; want none, and bare unexplained", ruleList(d.Findings), d.Unexplained)
	}
	// With only the prediction: the client-and-prediction finding.
	bare.Prediction = &Prediction{Regime: PredictedOverhead, TPOTBoundMS: 5, TPOTRatio: 4}
	d = Diagnose(Input{Rows: []Row{bare}})
	if got := ruleList(d.Findings); !reflect.DeepEqual(got, []string{"bare:non_memory:fail"}) || len(d.Unexplained) != 0 {
		t.Errorf("findings %q, unexplained %q; want a failing non-memory finding", got, d.Unexplained)
	}
	if !strings.Contains(d.Findings[0].Next, "telemetry.gpu") {
		t.Errorf("next = %q; want the GPU measurement named as the next step", d.Findings[0].Next)
	}
	// A warning that is a fault beside the failure (the counters) stays a
	// warning and does not explain it.
	r := withServer(plainRow("r", 1))
	r.Failed = true
	r.Summary.Server.Tokens = &metrics.CounterCheck{Mismatch: true, Prompt: metrics.CounterDiff{Server: 2, Records: 1, Diff: 1, Compared: true}}
	d = Diagnose(Input{Rows: []Row{r}})
	if got := ruleList(d.Findings); !reflect.DeepEqual(got, []string{"r:counters:warn"}) || !reflect.DeepEqual(d.Unexplained, []string{"r"}) {
		t.Errorf("findings %q, unexplained %q", got, d.Unexplained)
	}
}

// TestOrder: findings come in plan order, each row's in the table's order.
func TestOrder(t *testing.T) {
	a := withServer(plainRow("a", 64))
	a.Summary.Server.Preemptions = f64(3)
	a.Summary.Metrics.TTFT = dist(100, 900, 1500)
	a.Summary.Server.NumRequestsWaiting = gauge(3, 9)
	a.Summary.Server.Tokens = &metrics.CounterCheck{Mismatch: true, Prompt: metrics.CounterDiff{Server: 2, Records: 1, Diff: 1, Compared: true}}
	b := withServer(plainRow("b", 1))
	b.Summary.Server.TTFTGap = &metrics.Gap{Mean: 50, P50: 50}
	d := Diagnose(Input{Rows: []Row{a, b}})
	want := []string{"a:kv_capacity:warn", "a:queueing:warn", "a:counters:warn", "b:outside_engine:warn"}
	if got := ruleList(d.Findings); !reflect.DeepEqual(got, want) {
		t.Errorf("findings = %q; want %q", got, want)
	}
	if got := d.Rows("b"); len(got) != 1 || got[0].Rule != ruleGap {
		t.Errorf("Rows(b) = %+v", got)
	}
}
