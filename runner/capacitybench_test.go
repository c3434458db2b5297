package runner

import (
	"fmt"
	"math"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
)

// Holding a schedule means both of what validity's dispatch_lag check asks
// (the goals for the open loop): every request sent within 1 ms of
// its time at p99, and the row dispatched at its schedule's rate to within
// 1%.
const (
	capacityLagMS     = 1.0
	capacityRateError = 0.01
)

// holds says whether a row kept to its schedule, and the achieved rate's
// error against the schedule's.
func holds(sc metrics.SelfCheck) (bool, float64) {
	if sc.ScheduledRate <= 0 || sc.AchievedRate <= 0 {
		return false, math.NaN()
	}
	e := sc.AchievedRate/sc.ScheduledRate - 1
	return sc.DispatchLag.P99 <= capacityLagMS && math.Abs(e) <= capacityRateError, e
}

// BenchmarkPoissonCapacity finds the highest Poisson rate the open loop
// holds on this machine: p99 dispatch lag at most 1 ms and the achieved
// rate within 1% of the schedule's, against internal/cheapsse in another
// process with 4-token outputs. It doubles the rate from 500 req/s until a
// step fails, then halves the interval between the last rate held and the
// first missed three times (geometrically), each step a row of about two
// seconds after 200 warmup requests. It prints every step and reports the
// highest rate held as sustained-req/s: a figure of the machine and the
// client together, for comparing the client's versions on one machine,
// and a ceiling to keep real runs below; 0 when not even 500 req/s held.
// Bounded to about a minute.
func BenchmarkPoissonCapacity(b *testing.B) {
	url, _ := serverProcess(b, cheapServer, "")
	const stepSeconds = 2
	step := func(rate float64) bool {
		n := int(math.Max(1000, stepSeconds*rate))
		rs := runRowAgainst(b, url, fmt.Sprintf(`{id: c, warmup: 200, requests: %d, rate: {per_second: %.0f, arrival: poisson}, input_tokens: 16, output_tokens: 4, body: {ignore_eos: true}}`, n, rate))
		sc := rs.SelfCheck
		ok, e := holds(sc)
		verdict := "held"
		if !ok {
			verdict = "missed"
		}
		b.Logf("%6.0f req/s: achieved %7.0f (%+.2f%%), lag p50 %.3f p90 %.3f p99 %.3f ms, client CPU %.0f%% of %d cores: %s",
			rate, sc.AchievedRate, 100*e, sc.DispatchLag.P50, sc.DispatchLag.P90, sc.DispatchLag.P99, 100*sc.ClientCPU, sc.Cores, verdict)
		return ok
	}
	var sustained float64
	for b.Loop() {
		lo, hi := 0.0, 0.0
		for rate := 500.0; rate <= 64000; rate *= 2 {
			if !step(rate) {
				hi = rate
				break
			}
			lo = rate
		}
		for i := 0; i < 3 && lo > 0 && hi > 0; i++ {
			mid := math.Sqrt(lo * hi)
			if step(mid) {
				lo = mid
			} else {
				hi = mid
			}
		}
		sustained = lo
	}
	b.ReportMetric(sustained, "sustained-req/s")
}
