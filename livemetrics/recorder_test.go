package livemetrics

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/infermatrix/infermatrix/metrics"
)

// scrape reads the handler's /metrics as Prometheus would, failing on
// anything its text parser rejects.
func scrape(t testing.TB, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); expfmt.ResponseFormat(rec.Header()).FormatType() != expfmt.TypeTextPlain {
		t.Fatalf("Content-Type %q: want the text format", ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("the text parser rejects /metrics: %v", err)
	}
	return fams
}

// value is the counter or gauge of the series with exactly these labels
// (beside the ones not named), or fails.
func value(t testing.TB, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	for _, m := range series(fams, name, labels) {
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}

func series(fams map[string]*dto.MetricFamily, name string, labels map[string]string) []*dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
	var out []*dto.Metric
next:
	for _, m := range f.Metric {
		for k, v := range labels {
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

func rec(mutate func(*metrics.Record)) *metrics.Record {
	r := &metrics.Record{Row: "r", Stream: true, ScheduledNS: 1e9, StartNS: 1e9 + 3e6, QueueNS: 1e6,
		FirstTokenNS: 40e6, Events: []int64{40e6, 50e6, 70e6}, OutputTokens: metrics.Tokens{Client: 3}}
	if mutate != nil {
		mutate(r)
	}
	return r
}

func TestHandlerServesObservedRecords(t *testing.T) {
	r, err := New(Options{Labels: map[string]string{"shard": "2/4"}})
	if err != nil {
		t.Fatal(err)
	}
	r.Start("exp", "0badcafe")
	open := r.Row("open", true)
	closed := r.Row("closed", false)
	open.Begin()
	open.Begin()
	open.End()
	open.Observe(rec(nil))
	open.Observe(rec(func(x *metrics.Record) { x.OutputTokens.Server = new(int); *x.OutputTokens.Server = 5 }))
	open.Observe(rec(func(x *metrics.Record) { x.Error = &metrics.Error{Class: metrics.ErrTimeout} }))
	open.Observe(rec(func(x *metrics.Record) { x.Error = &metrics.Error{Class: "from-the-future"} }))
	open.Observe(rec(func(x *metrics.Record) { x.Warmup = true }))
	closed.Observe(rec(nil))

	fams := scrape(t, r.Handler())
	shard := map[string]string{"shard": "2/4"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{"shard": "2/4"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	if v := value(t, fams, MetricRunInfo, with("experiment", "exp", "run_id", "0badcafe")); v != 1 {
		t.Errorf("run_info %v", v)
	}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{MetricInFlight, with("row", "open"), 1},
		{MetricCompleted, with("row", "open", "outcome", "ok"), 2},
		{MetricCompleted, with("row", "open", "outcome", "error"), 2},
		{MetricErrors, with("row", "open", "class", "timeout"), 1},
		{MetricErrors, with("row", "open", "class", "reset"), 0},
		{MetricErrors, with("row", "open", "class", OtherClass), 1},
		{MetricWarmup, with("row", "open"), 1},
		{MetricOutTokens, with("row", "open"), 3 + 5},
		{MetricCompleted, with("row", "closed", "outcome", "ok"), 1},
	}
	for _, c := range checks {
		if v := value(t, fams, c.name, c.labels); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	for _, f := range fams {
		for _, m := range f.Metric {
			if len(series(map[string]*dto.MetricFamily{"x": {Metric: []*dto.Metric{m}}}, "x", shard)) == 0 {
				t.Errorf("%s%v lacks the shard label", f.GetName(), m.Label)
			}
		}
	}

	// Histograms: two successful requests with TTFT 40 ms and gaps 10 and
	// 20 ms; the dispatch lag of every measured request of the open row
	// (3 - 1 = 2 ms); none for the closed row.
	h := series(fams, MetricTTFT, with("row", "open"))[0].Histogram
	if h.GetSampleCount() != 2 || h.GetSampleSum() != 0.08 {
		t.Errorf("TTFT count %d sum %v, want 2, 0.08", h.GetSampleCount(), h.GetSampleSum())
	}
	for _, b := range h.Bucket {
		want := uint64(0)
		if b.GetUpperBound() >= 0.04 {
			want = 2
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("TTFT bucket le=%v holds %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	itl := series(fams, MetricITL, with("row", "open"))[0].Histogram
	if itl.GetSampleCount() != 4 || itl.GetSampleSum() < 0.0599 || itl.GetSampleSum() > 0.0601 {
		t.Errorf("ITL count %d sum %v, want 4, 0.06", itl.GetSampleCount(), itl.GetSampleSum())
	}
	lag := series(fams, MetricDispatchLag, with("row", "open"))
	if len(lag) != 1 || lag[0].Histogram.GetSampleCount() != 4 || lag[0].Histogram.GetSampleSum() != 0.008 {
		t.Errorf("dispatch lag %v, want 4 observations of 2 ms", lag)
	}
	if l := series(fams, MetricDispatchLag, with("row", "closed")); len(l) != 0 {
		t.Errorf("a closed-loop row has a dispatch lag: %v", l)
	}
	for name := range fams {
		known := false
		for _, n := range Names() {
			known = known || n == name || n == name+"_bucket"
		}
		if !known {
			t.Errorf("%s is exported but not in Names()", name)
		}
	}
}

func TestNilRecorderRecordsNothing(t *testing.T) {
	var r *Recorder
	r.Start("x", "y")
	w := r.Row("a", true)
	w.Begin()
	w.Observe(rec(nil))
	w.End()
	if fams := r.Gather(); fams != nil {
		t.Errorf("a nil recorder gathers %v", fams)
	}
}

func TestLabelsAreChecked(t *testing.T) {
	for _, bad := range []string{"row", "le", "run_id", "2shard", "sh-ard"} {
		if _, err := New(Options{Labels: map[string]string{bad: "x"}}); err == nil {
			t.Errorf("label %q accepted", bad)
		}
	}
}

func TestHealthAndListen(t *testing.T) {
	r, _ := New(Options{})
	if _, err := Listen("localhost", r.Handler()); err == nil {
		t.Error("an address without a port was accepted")
	}
	s, err := Listen("127.0.0.1:0", r.Handler())
	if err != nil {
		t.Fatal(err)
	}
	u := strings.TrimSuffix(s.URL(), "/metrics")
	resp, err := http.Get(u + "/health")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok\n" {
		t.Errorf("/health: %d %q", resp.StatusCode, b)
	}
	if err := s.Close(0); err != nil {
		t.Error(err)
	}
	if _, err := (&http.Client{Timeout: time.Second}).Get(u + "/health"); err == nil {
		t.Error("still serving after Close")
	}
}

// TestObserveAllocatesNothing: the record path of every request pays no
// allocation, however many tokens the request streamed.
func TestObserveAllocatesNothing(t *testing.T) {
	r, _ := New(Options{})
	w := r.Row("r", true)
	ok := rec(func(x *metrics.Record) {
		x.Events = make([]int64, 2000)
		for i := range x.Events {
			x.Events[i] = int64(i) * 7e6
		}
	})
	failed := rec(func(x *metrics.Record) { x.Error = &metrics.Error{Class: metrics.ErrReset} })
	if n := testing.AllocsPerRun(100, func() {
		w.Begin()
		w.Observe(ok)
		w.Observe(failed)
		w.End()
	}); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
}

// TestConcurrentObservationsAddUp: requests recorded from many goroutines
// while Prometheus scrapes are all counted, and every scrape parses.
func TestConcurrentObservationsAddUp(t *testing.T) {
	r, _ := New(Options{})
	const workers, each = 8, 200
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := r.Row(fmt.Sprintf("row%d", g%3), true)
			for range each {
				w.Begin()
				w.Observe(rec(nil))
				w.End()
			}
		}()
	}
	for range 5 {
		scrape(t, r.Handler())
	}
	wg.Wait()
	fams := scrape(t, r.Handler())
	total := 0.0
	for _, m := range series(fams, MetricCompleted, map[string]string{"outcome": "ok"}) {
		total += m.Counter.GetValue()
	}
	if total != workers*each {
		t.Errorf("%v requests counted, want %d", total, workers*each)
	}
	for _, m := range series(fams, MetricTTFT, nil) {
		h := m.Histogram
		if last := h.Bucket[len(h.Bucket)-1].GetCumulativeCount(); last > h.GetSampleCount() {
			t.Errorf("a bucket holds %d of %d observations", last, h.GetSampleCount())
		}
	}
}
