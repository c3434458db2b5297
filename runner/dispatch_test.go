package runner

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/internal/cheapsse"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/validity"
)

// TestRowBeyondTheClientIsInvalid runs, in real time, a row no client can
// carry: 100 requests scheduled within 0.1 ms, each a new connection. The
// last leave tens of milliseconds late (16 ms at the least seen here, on
// a loaded two-core machine without the race detector; hundreds with
// it), far beyond the 1 ms limit, and the dispatched rate falls short of
// the schedule's by far more than 1%. The row must be invalid by
// dispatch_lag, its reason must say how far the client got (achieved
// against scheduled rate), and the self-check must call the client the
// bottleneck.
func TestRowBeyondTheClientIsInvalid(t *testing.T) {
	srv, err := cheapsse.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	p := plan(t, fmt.Sprintf(`server: {urls: [%q]}
rows:
  - {id: over, requests: 100, rate: {per_second: 1000000, arrival: constant}, input_tokens: 200, output_tokens: 1, body: {ignore_eos: true}}
`, srv.URL))
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	rs := res.Summary.Rows[0]
	sc := rs.SelfCheck
	if rs.Requests.Sent != 100 || rs.Requests.Failed > 0 {
		t.Fatalf("requests %+v; want 100 sent, none failed", rs.Requests)
	}
	t.Logf("dispatched at %.0f req/s against %.0f scheduled; lag p50 %.2f p99 %.2f ms", sc.AchievedRate, sc.ScheduledRate, sc.DispatchLag.P50, sc.DispatchLag.P99)
	if short, behind := sc.DispatchShortfall(); !behind || short < 0.5 || !sc.ClientBound {
		t.Errorf("dispatched at %g req/s against %g scheduled: shortfall %g, behind %v, client bound %v; want far behind and client bound",
			sc.AchievedRate, sc.ScheduledRate, short, behind, sc.ClientBound)
	}
	v := validity.Row(validity.Input{Row: p.Row("over"), Summary: &rs, Config: p.Validity})
	var reason *validity.Reason
	for i, r := range v.Reasons {
		if r.Check == validity.DispatchLag {
			reason = &v.Reasons[i]
		}
	}
	if v.Valid || reason == nil {
		t.Fatalf("verdict %+v; want invalid by %s", v, validity.DispatchLag)
	}
	howFar := regexp.MustCompile(`it dispatched [0-9.]+ req/s against the schedule's [0-9.]+ req/s \([0-9.]+% of it\)`)
	if !howFar.MatchString(reason.Message) || reason.Fix == "" {
		t.Errorf("reason %+v; want it to say %q, and a fix", reason, howFar)
	}
}

// TestOpenLoopScheduleStartsWhenReady: an open loop's schedule starts when
// its first request is ready to go, not at the row's start. Between the
// two, here, is a first telemetry scrape that takes 300 ms (a big /metrics
// page from a busy server): on the row's clock the first 30 arrivals
// would be due before anything could be sent, leave late in one burst,
// and fail the row's dispatch_lag check for a delay that is not the
// client falling behind.
func TestOpenLoopScheduleStartsWhenReady(t *testing.T) {
	inst := startPreset(t, "tiny-fast")
	const scrape = 300 * time.Millisecond
	var scrapes atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" && scrapes.Add(1) == 1 {
			time.Sleep(scrape)
		}
		inst.Server.ServeHTTP(w, r)
	}))
	defer front.Close()
	dir := t.TempDir()
	p := planIn(t, dir, `server: {urls: [`+front.URL+`/v1]}
telemetry: {interval: 10s}
rows: [{id: a, requests: 40, rate: {per_second: 100}, input_tokens: 16, output_tokens: 2}]
`, nil)
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(dir, "run")})
	if err != nil {
		t.Fatal(err)
	}
	if scrapes.Load() == 0 {
		t.Fatal("no scrape: the test measures nothing")
	}
	var worst int64
	var first metrics.Record
	for _, r := range records(t, res.Dir, "a") {
		if r.Seq == 0 {
			first = r
		}
		worst = max(worst, r.StartNS-r.QueueNS-r.ScheduledNS)
	}
	if first.StartNS < scrape.Nanoseconds() {
		t.Fatalf("the first request started %v into the row, before the first scrape ended", time.Duration(first.StartNS))
	}
	if at := res.Summary.Row("a").ScheduleStartNS; at < scrape.Nanoseconds() || at > first.ScheduledNS {
		t.Errorf("schedule_start_ns %v; want after the scrape's %v and by the first arrival's %v", time.Duration(at), scrape, time.Duration(first.ScheduledNS))
	}
	// Tens of ms would be the machine; the scrape's 300 ms, the schedule
	// started before the client was ready.
	if worst > (scrape / 3).Nanoseconds() {
		t.Errorf("worst dispatch lag %v; the schedule began before the first scrape ended", time.Duration(worst))
	}
}
