package runner

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/infermatrix/infermatrix/livemetrics"
)

// liveValue is the counter or gauge of name whose labels include these.
func liveValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no %s", name)
	}
next:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, lp := range m.Label {
			got[lp.GetName()] = lp.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if got[labels[i]] != labels[i+1] {
				continue next
			}
		}
		if m.Counter != nil {
			return m.Counter.GetValue()
		}
		return m.Gauge.GetValue()
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}

func liveScrape(t *testing.T, r *livemetrics.Recorder) map[string]*dto.MetricFamily {
	t.Helper()
	w := httptest.NewRecorder()
	r.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(w.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// TestLiveMetricsMatchTheSummary runs a short real-time row against the
// built-in server with faults, and checks that what a scrape says at the
// end is what the summary says: every measured request completed, errors
// by class, nothing left in flight.
func TestLiveMetricsMatchTheSummary(t *testing.T) {
	p := plan(t, `server: {target: builtin, sim: {preset: fixed, ttft: 2ms, itl: 1ms, seed: 3, faults: [{kind: 500, probability: 0.2}, {kind: truncate, probability: 0.1, after: 2}]}}
defaults: {input_tokens: 16, output_tokens: 8, warmup: 3, body: {ignore_eos: true}}
rows:
  - {id: open, requests: 60, rate: {per_second: 400}}
  - {id: closed, requests: 30, concurrency: 4}
`)
	live, err := livemetrics.New(livemetrics.Options{Labels: map[string]string{"shard": "1/2"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run"), Live: live})
	if err != nil {
		t.Fatal(err)
	}
	fams := liveScrape(t, live)
	if v := liveValue(t, fams, livemetrics.MetricRunInfo, "experiment", "t", "shard", "1/2"); v != 1 {
		t.Errorf("run_info = %v", v)
	}
	for _, s := range res.Summary.Rows {
		ok := liveValue(t, fams, livemetrics.MetricCompleted, "row", s.ID, "outcome", "ok")
		bad := liveValue(t, fams, livemetrics.MetricCompleted, "row", s.ID, "outcome", "error")
		if int(ok+bad) != s.Requests.Sent || int(ok) != s.Requests.Completed {
			t.Errorf("row %s: live ok %v + error %v; summary sent %d completed %d", s.ID, ok, bad, s.Requests.Sent, s.Requests.Completed)
		}
		if s.Requests.Failed == 0 {
			t.Errorf("row %s: no failures; the faults should give some", s.ID)
		}
		for class, n := range s.Errors.ByClass {
			if v := liveValue(t, fams, livemetrics.MetricErrors, "row", s.ID, "class", class); int(v) != n {
				t.Errorf("row %s: live %s errors %v, summary %d", s.ID, class, v, n)
			}
		}
		if v := liveValue(t, fams, livemetrics.MetricWarmup, "row", s.ID); int(v) != s.Requests.Warmup {
			t.Errorf("row %s: live warmup %v, summary %d", s.ID, v, s.Requests.Warmup)
		}
		if v := liveValue(t, fams, livemetrics.MetricInFlight, "row", s.ID); v != 0 {
			t.Errorf("row %s: %v in flight after the run", s.ID, v)
		}
	}
}

// TestLiveMetricsOnVirtualTime: the virtual executor counts its requests
// in flight and records them as the real-time one does.
func TestLiveMetricsOnVirtualTime(t *testing.T) {
	p := plan(t, `server: {target: builtin, sim: {preset: qwen3-0.6b-h200}}
defaults: {input_tokens: 64, output_tokens: 16}
rows:
  - {id: open, requests: 40, rate: {per_second: 50}}
`)
	live, _ := livemetrics.New(livemetrics.Options{})
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run"), Live: live, Virtual: true})
	if err != nil {
		t.Fatal(err)
	}
	fams := liveScrape(t, live)
	s := res.Summary.Rows[0]
	if v := liveValue(t, fams, livemetrics.MetricCompleted, "row", "open", "outcome", "ok"); int(v) != s.Requests.Completed || v != 40 {
		t.Errorf("live completed %v, summary %d, want 40", v, s.Requests.Completed)
	}
	if v := liveValue(t, fams, livemetrics.MetricInFlight, "row", "open"); v != 0 {
		t.Errorf("%v in flight after the run", v)
	}
	if h := fams[livemetrics.MetricTTFT].Metric[0].Histogram; h.GetSampleCount() != 40 {
		t.Errorf("TTFT observations %d, want 40", h.GetSampleCount())
	}
}
