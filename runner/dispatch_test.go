package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/infermatrix/infermatrix/internal/cheapsse"
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
