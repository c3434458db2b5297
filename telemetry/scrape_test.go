package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
)

// endpoints serves a vLLM exposition, a failing endpoint, one that never
// answers in time, and one whose answer is too big, on 127.0.0.1.
type endpoints struct {
	srv     *httptest.Server
	accepts atomic.Value
	auth    atomic.Value
	hits    atomic.Int64
}

func newEndpoints(t *testing.T) *endpoints {
	t.Helper()
	vllm, err := os.ReadFile(filepath.Join("testdata", "vllm.prom"))
	if err != nil {
		t.Fatal(err)
	}
	e := &endpoints{}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		e.hits.Add(1)
		e.accepts.Store(r.Header.Get("Accept"))
		e.auth.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(vllm)
	})
	mux.HandleFunc("/broken", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	})
	mux.HandleFunc("/garbage", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte("vllm:num_requests_running{ 3\n\x00"))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		// Answers only when the client gives up (or the test ends).
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		chunk := bytes.Repeat([]byte("# padding line\n"), 1<<16)
		for n := 0; n <= MaxBody; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}

// TestScraperRounds runs the scraper against four endpoints: the good one
// is read and mapped, the others are error samples, every sample reaches
// the sink in order and Stop returns them all, phases are stamped as set.
func TestScraperRounds(t *testing.T) {
	e := newEndpoints(t)
	targets := []Target{
		{URL: e.srv.URL + "/metrics", Kind: KindServer, Display: "vllm", Headers: map[string]string{"Authorization": "Bearer s3cret"}},
		{URL: e.srv.URL + "/broken", Kind: KindServer, Display: "broken"},
		{URL: e.srv.URL + "/slow", Kind: KindGPU, Display: "slow"},
		{URL: e.srv.URL + "/garbage", Kind: KindServer, Display: "garbage"},
	}
	var mu sync.Mutex
	var sunk []Sample
	loadSeen := make(chan struct{})
	var once sync.Once
	start := time.Now()
	s := Start(context.Background(), Options{
		Targets:  targets,
		Interval: 250 * time.Millisecond,
		Timeout:  200 * time.Millisecond,
		Start:    start,
		Sink: func(smp Sample) error {
			mu.Lock()
			sunk = append(sunk, smp)
			mu.Unlock()
			if smp.Phase == metrics.PhaseLoad {
				once.Do(func() { close(loadSeen) })
			}
			return nil
		},
	})
	// Start waited for round 0.
	mu.Lock()
	if len(sunk) != len(targets) {
		t.Fatalf("%d samples after Start, want the first round's %d", len(sunk), len(targets))
	}
	mu.Unlock()
	s.SetPhase(metrics.PhaseLoad)
	select {
	case <-loadSeen:
	case <-time.After(20 * time.Second):
		t.Fatal("no round after SetPhase")
	}
	s.SetPhase(metrics.PhaseDrain)
	all := s.Stop()
	if again := s.Stop(); len(again) != len(all) {
		t.Errorf("a second Stop returned %d samples, the first %d", len(again), len(all))
	}
	if s.Err() != nil {
		t.Error(s.Err())
	}

	mu.Lock()
	defer mu.Unlock()
	if len(all) != len(sunk) {
		t.Fatalf("Stop returned %d samples, the sink saw %d", len(all), len(sunk))
	}
	rounds := len(all) / len(targets)
	if rounds < 3 || len(all)%len(targets) != 0 {
		t.Fatalf("%d samples over %d targets", len(all), len(targets))
	}
	last := map[string]int64{}
	for i, smp := range all {
		if sunk[i].Target != smp.Target || sunk[i].TNS != smp.TNS {
			t.Fatalf("sample %d: the sink saw %s@%d, Stop returned %s@%d", i, sunk[i].Target, sunk[i].TNS, smp.Target, smp.TNS)
		}
		if want := targets[i%len(targets)].Display; smp.Target != want || smp.Round != i/len(targets) {
			t.Errorf("sample %d is %s round %d, want %s round %d", i, smp.Target, smp.Round, want, i/len(targets))
		}
		if prev, ok := last[smp.Target]; ok && smp.TNS < prev {
			t.Errorf("%s: t went back from %d to %d", smp.Target, prev, smp.TNS)
		}
		last[smp.Target] = smp.TNS
		if smp.TNS < 0 || smp.DurNS < 0 {
			t.Errorf("sample %d: t %d dur %d", i, smp.TNS, smp.DurNS)
		}
		switch smp.Target {
		case "vllm":
			if smp.Error != "" || smp.Mapping != "vllm" || len(smp.Series) == 0 || smp.Kind != KindServer {
				t.Errorf("vllm sample %+v", smp)
			}
		case "broken":
			if smp.Error != "HTTP 500 Internal Server Error" || len(smp.Series) != 0 {
				t.Errorf("broken sample error %q", smp.Error)
			}
		case "slow":
			if !strings.HasPrefix(smp.Error, "no answer within") || smp.Kind != KindGPU {
				t.Errorf("slow sample error %q", smp.Error)
			}
		case "garbage":
			if !strings.Contains(smp.Error, "could not be parsed") {
				t.Errorf("garbage sample error %q", smp.Error)
			}
		}
	}
	if all[0].Phase != metrics.PhaseBetween {
		t.Errorf("round 0 phase %q, want %q", all[0].Phase, metrics.PhaseBetween)
	}
	if p := all[len(all)-1].Phase; p != metrics.PhaseDrain {
		t.Errorf("the last round's phase %q, want %q", p, metrics.PhaseDrain)
	}
	if got := e.accepts.Load(); got != acceptHeader {
		t.Errorf("Accept %q", got)
	}
	if got := e.auth.Load(); got != "Bearer s3cret" {
		t.Errorf("Authorization %q, want the target's header", got)
	}

	// The samples reduce: the failing endpoints are notes, not errors.
	// Two of the three server endpoints never answered, so no figure
	// summed over them is given; the good one alone is read in full.
	// The window: from the first round to the last, whose samples of the
	// targets, taken at once, start in any order.
	in := ReduceInput{WindowStartNS: all[0].TNS, WindowEndNS: all[len(all)-len(targets)].TNS}
	for _, smp := range all[len(all)-len(targets):] {
		in.WindowEndNS = min(in.WindowEndNS, smp.TNS)
	}
	for _, smp := range all[:len(targets)] {
		in.WindowStartNS = max(in.WindowStartNS, smp.TNS)
	}
	st, gpu, _ := Reduce(all, in)
	if st == nil || st.Mapping != "vllm" || st.NumRequestsRunning != nil || st.Failed != 2*rounds ||
		!hasNote(st.Notes, "broken: every scrape failed") {
		t.Errorf("server %+v", st)
	}
	if gpu == nil || gpu.Failed != rounds || gpu.GPUs != 0 {
		t.Errorf("gpu %+v", gpu)
	}
	var good []Sample
	for _, smp := range all {
		if smp.Target == "vllm" {
			good = append(good, smp)
		}
	}
	st, _, _ = Reduce(good, in)
	if st.NumRequestsRunning == nil || st.NumRequestsRunning.Mean != 4 || st.PromptTokens == nil || *st.PromptTokens != 0 {
		t.Errorf("server %+v", st)
	}
	if len(st.Notes) != 0 {
		t.Errorf("notes %q about an endpoint that published everything", st.Notes)
	}
}

// TestScraperBoundsTheBody fails a scrape whose answer exceeds MaxBody.
func TestScraperBoundsTheBody(t *testing.T) {
	e := newEndpoints(t)
	s := Start(context.Background(), Options{
		Targets:  []Target{{URL: e.srv.URL + "/huge", Kind: KindServer}},
		Interval: time.Hour,
		Timeout:  20 * time.Second,
	})
	all := s.Stop()
	if len(all) != 2 {
		t.Fatalf("%d samples, want Start's and Stop's", len(all))
	}
	if !strings.Contains(all[0].Error, "larger than 16 MiB") {
		t.Errorf("error %q", all[0].Error)
	}
	if all[0].Target != e.srv.URL+"/huge" {
		t.Errorf("target recorded as %q, want the URL when no display is given", all[0].Target)
	}
}

// TestScraperAfterCancel still takes its last scrape when the run's context
// has ended, and a sink error stops the sink without stopping the scrapes.
func TestScraperAfterCancel(t *testing.T) {
	e := newEndpoints(t)
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	s := Start(ctx, Options{
		Targets:  []Target{{URL: e.srv.URL + "/metrics", Kind: KindServer, Display: "vllm"}},
		Interval: time.Hour,
		Sink: func(Sample) error {
			calls++
			return errors.New("disk full")
		},
	})
	cancel()
	all := s.Stop()
	if len(all) != 2 || all[1].Error != "" {
		t.Fatalf("samples %+v, want two good ones", all)
	}
	if calls != 1 || s.Err() == nil || !strings.Contains(s.Err().Error(), "disk full") {
		t.Errorf("sink called %d times, Err %v", calls, s.Err())
	}
}

// TestScraperWithoutTargets does nothing and returns nothing.
func TestScraperWithoutTargets(t *testing.T) {
	s := Start(context.Background(), Options{})
	s.SetPhase(metrics.PhaseLoad)
	if got := s.Stop(); len(got) != 0 {
		t.Errorf("%d samples", len(got))
	}
}

// TestSamplesRoundTrip writes samples as telemetry.jsonl lines and reads
// them back: +Inf buckets and NaN values survive JSON.
func TestSamplesRoundTrip(t *testing.T) {
	in := []Sample{
		fixture(t, "vllm.prom"),
		{TNS: 5, Target: "x", Kind: KindGPU, Error: "HTTP 404 Not Found"},
		sample(7, 3, "y", "vllm", gaugeSeries("vllm:kv_cache_usage_perc", nan())),
	}
	var buf bytes.Buffer
	for _, s := range in {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(append(b, '\n'))
	}
	if !strings.Contains(buf.String(), `"le":"+Inf"`) || !strings.Contains(buf.String(), `"value":"NaN"`) {
		t.Fatalf("non-finite values not spelled as strings:\n%.400s", buf.String())
	}
	out, err := ReadSamples(&buf)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(in)
	b, _ := json.Marshal(out)
	if !bytes.Equal(a, b) {
		t.Errorf("round trip differs:\n%s\n%s", a, b)
	}
	if _, err := ReadSamples(strings.NewReader("{\"t_ns\":1}\nnot json\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("error %v, want one naming line 2", err)
	}
}

// TestScraperRoundNow: Round takes a round between the interval's and has
// recorded it when it returns, as the runner needs after a row's warm
// prefixes; a stopped scraper takes none.
func TestScraperRoundNow(t *testing.T) {
	e := newEndpoints(t)
	s := Start(context.Background(), Options{
		Targets:  []Target{{URL: e.srv.URL + "/metrics", Kind: KindServer, Display: "vllm"}},
		Interval: time.Hour, // only Start's, Round's and Stop's rounds
		Start:    time.Now(),
	})
	s.SetPhase(metrics.PhasePrime)
	s.Round()
	s.SetPhase(metrics.PhaseLoad)
	all := s.Stop()
	s.Round()
	if again := s.Stop(); len(all) != 3 || len(again) != 3 {
		t.Fatalf("%d samples, %d after a Round once stopped; want Start's, Round's and Stop's: 3", len(all), len(again))
	}
	if all[1].Phase != metrics.PhasePrime || all[1].Round != 1 || all[1].Error != "" || all[1].TNS < all[0].TNS {
		t.Errorf("Round's sample %+v; want round 1, phase prime, after Start's", all[1])
	}
}
