package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/sim"
)

// TestTimingMatchesGroundTruth checks the measurements against the server's
// own log of when it flushed every token: each event the client stamps, and
// so TTFT, ITL, TPOT and E2E, must agree with the server's flush times to
// within a millisecond (p99 over every token), and never precede them.
func TestTimingMatchesGroundTruth(t *testing.T) {
	var truth bytes.Buffer
	var mu sync.Mutex
	inst, err := sim.Start(sim.Config{TTFT: 5 * time.Millisecond, ITL: 2 * time.Millisecond,
		GroundTruth: lockedBuffer{&mu, &truth}})
	if err != nil {
		t.Fatal(err)
	}
	c := testClient(t, "chat")
	c.http = &http.Client{Transport: newTransport(16)}
	const streams, out = 10, 40
	// The bound is a millisecond; the race detector slows the client
	// several times over, and gets three.
	limit := 1.0
	if raceEnabled {
		limit = 3
	}
	recs := make([]*metrics.Record, streams)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			rec := &metrics.Record{ID: fmt.Sprintf("t-%d", i), Stream: true}
			c.do(context.Background(), &call{url: inst.BaseURL, body: streamBody(out), rec: rec})
			recs[i] = rec
		})
	}
	wg.Wait()
	if err := inst.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	lines := map[string]truthLine{}
	for _, l := range bytes.Split(bytes.TrimSpace(truth.Bytes()), []byte("\n")) {
		var tl truthLine
		if err := json.Unmarshal(l, &tl); err != nil {
			t.Fatal(err)
		}
		lines[tl.ID] = tl
	}
	mu.Unlock()

	var errs []float64
	for _, rec := range recs {
		if rec.Error != nil {
			t.Fatalf("%s: %+v", rec.ID, rec.Error)
		}
		wall := make([]int64, len(rec.Events))
		for i, e := range rec.Events {
			wall[i] = rec.StartUnixNS + e
		}
		e := timingErrors(t, lines, rec.ResponseID, wall)
		errs = append(errs, e...)
		// The derived metrics against the truth. TTFT counts from the
		// client's start (connection setup and the request's trip
		// included, as the user waits for them), so its truth is the
		// server's first flush less the client's start, on the shared
		// wall clock.
		tl := lines[rec.ResponseID]
		trueTTFT := float64(tl.ArrivalUnixNs+tl.FlushNs[0]-rec.StartUnixNS) / 1e6
		clientTTFT := float64(rec.FirstTokenNS) / 1e6
		if d := clientTTFT - trueTTFT; d < -0.05 || d > limit {
			t.Errorf("%s: TTFT %.3f ms, truth %.3f ms", rec.ID, clientTTFT, trueTTFT)
		}
		serverTPOT := float64(tl.FlushNs[out-1]-tl.FlushNs[0]) / 1e6 / (out - 1)
		if tpot, ok := rec.TPOTms(); !ok || tpot-serverTPOT < -limit || tpot-serverTPOT > limit {
			t.Errorf("%s: TPOT %.3f ms (%v), server's %.3f ms", rec.ID, tpot, ok, serverTPOT)
		}
	}
	slices.Sort(errs)
	p50, p99 := errs[len(errs)/2], errs[len(errs)*99/100]
	t.Logf("client stamp - server flush over %d tokens: min %.3f ms, p50 %.3f ms, p99 %.3f ms, max %.3f ms", len(errs), errs[0], p50, p99, errs[len(errs)-1])
	// The clocks are the same machine's wall clock; a stamp before the
	// flush beyond clock noise would mean the stamp is not of the read.
	if errs[0] < -0.05 {
		t.Errorf("a token stamped %.3f ms before the server flushed it", errs[0])
	}
	if p99 > limit {
		t.Errorf("p99 stamp error %.3f ms, want at most %g ms", p99, limit)
	}
}

type lockedBuffer struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (l lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
