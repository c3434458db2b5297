package engine

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// publishedQwen is the published vLLM 0.11 measurement of Qwen3-0.6B on
// 8×H200 (ISL 1000, OSL 500, streaming chat, closed-loop concurrency),
// as far as this repository holds it: throughput at every concurrency and
// ITL at c=100 exactly (issue 3); mean TTFT at c=10 and c=200 and the c=100
// shapes (TTFT p99/p50, per-request ITL p99/p50) as issue 14 quotes them.
// Per-user speed is not quoted: it is throughput ÷ users, which a closed
// loop with no think time makes it (Little's law). Where a cell is not
// known, ttftLo..ttftHi is the range issue 14 gives for the whole table.
// docs/simulator.md prints the same table beside the simulator's figures.
var publishedQwen = []struct {
	users          int
	throughput     float64 // output tokens/s
	ttft           float64 // mean, ms; 0 when only the range is known
	ttftLo, ttftHi float64 // ms
}{
	{10, 3045, 250, 0, 0},
	{50, 12890, 0, 250, 420},
	{100, 22521, 0, 250, 420},
	{200, 35999, 420, 0, 0},
}

const (
	publishedITL100        = 3.57 // ms, mean ITL at c=100
	publishedTTFTTail100   = 2.8  // TTFT p99 ÷ p50 at c=100
	publishedTPOTSpread100 = 1.66 // per-request TPOT p99 ÷ p50 at c=100
)

// TestCalibrationQwen3H200 runs the published table's workload on the
// virtual clock on the qwen3-0.6b-8xh200 preset and requires total and per-user output
// tokens/s within ±15%, mean TTFT within ±25% (of the cell, or of the
// published range where the cell is not known), ITL at c=100 within ±15%
// and the c=100 shapes (TTFT p99/p50, per-request TPOT p99/p50) within
// ±30%. The published c=500 row is a burst, not a steady state (issue 14):
// TestCalibrationQwen3H200Burst500 compares it as one.
func TestCalibrationQwen3H200(t *testing.T) {
	p, _ := LookupPreset("qwen3-0.6b-8xh200")
	cfg := p.Config
	window := 60 * time.Second
	if testing.Short() || raceEnabled {
		window = 30 * time.Second
	}
	check := func(what string, got, want, tol float64) {
		t.Helper()
		dev := got/want - 1
		mark := ""
		if math.Abs(dev) > tol {
			mark = "  OUT OF TOLERANCE"
			t.Errorf("%s: %.4g, published %.4g: %+.1f%%, beyond ±%.0f%%", what, got, want, 100*dev, 100*tol)
		}
		t.Logf("%-34s sim %9.4g  published %9.4g  %+6.1f%%%s", what, got, want, 100*dev, mark)
	}
	for _, row := range publishedQwen {
		r := closedLoop(t, cfg, row.users, 1000, 500, 15*time.Second, window)
		c := fmt.Sprintf("c=%d ", row.users)
		check(c+"output tok/s", r.throughput, row.throughput, 0.15)
		check(c+"per-user output tok/s", r.perUserMean(), row.throughput/float64(row.users), 0.15)
		ttft := ms(r.ttft)
		if row.ttft > 0 {
			check(c+"mean TTFT ms", ttft, row.ttft, 0.25)
		} else {
			t.Logf("%-34s sim %9.4g  published range %g–%g ms", c+"mean TTFT ms", ttft, row.ttftLo, row.ttftHi)
			if ttft < 0.75*row.ttftLo || ttft > 1.25*row.ttftHi {
				t.Errorf("%smean TTFT %.1f ms is beyond ±25%% of the published range %g–%g ms", c, ttft, row.ttftLo, row.ttftHi)
			}
		}
		if row.users == 100 {
			check(c+"mean ITL ms", ms(r.itl), publishedITL100, 0.15)
			check(c+"TTFT p99/p50", ratio(r.ttfts), publishedTTFTTail100, 0.30)
			check(c+"per-request TPOT p99/p50", ratio(r.tpots), publishedTPOTSpread100, 0.30)
		}
	}
}

func ratio(xs []time.Duration) float64 {
	return float64(quantile(xs, 0.99)) / float64(quantile(xs, 0.5))
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// publishedQwenBurst500 is the published table's c=500 row: 29,836 output
// tokens/s (issue 3). Issue 14 reads it as a burst of two requests per user
// (1,000 prompts at --max-concurrency 500), measured over the whole run,
// ramp-up and drain included, not as a steady state.
const publishedQwenBurst500 = 29836

// TestCalibrationQwen3H200Burst500 runs the published c=500 row as the burst
// it is: 500 users each sending two requests back to back on the virtual
// clock, output tokens over the time from the first send to the last token.
// The tolerance is ±15%, as for the steady-state rows.
func TestCalibrationQwen3H200Burst500(t *testing.T) {
	p, _ := LookupPreset("qwen3-0.6b-8xh200")
	r := burst(t, p.Config, 500, 2, 1000, 500)
	dev := r.throughput/publishedQwenBurst500 - 1
	t.Logf("c=500 burst output tok/s  sim %.0f (%d tokens in %.2f s, mean TTFT %.0f ms)  published %d  %+.1f%%",
		r.throughput, r.tokens, r.duration.Seconds(), ms(r.ttft), publishedQwenBurst500, 100*dev)
	if math.Abs(dev) > 0.15 {
		t.Errorf("c=500 burst: %.0f output tok/s, published %d: %+.1f%%, beyond ±15%%", r.throughput, publishedQwenBurst500, 100*dev)
	}
}
