package sim

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// promSample is one parsed sample line.
type promSample struct {
	name, labels string
	value        float64
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*)\} (\S+)$`)

// parseExposition parses the text format strictly enough to catch what a
// Prometheus scraper would reject: every sample line well-formed, every
// value a float, every family announced by HELP and TYPE before its samples.
func parseExposition(t *testing.T, text string) (types map[string]string, samples []promSample) {
	t.Helper()
	types = map[string]string{}
	helped := map[string]bool{}
	if !strings.HasSuffix(text, "\n") {
		t.Error("exposition does not end with a newline")
	}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "# HELP "):
			f := strings.SplitN(line, " ", 4)
			if len(f) < 4 || f[3] == "" {
				t.Errorf("line %d: bad HELP %q", i, line)
				continue
			}
			helped[f[2]] = true
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Split(line, " ")
			if len(f) != 4 || !helped[f[2]] {
				t.Errorf("line %d: bad TYPE %q", i, line)
				continue
			}
			switch f[3] {
			case "counter", "gauge", "histogram", "summary":
			default:
				t.Errorf("line %d: unknown type %q", i, f[3])
			}
			if _, dup := types[f[2]]; dup {
				t.Errorf("line %d: family %s declared twice", i, f[2])
			}
			types[f[2]] = f[3]
		default:
			m := sampleLine.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("line %d: malformed sample %q", i, line)
				continue
			}
			v, err := strconv.ParseFloat(m[3], 64)
			if err != nil {
				t.Errorf("line %d: value %q: %v", i, m[3], err)
			}
			family := m[1]
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if base, ok := strings.CutSuffix(m[1], suffix); ok && (types[base] == "histogram" || types[base] == "summary") {
					family = base
				}
			}
			if _, ok := types[family]; !ok {
				t.Errorf("line %d: sample of undeclared family %s", i, family)
			}
			samples = append(samples, promSample{m[1], m[2], v})
		}
	}
	return types, samples
}

// histogramOf returns the cumulative bucket counts (by le), _count and _sum
// of one histogram.
func histogramOf(samples []promSample, name string) (buckets map[string]float64, les []string, count, sum float64) {
	buckets = map[string]float64{}
	for _, s := range samples {
		switch s.name {
		case name + "_bucket":
			le := s.labels[strings.Index(s.labels, `le="`)+4 : len(s.labels)-1]
			buckets[le] = s.value
			les = append(les, le)
		case name + "_count":
			count = s.value
		case name + "_sum":
			sum = s.value
		}
	}
	return buckets, les, count, sum
}

func TestMetricsExposition(t *testing.T) {
	inst := startSim(t, Config{TTFT: 2 * time.Millisecond, ITL: 500 * time.Microsecond})
	const streams, tokens = 3, 8
	for range streams {
		readEvents(t, request(t, inst.BaseURL+"/chat/completions", chatStream(tokens), "").Body)
	}
	resp := request(t, inst.BaseURL+"/completions", `{"prompt":"hi","max_tokens":4}`, "")
	io.Copy(io.Discard, resp.Body)
	resp = request(t, inst.BaseURL+"/completions", `{"prompt":"hi","max_tokens":4}`, "429")
	io.Copy(io.Discard, resp.Body)

	types, samples := parseExposition(t, scrape(t, inst.BaseURL))
	for name, want := range map[string]string{
		"vllm:num_requests_running":                  "gauge",
		"vllm:num_requests_waiting":                  "gauge",
		"vllm:kv_cache_usage_perc":                   "gauge",
		"vllm:prefix_cache_queries_total":            "counter",
		"vllm:prefix_cache_hits_total":               "counter",
		"vllm:num_preemptions_total":                 "counter",
		"vllm:prompt_tokens_total":                   "counter",
		"vllm:generation_tokens_total":               "counter",
		"vllm:request_success_total":                 "counter",
		"vllm:time_to_first_token_seconds":           "histogram",
		"vllm:inter_token_latency_seconds":           "histogram",
		"vllm:e2e_request_latency_seconds":           "histogram",
		"vllm:request_time_per_output_token_seconds": "histogram",
		"infermatrix_sim:flush_lateness_seconds":     "histogram",
		"infermatrix_sim:faults_injected_total":      "counter",
	} {
		if types[name] != want {
			t.Errorf("%s has type %q, want %s", name, types[name], want)
		}
	}
	if _, ok := types["infermatrix_sim:step_lateness_seconds"]; ok {
		t.Error("step lateness exposed for a model without it")
	}

	const requests = streams + 1 // the 429 never reached the model
	for name, want := range map[string]struct {
		count, firstLE, lastLE string
	}{
		"vllm:time_to_first_token_seconds":           {fmt.Sprint(requests), "0.001", "2560.0"},
		"vllm:inter_token_latency_seconds":           {fmt.Sprint(streams*(tokens-1) + 3), "0.01", "80.0"},
		"vllm:e2e_request_latency_seconds":           {fmt.Sprint(requests), "0.3", "7680.0"},
		"vllm:request_time_per_output_token_seconds": {fmt.Sprint(requests), "0.01", "80.0"},
		"infermatrix_sim:flush_lateness_seconds":     {fmt.Sprint(streams * tokens), "0.00001", "0.1"},
	} {
		buckets, les, count, sum := histogramOf(samples, name)
		if fmt.Sprint(count) != want.count {
			t.Errorf("%s_count %v, want %s", name, count, want.count)
		}
		if len(les) < 2 || les[0] != want.firstLE || les[len(les)-2] != want.lastLE || les[len(les)-1] != "+Inf" {
			t.Errorf("%s buckets %v, want %s ... %s, +Inf", name, les, want.firstLE, want.lastLE)
		}
		prev := 0.0
		for _, le := range les {
			if buckets[le] < prev {
				t.Errorf("%s buckets not cumulative at le=%s", name, le)
			}
			prev = buckets[le]
		}
		if buckets["+Inf"] != count || sum <= 0 {
			t.Errorf("%s: +Inf bucket %v, count %v, sum %v", name, buckets["+Inf"], count, sum)
		}
	}
	_, _, _, ttftSum := histogramOf(samples, "vllm:time_to_first_token_seconds")
	if ttftSum < requests*0.002 {
		t.Errorf("TTFT sum %v below %d requests at the 2ms TTFT", ttftSum, requests)
	}

	count, p50, p99 := inst.Server.FlushLateness()
	if count != streams*tokens || p50 <= 0 || p99 < p50 {
		t.Errorf("FlushLateness() = %d, %v, %v; want %d flushes and 0 < p50 <= p99", count, p50, p99, streams*tokens)
	}
	t.Logf("flush lateness over %d tokens: p50 <= %v, p99 <= %v", count, p50, p99)

	if got := faultCount(t, inst.BaseURL, FaultRateLimit); got != "1.0" {
		t.Errorf("429 faults %s", got)
	}
	for _, reason := range []string{"stop", "length"} {
		series := `vllm:request_success_total{model_name="infermatrix-sim",finished_reason="` + reason + `"}`
		want := map[string]string{"stop": "0.0", "length": "4.0"}[reason]
		if got := seriesValue(t, inst.BaseURL, series); got != want {
			t.Errorf("%s = %s, want %s", series, got, want)
		}
	}
}

// statsTiming is a timing model with scheduler statistics, standing in for
// the engine model.
type statsTiming struct {
	constantTiming
	st modelStats
}

func (m statsTiming) stats() modelStats { return m.st }

func TestMetricsFromScheduler(t *testing.T) {
	s, err := New(Config{TTFT: time.Millisecond, ITL: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s.timing = statsTiming{
		constantTiming: constantTiming{ttft: time.Millisecond, itl: time.Millisecond},
		st: modelStats{
			running: 3, waiting: 2, kvUsage: 0.25, prefixQueries: 1000, prefixHits: 400, preemptions: 7,
			stepLateness: []float64{0.0003, 0.0001, 0.0002, 0.004}, stepLatenessSupported: true,
		},
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	baseURL := ts.URL + "/v1"
	// A stream in flight: the handler count would say 1, the scheduler 3.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // before ts.Close, which waits for the stream
	resp := openLongStream(t, ctx, baseURL)
	defer resp.Body.Close()

	text := scrape(t, baseURL)
	types, samples := parseExposition(t, text)
	m := `{model_name="infermatrix-sim"}`
	for series, want := range map[string]float64{
		"vllm:num_requests_running" + m:       3,
		"vllm:num_requests_waiting" + m:       2,
		"vllm:kv_cache_usage_perc" + m:        0.25,
		"vllm:prefix_cache_queries_total" + m: 1000,
		"vllm:prefix_cache_hits_total" + m:    400,
		"vllm:num_preemptions_total" + m:      7,
		`infermatrix_sim:step_lateness_seconds{model_name="infermatrix-sim",quantile="0.5"}`:  0.0002,
		`infermatrix_sim:step_lateness_seconds{model_name="infermatrix-sim",quantile="0.99"}`: 0.004,
	} {
		found := false
		for _, s := range samples {
			if s.name+"{"+s.labels+"}" == series {
				found = true
				if s.value != want {
					t.Errorf("%s = %v, want %v", series, s.value, want)
				}
			}
		}
		if !found {
			t.Errorf("%s missing from:\n%s", series, text)
		}
	}
	if types["infermatrix_sim:step_lateness_seconds"] != "summary" {
		t.Errorf("step lateness type %q", types["infermatrix_sim:step_lateness_seconds"])
	}
}

func TestHistogram(t *testing.T) {
	h := newHistogram(latenessBuckets...)
	if n, p := h.quantile(0.5), time.Duration(0); n != p {
		t.Errorf("empty quantile %v", n)
	}
	for range 98 {
		h.observe(7 * time.Microsecond)
	}
	h.observe(300 * time.Microsecond)
	h.observe(-time.Second) // counts as zero
	counts, total, sum := h.snapshot()
	if total != 100 || counts[0] != 99 || counts[5] != 1 || sum != 98*7*time.Microsecond+300*time.Microsecond {
		t.Errorf("snapshot %v, %d, %v", counts, total, sum)
	}
	// The median is in the first bucket, bounded by the largest value
	// seen; the 99th percentile is the 99th value, also in the first
	// bucket; the maximum is in the 500µs bucket, bounded by itself.
	for q, want := range map[float64]time.Duration{0.5: 10 * time.Microsecond, 0.99: 10 * time.Microsecond, 1: 300 * time.Microsecond} {
		if got := h.quantile(q); got != want {
			t.Errorf("quantile(%v) = %v, want %v", q, got, want)
		}
	}
	h.observeN(time.Second, 1000) // past the last bound: the +Inf bucket
	if got := h.quantile(0.99); got != time.Second {
		t.Errorf("quantile in +Inf bucket = %v, want the largest value", got)
	}

	small := newHistogram(0.001)
	small.observe(100 * time.Microsecond)
	if got := small.quantile(0.5); got != 100*time.Microsecond {
		t.Errorf("quantile bounded by the largest value = %v", got)
	}
}

func TestHistBatch(t *testing.T) {
	h := newHistogram(itlBuckets...)
	b := histBatch{h: h}
	for i := range batchSize - 1 {
		b.observeN(time.Duration(i)*time.Millisecond, 2)
	}
	if _, total, _ := h.snapshot(); total != 0 {
		t.Fatalf("batch merged early: %d", total)
	}
	b.observeN(time.Second, 1) // fills the batch
	if _, total, _ := h.snapshot(); total != 2*(batchSize-1)+1 {
		t.Fatalf("after a full batch, total %d", total)
	}
	b.observeN(5*time.Millisecond, 3)
	b.flush()
	b.flush() // empty: no effect
	counts, total, sum := h.snapshot()
	if total != 2*(batchSize-1)+4 || counts[0] != 2*11+3 {
		t.Errorf("counts %v, total %d", counts, total)
	}
	wantSum := time.Second + 15*time.Millisecond
	for i := range batchSize - 1 {
		wantSum += 2 * time.Duration(i) * time.Millisecond
	}
	if sum != wantSum {
		t.Errorf("sum %v, want %v", sum, wantSum)
	}
	if got := h.quantile(1); got != time.Second {
		t.Errorf("max %v", got)
	}
}
