// Package validity decides whether a row's figures can be trusted: whether
// the client measured the server rather than itself, whether the server saw
// the load the row says it offered, whether there are enough samples behind
// every percentile a rule judges, whether the window was a steady state,
// whether failures or a cache the row did not ask for shaped the numbers,
// and whether the built-in server kept to its own schedule.
//
// A row is valid, or invalid with every reason and what to do about it. An
// invalid row never passes its rules; a run passes only on valid rows
// (package reports). The checks read only a row's summary, its plan and the
// rules that judge it, so a run directory can be checked again long after
// the run. docs/validity.md explains each check and its default threshold.
package validity

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

// Check names, as the experiment's validity.ignore and the reports call
// them.
const (
	ClientCPU   = "client_cpu"
	ClientFiles = "client_files"
	DispatchLag = "dispatch_lag"
	ClientStall = "client_stall"
	Bursts      = "bursts"
	StampError  = "stamp_error"
	Simulator   = "simulator"
	Load        = "load"
	Samples     = "samples"
	SteadyState = "steady_state"
	Errors      = "errors"
	Cache       = "cache"
	// Complete is not a threshold and cannot be ignored: a row the run
	// was interrupted in has a partial window.
	Complete = "complete"
)

// Checks lists the checks in the order reports show them: the client's,
// then the load's, the samples', and what the server did.
var Checks = []string{ClientCPU, ClientFiles, DispatchLag, ClientStall, Bursts, StampError, Simulator, Load, Samples, SteadyState, Errors, Cache}

// Verdict is one row's validity.
type Verdict struct {
	Valid bool `json:"valid"`
	// Reasons are the failed checks, each with what to do about it.
	Reasons []Reason `json:"reasons,omitempty"`
	// Notes are what a reader should know that does not make the row
	// invalid: a check that could not be made, and why.
	Notes []string `json:"notes,omitempty"`
	// Ignored lists the checks the experiment switched off.
	Ignored []string `json:"ignored,omitempty"`
}

// Reason is one failed check.
type Reason struct {
	Check   string `json:"check"`
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

// Summary says it in one line: "valid", or the failed checks' names.
func (v Verdict) Summary() string {
	if v.Valid {
		return "valid"
	}
	// Each check once: a repeated row's trials, or a merged row's
	// shards, can fail the same one several times.
	var names []string
	for _, r := range v.Reasons {
		if !slices.Contains(names, r.Check) {
			names = append(names, r.Check)
		}
	}
	return "invalid: " + strings.Join(names, ", ")
}

// MinSamples is the fewest samples behind a q-th percentile (0 < q < 100)
// that the check accepts: the smallest n for which the chance that all n
// samples fall below the true percentile is under 2.5%, that is
// n ≥ ln(0.025) / ln(q/100). Below it the sample cannot bound the
// percentile from above even with its largest value: the 95%
// distribution-free confidence interval of the percentile (from the
// binomial law of the order statistics) reaches past the largest sample.
// p50 needs 6, p90 36, p95 72, p99 368, p99.9 3,688.
func MinSamples(q float64) int {
	if q <= 0 || q >= 100 {
		return 1
	}
	return int(math.Ceil(math.Log(0.025) / math.Log(q/100)))
}

// Input is what one row is checked on.
type Input struct {
	Row     *schema.PlannedRow
	Summary *metrics.RowSummary
	// Rules are the acceptance rules that judge the row (their
	// expressions decide which percentiles need samples, and whether
	// errors are judged by the rule itself).
	Rules  []schema.AcceptanceRule
	Config schema.ValidityPlan
}

// Row checks one row. A row that did not run, or failed to, is left to
// the judge (it has no figures to be valid or not): Check returns a valid
// verdict with a note.
//
// A repeated row is checked trial by trial (see trials).
func Row(in Input) Verdict {
	if in.Summary != nil && len(in.Summary.Trials) > 0 {
		return trials(in)
	}
	return check(in, checkAll)
}

// What check checks: everything (a row without repeat), what concerns one
// trial's measurement (everything but the samples), or what concerns the
// pooled figures of a repeated row (the samples, and whether it ran to
// the end).
const (
	checkAll = iota
	checkTrial
	checkPooled
)

func check(in Input, part int) Verdict {
	rs, row, cfg := in.Summary, in.Row, in.Config
	v := Verdict{Valid: true, Ignored: append([]string(nil), cfg.Ignore...)}
	if rs == nil || rs.Status == metrics.RowNotRun || rs.Status == metrics.RowFailed {
		v.Notes = append(v.Notes, "the row has no measurements to check")
		return v
	}
	fail := func(check, fix, format string, args ...any) {
		if check != Complete && cfg.Ignores(check) {
			return
		}
		v.Valid = false
		v.Reasons = append(v.Reasons, Reason{Check: check, Message: fmt.Sprintf(format, args...), Fix: fix})
	}
	note := func(format string, args ...any) { v.Notes = append(v.Notes, fmt.Sprintf(format, args...)) }

	if rs.Status == metrics.RowInterrupted {
		fail(Complete, "run the row again to the end", "the run was interrupted during this row: its window is cut short and its last requests were cancelled")
	}
	if part == checkPooled {
		checkSamples(in, fail)
		return v
	}
	if rs.Requests.Completed == 0 {
		// Nothing to be valid about: the rules fail on no data, and a
		// row without rules says so in its error figures.
		note("no successful requests: every figure but the error counts is empty")
	}
	sc := rs.SelfCheck
	if rs.Rebuilt {
		// The checks below pass on an absent figure; say so rather than
		// let a rebuilt row look checked.
		var unmeasured []string
		for _, c := range LiveOnly {
			if !cfg.Ignores(c) {
				unmeasured = append(unmeasured, c)
			}
		}
		if len(unmeasured) > 0 {
			note("%s: not measured: the row was rebuilt from its records after the run stopped without writing its summary, and only the live run measures the client's CPU use, its timer probe and the built-in server's own timing",
				strings.Join(unmeasured, ", "))
		}
	}
	scale, scaleName := timingScale(rs)
	limitFor := func(floorMS float64) float64 { return max(floorMS, 0.1*scale) }

	// The client.
	if sc.Cores > 0 && sc.ClientCPU >= cfg.ClientCPU {
		what := "the client's process"
		if sc.SharedWithServer {
			what = "the client's process, the built-in server included,"
		}
		fail(ClientCPU, "run the client on more or quieter cores, or offer less load per client (lower concurrency or rate)",
			"%s used %.0f%% of its %d cores (limit %.0f%%): goroutines queued for a core and stamped events late",
			what, 100*sc.ClientCPU, sc.Cores, 100*cfg.ClientCPU)
	}
	if n := sc.ClientFileErrors; n > 0 {
		fail(ClientFiles, "an open loop holds rate × latency requests in flight, and more when the server falls behind: raise the client's file-descriptor limit (ulimit -n), cap the requests in flight (max_concurrency), or lower the rate",
			"%d measured requests failed in the client before they left it: its process had no file descriptor left for their connections; the server never saw them",
			n)
	}
	if sc.DispatchLag.Count > 0 {
		rate := sc.RequestedRate
		if rate <= 0 {
			rate = sc.ScheduledRate
		}
		limit := metrics.DispatchLagLimitMS(rate)
		short, behind := sc.DispatchShortfall()
		switch {
		case sc.DispatchLag.P99 > limit:
			fail(DispatchLag, "run the client on a quieter machine, or lower the rate; a trace can be replayed with a smaller speedup",
				"requests left the client late: p99 dispatch lag %s ms (limit %s ms, the larger of 1 ms and a tenth of the mean gap between arrivals)%s",
				num(sc.DispatchLag.P99), num(limit), howFar(sc))
		case behind:
			fail(DispatchLag, "the client cannot carry this rate on this machine: lower the rate, give the client more or quieter cores, or split the load over several client processes (run --shard); a trace can be replayed with a smaller speedup",
				"the client fell behind its schedule: it dispatched %s%% short of the schedule's rate (limit %s%%)%s",
				num(100*short), trimFloat(100*metrics.DispatchRateShortfall), howFar(sc))
		}
	}
	if sc.TimerLatenessP99MS > 0 {
		if lim := limitFor(cfg.ClientStallMS); sc.TimerLatenessP99MS > lim {
			fail(ClientStall, "stop other work on the client machine (or give the client more cores), then run again",
				"the client process was held up: its probe timers fired %s ms late at p99 (limit %s ms%s), so event stamps can be that late too",
				num(sc.TimerLatenessP99MS), num(lim), scaleText(cfg.ClientStallMS, lim, scaleName))
		}
	}
	if sc.Gaps >= 20 && sc.ZeroGapShare > cfg.ZeroGapShare {
		fail(Bursts, "run the client on a quieter machine or at lower concurrency; if a proxy sits between client and server, measure without it",
			"tokens arrived in bursts: %.1f%% of the gaps between token events were zero (%d of %d; limit %.1f%%): the client read several events at once, because it read late or something between buffered the stream; ITL is then made of zeros and bursts",
			100*sc.ZeroGapShare, sc.ZeroGaps, sc.Gaps, 100*cfg.ZeroGapShare)
	}
	if sc.StampErrors > 0 {
		if lim := limitFor(cfg.StampErrorMS); sc.StampErrorP99MS > lim {
			fail(StampError, "run the client on a quieter machine, or lower the load",
				"the client's token stamps missed the built-in server's own write times by %s ms at p99 over %d tokens (limit %s ms%s)",
				num(sc.StampErrorP99MS), sc.StampErrors, num(lim), scaleText(cfg.StampErrorMS, lim, scaleName))
		}
	}
	if sc.SimFlushes > 0 {
		if lim := limitFor(cfg.SimLatenessMS); sc.SimLatenessP99MS > lim {
			fail(Simulator, "run on a quieter machine, lower the load, or run the simulator in its own process (infermatrix sim) on other cores",
				"the built-in server fell behind its own schedule: it flushed tokens %s ms late at p99 over %d flushes (limit %s ms%s); the figures include its lateness",
				num(sc.SimLatenessP99MS), sc.SimFlushes, num(lim), scaleText(cfg.SimLatenessMS, lim, scaleName))
		}
	}

	// The load. A ramped row's load is checked step by step (verdict's
	// judgeRamp): over the whole row it is no single level. Users held
	// at a prefill gate are not in flight, by the row's own design.
	switch {
	case row == nil || row.Load.Ramp != nil:
	case row.PrefillConcurrency > 0 && row.Load.Mode == schema.ModeConcurrency:
		note("load: not checked: prefill_concurrency %d holds users back until fewer requests wait for their first token, so fewer than the row's %d users are in flight by design (queue time says how long they waited)",
			row.PrefillConcurrency, row.Load.Concurrency)
	default:
		checkLoad(row, rs, cfg, fail, note)
	}

	// Samples behind every percentile a rule judges.
	if part == checkAll {
		checkSamples(in, fail)
	}

	// A steady state. One user in a closed loop has none to reach: each
	// request runs alone, and how many there are is the samples check's
	// business.
	single := row != nil && row.Load.Mode == schema.ModeConcurrency && row.Load.Concurrency == 1
	if e2e := rs.Metrics.E2E; e2e.Count > 0 && e2e.P50 > 0 && cfg.MinWindowE2E > 0 && !single {
		need := cfg.MinWindowE2E * e2e.P50 / 1000
		if rs.WindowS < need {
			fail(SteadyState, fmt.Sprintf("send more requests (about %d) or set a duration of at least %s s", moreRequests(rs, need), num(math.Ceil(need))),
				"the measured window (%s s) lasted %.1f median end-to-end latencies (limit %s): the start-up wave and the drain at the end are a large part of it",
				num(rs.WindowS), rs.WindowS/(e2e.P50/1000), trimFloat(cfg.MinWindowE2E))
		}
	}

	// Failures.
	if rs.Errors.Ratio > cfg.ErrorRatio && !judgesErrors(in.Rules) {
		fail(Errors, "find why requests failed (the records' error messages; decision.md's error table) and fix the server or the load; or judge errors in the rule (errors.ratio, goodput.ratio)",
			"%.1f%% of requests failed (%d of %d; limit %s%%): latency over the requests that survived does not describe what users saw",
			100*rs.Errors.Ratio, rs.Errors.Total, rs.Requests.Sent-rs.Requests.Canceled, trimFloat(100*cfg.ErrorRatio))
	}

	// A cache the row did not ask for.
	c := rs.Cache
	switch {
	case row != nil && row.UniquePrompts == schema.UniqueOff:
		if c.Known() {
			note("cache: the row sends its prompts as written (unique_prompts: off); %.1f%% of prompt tokens were served from the cache, as intended", 100*c.HitRatio)
		}
	case !c.Known() && rs.Requests.Completed > 0:
		note("cache: the server did not report cached prompt tokens, so a cache hit the row did not ask for could not be seen; the prompts were made unique")
	case c.UnexpectedRatio > cfg.CacheRatio:
		fail(Cache, "make sure nothing else sent these prompts (unique_prompts per_run, the default, makes each run's unique), or clear the server's prefix cache before the run",
			"cache contamination: %.1f%% of the row's prompt tokens were served from the server's cache beyond what the row shares on purpose (%d of %d requests; limit %s%%): the row measured a warm cache",
			100*c.UnexpectedRatio, c.UnexpectedRequests, c.Requests, trimFloat(100*cfg.CacheRatio))
	}

	// A merged row: its shards' own live checks, and their alignment.
	checkMerged(row, rs.Merged, cfg, fail, note)
	return v
}

// howFar says how far the client got with its schedule: the rate its
// requests left at against the schedule's.
func howFar(sc metrics.SelfCheck) string {
	if sc.ScheduledRate <= 0 || sc.AchievedRate <= 0 {
		return ""
	}
	return fmt.Sprintf("; it dispatched %s req/s against the schedule's %s req/s (%s%% of it)",
		num(sc.AchievedRate), num(sc.ScheduledRate), num(100*sc.AchievedRate/sc.ScheduledRate))
}

// checkSamples checks the samples behind every percentile a rule judges.
func checkSamples(in Input, fail func(string, string, string, ...any)) {
	rs := in.Summary
	for _, u := range percentileUses(in.Rules) {
		n := distCount(rs, u.Metric)
		if need := MinSamples(u.Q); n < need {
			fail(Samples, fmt.Sprintf("send at least %d measured requests%s, or judge a lower percentile", requestsFor(u.Metric, need, rs), perRequestNote(u.Metric)),
				"too few samples for %s: %d, and a p%s needs at least %d (with fewer, even the largest sample may lie below it)",
				pctLabel(u.Metric, u.Q), n, trimFloat(u.Q), need)
		}
	}
}

// checkLoad compares the load the server saw with the row's.
func checkLoad(row *schema.PlannedRow, rs *metrics.RowSummary, cfg schema.ValidityPlan, fail func(string, string, string, ...any), note func(string, ...any)) {
	tol := cfg.LoadTolerance
	sc := rs.SelfCheck
	switch row.Load.Mode {
	case schema.ModeConcurrency:
		users := row.Load.Concurrency
		if sc.Users > 0 {
			users = sc.Users // a shard's part of the users (run --shard)
		}
		c := float64(users)
		if cv := row.Conversation; cv != nil && cv.ThinkTime > 0 {
			// Users idle between turns by design: fewer than c requests
			// in flight is the load asked for, not a shortfall.
			note("users think %s between turns, so fewer than the %d users have a request in flight: %s on average (at most %d); the load check does not apply",
				cv.ThinkTime, row.Load.Concurrency, num(rs.InFlight.Mean), rs.InFlight.Max)
			return
		}
		if rs.WindowS > 0 && rs.InFlight.Mean < (1-tol)*c {
			fix := "send more requests, so that every user is busy for most of the window"
			if rs.Requests.Sent < users*2 {
				fix = fmt.Sprintf("send many more requests than users (%d sent for %d users)", rs.Requests.Sent, users)
			}
			fail(Load, fix,
				"the server had %s requests in flight on average (at most %d), short of the row's %d users by more than %s%%",
				num(rs.InFlight.Mean), rs.InFlight.Max, users, trimFloat(100*tol))
		}
	case schema.ModeRate, schema.ModeTrace:
		if row.Conversation != nil {
			note("conversations arrive at %s/s and each turn follows its reply, so the row's requests (%s/s) are no arrival process to hold to a rate; the load check does not apply",
				num(row.Load.Rate), num(sc.AchievedRate))
			return
		}
		want, what := sc.RequestedRate, "asked for"
		if row.Load.Mode == schema.ModeTrace || want <= 0 {
			want, what = sc.ScheduledRate, "the trace's own"
		}
		got := sc.AchievedRate
		if want <= 0 || got <= 0 {
			return
		}
		if math.Abs(got-want) > tol*want {
			fix := "send more requests (the rate of n random arrivals varies by about 1/√n), or use arrival: constant"
			if sc.ScheduledRate > 0 && math.Abs(got-sc.ScheduledRate) > tol*sc.ScheduledRate {
				fix = "the client could not keep to its schedule: run it on a quieter machine or lower the rate"
			}
			fail(Load, fix,
				"requests were dispatched at %s req/s against %s %s req/s (%+.0f%%, tolerance ±%s%%)",
				num(got), what, num(want), 100*(got-want)/want, trimFloat(100*tol))
		}
	}
}

// timingScale is the row's typical token gap (ITL p50), against which a
// timing error is small or not; a row without token gaps uses its median
// end-to-end latency.
func timingScale(rs *metrics.RowSummary) (float64, string) {
	if d := rs.Metrics.ITL; d.Count > 0 && d.P50 > 0 {
		return d.P50, "median token gap"
	}
	if d := rs.Metrics.E2E; d.Count > 0 {
		return d.P50, "median end-to-end latency"
	}
	return 0, ""
}

func scaleText(floor, lim float64, scaleName string) string {
	if lim > floor && scaleName != "" {
		return ", a tenth of the " + scaleName
	}
	return ""
}

// percentileUses gathers the percentiles the rules read, without repeats.
func percentileUses(rules []schema.AcceptanceRule) []metrics.PercentileUse {
	var out []metrics.PercentileUse
	seen := map[metrics.PercentileUse]bool{}
	for _, r := range rules {
		if r.Program == nil {
			continue
		}
		for _, u := range metrics.PercentileUses(r.Program.Source) {
			if !seen[u] {
				seen[u] = true
				out = append(out, u)
			}
		}
	}
	return out
}

// judgesErrors reports whether a rule reads the row's failures itself,
// so that failed requests are judged rather than hidden.
func judgesErrors(rules []schema.AcceptanceRule) bool {
	for _, r := range rules {
		if r.Program == nil {
			continue
		}
		for _, op := range metrics.Operands(r.Program.Source) {
			switch {
			case op.Path[0] == "errors", op.Path[0] == "goodput":
				return true
			case op.Path[0] == "requests" && len(op.Path) > 1 && (op.Path[1] == "failed" || op.Path[1] == "completed"):
				return true
			}
		}
	}
	return false
}

// distCount is the sample count of a metric by its expression name.
func distCount(rs *metrics.RowSummary, name string) int {
	if d, ok := metrics.NewRowEnv(rs).Dist(name); ok {
		return d.Count
	}
	return math.MaxInt
}

// requestsFor estimates the measured requests that give need samples of
// a metric: one per request, except ITL, with one per token gap.
func requestsFor(metric string, need int, rs *metrics.RowSummary) int {
	if metric == "itl" && rs.Requests.Completed > 0 && rs.Metrics.ITL.Count > 0 {
		per := float64(rs.Metrics.ITL.Count) / float64(rs.Requests.Completed)
		return int(math.Ceil(float64(need) / per))
	}
	return need
}

func perRequestNote(metric string) string {
	if metric == "itl" {
		return " (ITL has one sample per token gap)"
	}
	return ""
}

// moreRequests estimates the measured requests that fill a window of
// need seconds at the row's request rate.
func moreRequests(rs *metrics.RowSummary, need float64) int {
	if rs.Throughput.RequestsPerS <= 0 {
		return rs.Requests.Sent * 2
	}
	return int(math.Ceil(need * rs.Throughput.RequestsPerS * 1.1))
}

func pctLabel(metric string, q float64) string {
	return metric + ".p" + trimFloat(q)
}

func trimFloat(x float64) string { return strings.TrimSuffix(fmt.Sprintf("%g", x), ".0") }

// num formats a figure with three significant digits, as the reports do.
func num(x float64) string {
	switch ax := math.Abs(x); {
	case ax == 0:
		return "0"
	case ax >= 100:
		return fmt.Sprintf("%.0f", x)
	case ax >= 10:
		return fmt.Sprintf("%.1f", x)
	case ax >= 1:
		return fmt.Sprintf("%.2f", x)
	default:
		return fmt.Sprintf("%.3g", x)
	}
}
