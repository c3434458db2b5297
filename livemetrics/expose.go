package livemetrics

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/infermatrix/infermatrix/metrics"
)

// The exported metric names; the dashboard's test holds it to these.
const (
	MetricRunInfo     = "infermatrix_run_info"
	MetricInFlight    = "infermatrix_requests_in_flight"
	MetricCompleted   = "infermatrix_requests_completed_total"
	MetricErrors      = "infermatrix_request_errors_total"
	MetricWarmup      = "infermatrix_warmup_requests_total"
	MetricOutTokens   = "infermatrix_output_tokens_total"
	MetricTTFT        = "infermatrix_ttft_seconds"
	MetricITL         = "infermatrix_itl_seconds"
	MetricDispatchLag = "infermatrix_dispatch_lag_seconds"
)

// OtherClass labels errors of a class this build does not know.
const OtherClass = "other"

// Names lists every metric the recorder exports, histograms with the
// series names Prometheus gives their parts.
func Names() []string {
	out := []string{MetricRunInfo, MetricInFlight, MetricCompleted, MetricErrors, MetricWarmup, MetricOutTokens}
	for _, n := range []string{MetricTTFT, MetricITL, MetricDispatchLag} {
		out = append(out, n+"_bucket", n+"_count", n+"_sum")
	}
	return out
}

// Gather returns the figures as metric families, every series of every
// row started so far, rows in the order they started. Counters of a row
// are there from its start, at zero, so that rate() sees the first
// increment; a histogram of a row that cannot have it (dispatch lag of a
// closed-loop row) is absent, not empty.
func (r *Recorder) Gather() []*dto.MetricFamily {
	if r == nil {
		return nil
	}
	fam := func(name, help string, t dto.MetricType) *dto.MetricFamily {
		return &dto.MetricFamily{Name: ptr(name), Help: ptr(help), Type: t.Enum()}
	}
	info := fam(MetricRunInfo, "The run the figures belong to: experiment name and run id (the prefix of every X-Request-Id); always 1.", dto.MetricType_GAUGE)
	inFlight := fam(MetricInFlight, "Requests sent and not yet ended.", dto.MetricType_GAUGE)
	completed := fam(MetricCompleted, "Measured requests ended, by outcome (ok or error); warmup excluded.", dto.MetricType_COUNTER)
	errs := fam(MetricErrors, "Measured requests failed, by error class (docs/metrics.md); cancelled on purpose is class canceled.", dto.MetricType_COUNTER)
	warmup := fam(MetricWarmup, "Warmup and warm-prefix requests ended, whatever their outcome.", dto.MetricType_COUNTER)
	tokens := fam(MetricOutTokens, "Output tokens of successful measured requests: the server's usage, else the client tokenizer's count.", dto.MetricType_COUNTER)
	ttft := fam(MetricTTFT, "Time to first token of successful measured streamed requests, from the request's start.", dto.MetricType_HISTOGRAM)
	itl := fam(MetricITL, "Gaps between consecutive text events of successful measured streamed requests.", dto.MetricType_HISTOGRAM)
	lag := fam(MetricDispatchLag, "How late each measured request of a scheduled row was sent: start - queue wait - scheduled time.", dto.MetricType_HISTOGRAM)

	if ri := r.info.Load(); ri != nil {
		info.Metric = append(info.Metric, &dto.Metric{Label: r.labelPairs("experiment", ri.experiment, "run_id", ri.runID), Gauge: &dto.Gauge{Value: ptr(1.0)}})
	}
	for _, w := range r.snapshot() {
		row := func(kv ...string) []*dto.LabelPair { return r.labelPairs(append([]string{"row", w.id}, kv...)...) }
		counter := func(f *dto.MetricFamily, v uint64, kv ...string) {
			f.Metric = append(f.Metric, &dto.Metric{Label: row(kv...), Counter: &dto.Counter{Value: ptr(float64(v))}})
		}
		inFlight.Metric = append(inFlight.Metric, &dto.Metric{Label: row(), Gauge: &dto.Gauge{Value: ptr(float64(w.inFlight.Load()))}})
		counter(completed, w.ok.Load(), "outcome", "ok")
		counter(completed, w.failed.Load(), "outcome", "error")
		for i, c := range metrics.ErrorClasses {
			counter(errs, w.errs[i].Load(), "class", c)
		}
		if n := w.errs[len(metrics.ErrorClasses)].Load(); n > 0 {
			counter(errs, n, "class", OtherClass)
		}
		counter(warmup, w.warmup.Load())
		counter(tokens, w.outTokens.Load())
		ttft.Metric = append(ttft.Metric, w.ttft.metric(row()))
		itl.Metric = append(itl.Metric, w.itl.metric(row()))
		if w.lagged {
			lag.Metric = append(lag.Metric, w.lag.metric(row()))
		}
	}
	var out []*dto.MetricFamily
	for _, f := range []*dto.MetricFamily{info, inFlight, completed, errs, warmup, tokens, ttft, itl, lag} {
		if len(f.Metric) > 0 {
			out = append(out, f)
		}
	}
	return out
}

// metric is the histogram as one series with these labels.
func (h *histogram) metric(labels []*dto.LabelPair) *dto.Metric {
	cum, n, sum := h.read()
	hist := &dto.Histogram{SampleCount: ptr(n), SampleSum: ptr(sum)}
	for i, b := range h.bounds {
		hist.Bucket = append(hist.Bucket, &dto.Bucket{UpperBound: ptr(b), CumulativeCount: ptr(cum[i])})
	}
	return &dto.Metric{Label: labels, Histogram: hist}
}

// labelPairs is kv (name, value, ...) with the recorder's own labels,
// sorted by name as Prometheus' clients write them.
func (r *Recorder) labelPairs(kv ...string) []*dto.LabelPair {
	out := make([]*dto.LabelPair, 0, len(kv)/2+len(r.labels))
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &dto.LabelPair{Name: ptr(kv[i]), Value: ptr(kv[i+1])})
	}
	for _, p := range r.labels {
		out = append(out, &dto.LabelPair{Name: ptr(p.name), Value: ptr(p.value)})
	}
	slices.SortFunc(out, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

// WriteText writes the figures in the Prometheus text format (0.0.4).
func (r *Recorder) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for _, f := range r.Gather() {
		if _, err := expfmt.MetricFamilyToText(bw, f); err != nil {
			return fmt.Errorf("live metrics: %w", err)
		}
	}
	return bw.Flush()
}

// Handler serves GET /metrics (the text format) and GET /health (200 "ok"
// while the process runs).
func (r *Recorder) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
		_ = r.WriteText(w) // a scraper gone mid-write is its own loss
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}

func ptr[T any](v T) *T { return &v }
