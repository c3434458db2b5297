package validity

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

// healthy is a closed-loop row of 8 users that a careful run would call
// valid: 400 requests over 25 s of 0.5 s each, 8 in flight, a quiet
// client, no errors, no cache hits.
func healthy() (*schema.PlannedRow, *metrics.RowSummary) {
	row := &schema.PlannedRow{ID: "r", Base: "r", Load: schema.LoadPlan{Mode: schema.ModeConcurrency, Concurrency: 8},
		UniquePrompts: schema.UniquePerRun}
	rs := &metrics.RowSummary{ID: "r", Base: "r", Status: metrics.RowComplete, WindowS: 25}
	rs.Requests = metrics.Requests{Sent: 400, Completed: 400}
	n := make([]float64, 400)
	for i := range n {
		n[i] = 100 + float64(i%10)
	}
	rs.Metrics.TTFT = metrics.NewDist(slices.Clone(n), nil)
	rs.Metrics.TPOT = metrics.NewDist(slices.Repeat([]float64{7}, 400), nil)
	rs.Metrics.ITL = metrics.NewDist(slices.Repeat([]float64{7}, 400*63), nil)
	rs.Metrics.E2E = metrics.NewDist(slices.Repeat([]float64{500}, 400), nil)
	rs.Throughput.RequestsPerS = 16
	rs.InFlight = metrics.InFlight{Mean: 7.8, Max: 8}
	rs.SelfCheck = metrics.SelfCheck{ClientCPU: 0.2, Cores: 2, TimerLatenessP99MS: 0.3, Gaps: 400 * 63, ZeroGaps: 10,
		ZeroGapShare: 10.0 / (400 * 63), SimFlushes: 25000, SimLatenessP99MS: 0.25, StampErrors: 25000, StampErrorP99MS: 0.2}
	rs.Cache = metrics.Cache{Requests: 400, PromptTokens: 400 * 256, CachedTokens: 400 * 16, HitRatio: 1.0 / 16}
	return row, rs
}

func rules(t *testing.T, expects ...string) []schema.AcceptanceRule {
	t.Helper()
	var out []schema.AcceptanceRule
	for _, e := range expects {
		p, probs := metrics.CompileRow(e)
		if len(probs) > 0 {
			t.Fatalf("%s: %+v", e, probs)
		}
		out = append(out, schema.AcceptanceRule{Name: "a", Program: p})
	}
	return out
}

// TestChecksBothWays takes a healthy row, which must be valid, and breaks
// it one way at a time: each break must make it invalid through exactly
// the check that watches for it, and ignoring that check must make it
// valid again.
func TestChecksBothWays(t *testing.T) {
	ruled := rules(t, "ttft.p95 < 1000 && tpot.p99 < 40")
	row, rs := healthy()
	if v := Row(Input{Row: row, Summary: rs, Rules: ruled, Config: schema.DefaultValidity}); !v.Valid {
		t.Fatalf("the healthy row is invalid: %+v", v.Reasons)
	}
	tests := []struct {
		check string
		rules []schema.AcceptanceRule
		brk   func(*schema.PlannedRow, *metrics.RowSummary)
		want  string // in the message
	}{
		{ClientCPU, ruled, func(_ *schema.PlannedRow, rs *metrics.RowSummary) { rs.SelfCheck.ClientCPU = 0.93 }, "93% of its 2 cores"},
		// Three requests the client could not send (too few for the
		// errors check, and a rule that judges errors would have blamed
		// the server for them).
		{ClientFiles, rules(t, "errors.total == 0"), func(_ *schema.PlannedRow, rs *metrics.RowSummary) {
			rs.SelfCheck.ClientFileErrors = 3
			rs.Requests.Failed, rs.Errors = 3, metrics.Errors{Total: 3, Ratio: 3.0 / 400, ByClass: map[string]int{metrics.ErrConnect: 3}}
		}, "3 measured requests failed in the client before they left it"},
		{DispatchLag, ruled, func(row *schema.PlannedRow, rs *metrics.RowSummary) {
			// 10 req/s: the limit is a tenth of the 100 ms gap.
			row.Load = schema.LoadPlan{Mode: schema.ModeRate, Rate: 10}
			rs.SelfCheck.RequestedRate, rs.SelfCheck.ScheduledRate, rs.SelfCheck.AchievedRate = 10, 10, 10
			rs.SelfCheck.DispatchLag = metrics.NewDist([]float64{0.1, 0.2, 12}, []float64{99})
		}, "limit 10.0 ms"},
		{DispatchLag, ruled, func(row *schema.PlannedRow, rs *metrics.RowSummary) {
			// Every request on time but the dispatcher slower than the
			// schedule: 1,000 requests 2% short is 20 ms behind by the
			// last, which the p99 lag does not see and the load check's
			// ±10% lets through.
			row.Load = schema.LoadPlan{Mode: schema.ModeRate, Rate: 1000}
			rs.SelfCheck.RequestedRate, rs.SelfCheck.ScheduledRate, rs.SelfCheck.AchievedRate = 1000, 1000, 980
			rs.SelfCheck.DispatchLag = metrics.NewDist(slices.Repeat([]float64{0.2}, 1000), []float64{99})
		}, "2.00% short of the schedule's rate (limit 1%); it dispatched 980 req/s against the schedule's 1000 req/s (98.0% of it)"},
		{ClientStall, ruled, func(_ *schema.PlannedRow, rs *metrics.RowSummary) { rs.SelfCheck.TimerLatenessP99MS = 7 }, "7.00 ms late"},
		{Bursts, ruled, func(_ *schema.PlannedRow, rs *metrics.RowSummary) {
			rs.SelfCheck.ZeroGaps = rs.SelfCheck.Gaps / 5
			rs.SelfCheck.ZeroGapShare = 0.2
		}, "20.0% of the gaps"},
		{StampError, ruled, func(_ *schema.PlannedRow, rs *metrics.RowSummary) { rs.SelfCheck.StampErrorP99MS = 1.5 }, "by 1.50 ms at p99"},
		{Simulator, ruled, func(_ *schema.PlannedRow, rs *metrics.RowSummary) { rs.SelfCheck.SimLatenessP99MS = 10 }, "10.0 ms late at p99"},
		{Load, ruled, func(_ *schema.PlannedRow, rs *metrics.RowSummary) { rs.InFlight = metrics.InFlight{Mean: 5.2, Max: 8} }, "5.20 requests in flight"},
		{Load, ruled, func(row *schema.PlannedRow, rs *metrics.RowSummary) {
			row.Load = schema.LoadPlan{Mode: schema.ModeRate, Rate: 10}
			rs.SelfCheck.RequestedRate, rs.SelfCheck.ScheduledRate, rs.SelfCheck.AchievedRate = 10, 8.5, 8.5
		}, "8.50 req/s against asked for 10.0 req/s"},
		{Samples, ruled, func(_ *schema.PlannedRow, rs *metrics.RowSummary) {
			rs.Metrics.TPOT = metrics.NewDist(slices.Repeat([]float64{7}, 300), nil)
		}, "too few samples for tpot.p99: 300, and a p99 needs at least 368"},
		{Samples, rules(t, "p(ttft, 99.9) < 2000"), func(*schema.PlannedRow, *metrics.RowSummary) {}, "ttft.p99.9: 400"},
		{SteadyState, ruled, func(_ *schema.PlannedRow, rs *metrics.RowSummary) { rs.WindowS = 2 }, "lasted 4.0 median end-to-end latencies"},
		{SteadyState, ruled, func(row *schema.PlannedRow, rs *metrics.RowSummary) {
			row.Load = schema.LoadPlan{Mode: schema.ModeRate, Rate: 2}
			rs.SelfCheck.RequestedRate, rs.SelfCheck.ScheduledRate, rs.SelfCheck.AchievedRate = 2, 2, 2
			rs.WindowS = 2
		}, "lasted 4.0 median end-to-end latencies"},
		{Errors, ruled, func(_ *schema.PlannedRow, rs *metrics.RowSummary) {
			rs.Requests.Failed, rs.Errors = 8, metrics.Errors{Total: 8, Ratio: 0.02}
		}, "2.0% of requests failed"},
		{Cache, ruled, func(_ *schema.PlannedRow, rs *metrics.RowSummary) {
			rs.Cache.UnexpectedTokens, rs.Cache.UnexpectedRatio, rs.Cache.UnexpectedRequests = 400*200, 200.0/256, 400
		}, "cache contamination: 78.1%"},
	}
	for _, tt := range tests {
		t.Run(tt.check, func(t *testing.T) {
			row, rs := healthy()
			tt.brk(row, rs)
			v := Row(Input{Row: row, Summary: rs, Rules: tt.rules, Config: schema.DefaultValidity})
			if v.Valid || len(v.Reasons) != 1 || v.Reasons[0].Check != tt.check {
				t.Fatalf("verdict %+v; want invalid by %s alone", v, tt.check)
			}
			if r := v.Reasons[0]; !strings.Contains(r.Message, tt.want) || r.Fix == "" {
				t.Errorf("reason %+v; want a message with %q and a fix", r, tt.want)
			}
			cfg := schema.DefaultValidity
			cfg.Ignore = []string{tt.check}
			if v := Row(Input{Row: row, Summary: rs, Rules: tt.rules, Config: cfg}); !v.Valid || !slices.Equal(v.Ignored, cfg.Ignore) {
				t.Errorf("with %s ignored: %+v; want valid, the check listed as ignored", tt.check, v)
			}
		})
	}
}

// TestErrorsJudgedByTheRule: a rule that reads errors judges them itself,
// so failures do not make the row invalid; one that does not, does.
func TestErrorsJudgedByTheRule(t *testing.T) {
	for _, tt := range []struct {
		expect string
		valid  bool
	}{
		{"ttft.p95 < 1000", false},
		{"ttft.p95 < 1000 && errors.total == 0", true},
		{"ttft.p95 < 1000 && errors.ratio < 0.05", true},
		{"goodput.ratio > 0.9", true},
		{"ttft.p95 < 1000 && requests.failed < 3", true},
		{"ttft.p95 < 1000 && requests.sent > 10", false},
	} {
		row, rs := healthy()
		rs.Requests.Failed, rs.Errors = 40, metrics.Errors{Total: 40, Ratio: 0.1}
		v := Row(Input{Row: row, Summary: rs, Rules: rules(t, tt.expect), Config: schema.DefaultValidity})
		if v.Valid != tt.valid {
			t.Errorf("%s with 10%% errors: valid %v (%+v); want %v", tt.expect, v.Valid, v.Reasons, tt.valid)
		}
	}
}

// TestCacheCheck: contamination needs the server's counts; a row that
// sends its prompts as written counts every hit as intended; a row
// without a server count says the check could not be made.
func TestCacheCheck(t *testing.T) {
	row, rs := healthy()
	rs.Cache.UnexpectedRatio = 0.5
	row.UniquePrompts = schema.UniqueOff
	v := Row(Input{Row: row, Summary: rs, Config: schema.DefaultValidity})
	if !v.Valid || len(v.Notes) != 1 || !strings.Contains(v.Notes[0], "as intended") {
		t.Errorf("unique_prompts off: %+v; want valid with a note", v)
	}
	row, rs = healthy()
	rs.Cache = metrics.Cache{}
	v = Row(Input{Row: row, Summary: rs, Config: schema.DefaultValidity})
	if !v.Valid || len(v.Notes) != 1 || !strings.Contains(v.Notes[0], "did not report cached prompt tokens") {
		t.Errorf("no cache counts: %+v; want valid with a note that the check could not be made", v)
	}
	// At the limit is still valid; beyond it is not.
	row, rs = healthy()
	rs.Cache.UnexpectedRatio = schema.DefaultValidity.CacheRatio
	if v := Row(Input{Row: row, Summary: rs, Config: schema.DefaultValidity}); !v.Valid {
		t.Errorf("at the limit: %+v", v.Reasons)
	}
}

// TestTimingLimitsScaleWithTheTokenGap: a timing error is judged against
// a tenth of the row's median token gap when that exceeds the floor.
func TestTimingLimitsScaleWithTheTokenGap(t *testing.T) {
	row, rs := healthy()
	rs.Metrics.ITL = metrics.NewDist(slices.Repeat([]float64{80}, 1000), nil) // a slow model: 80 ms a token
	rs.Metrics.E2E = metrics.NewDist(slices.Repeat([]float64{5000}, 400), nil)
	rs.WindowS = 60
	rs.SelfCheck.TimerLatenessP99MS = 7.5 // over the 5 ms floor, under 8 ms, a tenth of 80
	if v := Row(Input{Row: row, Summary: rs, Config: schema.DefaultValidity}); !v.Valid {
		t.Errorf("7.5 ms stalls against 80 ms gaps: %+v; want valid", v.Reasons)
	}
	rs.SelfCheck.TimerLatenessP99MS = 8.5
	v := Row(Input{Row: row, Summary: rs, Config: schema.DefaultValidity})
	if v.Valid || !strings.Contains(v.Reasons[0].Message, "a tenth of the median token gap") {
		t.Errorf("8.5 ms stalls against 80 ms gaps: %+v; want invalid, naming the scaled limit", v)
	}
}

// TestMinSamples pins the rule and its property: the chance that n
// samples all fall below the true q-th percentile is under 2.5% at n and
// not at n-1.
func TestMinSamples(t *testing.T) {
	for q, want := range map[float64]int{50: 6, 90: 36, 95: 72, 99: 368, 99.9: 3688} {
		n := MinSamples(q)
		if n != want {
			t.Errorf("MinSamples(%v) = %d; want %d", q, n, want)
		}
		if p := math.Pow(q/100, float64(n)); p > 0.025 {
			t.Errorf("q=%v n=%d: P(all below) = %.4f > 0.025", q, n, p)
		}
		if p := math.Pow(q/100, float64(n-1)); p <= 0.025 {
			t.Errorf("q=%v n-1=%d already suffices (%.4f)", q, n-1, p)
		}
	}
}

// TestOneUserNeedsNoSteadyState: a closed loop of one user has no start-up
// wave or drain; three long requests are a valid row without rules.
func TestOneUserNeedsNoSteadyState(t *testing.T) {
	row, rs := healthy()
	row.Load.Concurrency = 1
	rs.InFlight = metrics.InFlight{Mean: 1, Max: 1}
	rs.WindowS = 2
	if v := Row(Input{Row: row, Summary: rs, Config: schema.DefaultValidity}); !v.Valid {
		t.Errorf("one user: %+v", v.Reasons)
	}
}

// TestInterruptedAndUnrun: an interrupted row is invalid whatever is
// ignored; a row that did not run has nothing to check.
func TestInterruptedAndUnrun(t *testing.T) {
	row, rs := healthy()
	rs.Status = metrics.RowInterrupted
	cfg := schema.DefaultValidity
	cfg.Ignore = Checks
	if v := Row(Input{Row: row, Summary: rs, Config: cfg}); v.Valid || v.Reasons[0].Check != Complete {
		t.Errorf("interrupted: %+v; want invalid by %s", v, Complete)
	}
	rs.Status = metrics.RowNotRun
	if v := Row(Input{Row: row, Summary: rs, Config: schema.DefaultValidity}); !v.Valid || len(v.Reasons) > 0 {
		t.Errorf("not run: %+v", v)
	}
}

// TestDispatchShortfallNeedsTime: on a short row a dispatched rate a
// little more than 1% short is one request late by less than the lag
// limit, which is not falling behind; the same shortfall over a long row
// is.
func TestDispatchShortfallNeedsTime(t *testing.T) {
	for _, tt := range []struct {
		n     int
		valid bool
	}{{5, true}, {500, false}} {
		row, rs := healthy()
		// 50 req/s: the lag limit is 2 ms. 1.2% short over 4 gaps is
		// about 1 ms, over 499 gaps about 121 ms.
		row.Load = schema.LoadPlan{Mode: schema.ModeRate, Rate: 50}
		rs.SelfCheck.RequestedRate, rs.SelfCheck.ScheduledRate, rs.SelfCheck.AchievedRate = 50, 50, 49.4
		rs.SelfCheck.DispatchLag = metrics.NewDist(slices.Repeat([]float64{0.2}, tt.n), []float64{99})
		v := Row(Input{Row: row, Summary: rs, Config: schema.DefaultValidity})
		if v.Valid != tt.valid {
			t.Errorf("%d requests 1.2%% short: valid %v (%+v); want %v", tt.n, v.Valid, v.Reasons, tt.valid)
		}
	}
}
