// Package verdict judges a run: acceptance verdicts per row with the
// clause that failed, hypothesis verdicts with the numbers that decided
// them, sweep operating points, and the baseline run rules are held
// against. It works from a run's data alone (plan, summary, manifest), so a
// run can be re-judged long after it ran.
//
// verdict owns the judgement, not its rendering: it imports metrics,
// schema, validity, rundir and compare, never reports, analysis or charts,
// which all read its Decision.
package verdict

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/infermatrix/infermatrix/internal/numfmt"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/validity"
)

// DecisionJSON is the file a run's Decision is written to; a baseline run
// counts as complete only when it has one.
const DecisionJSON = "decision.json"

// Verdicts, of a row and of a run.
const (
	Pass    = "pass"
	Fail    = "fail"
	NoRules = "no rules" // no acceptance rule names the row (or, for a run, any row)
	NotRun  = "not run"  // the row did not run (interrupted before it, or the tool failed)
	// Invalid is a row's verdict when it has rules but its figures cannot
	// be trusted (validity.Verdict says why): whatever its rules say, it
	// neither passes nor fails.
	Invalid = "invalid"
	// Rejected is a sweep point's verdict when it fails only rules that
	// ask for an operating point: the load is past what the server holds,
	// which is what the sweep was run to find, not a failure of the run.
	Rejected = "rejected"
	// Skipped is a row's verdict when the run left it out (--rows).
	Skipped = "skipped"
	// Inconclusive is a run's verdict when nothing failed but some row
	// with rules has no trustworthy verdict: it was invalid, did not run,
	// or was left out. It never counts as a pass.
	Inconclusive = "inconclusive"
	// Incomplete is a run's verdict when it was interrupted.
	Incomplete = "incomplete"
)

// Hypothesis verdicts.
const (
	Supported = "supported"
	Refuted   = "refuted"
	// Inconclusive (above) is also a hypothesis' verdict.
)

// Decision is the judgement of a run.
type Decision struct {
	// Verdict is pass when every row with rules ran, was valid and passed
	// them, fail when a valid row failed, inconclusive when nothing failed
	// but a row with rules was invalid, did not run or was left out,
	// incomplete when the run was interrupted.
	Verdict     string `json:"verdict"`
	Interrupted bool   `json:"interrupted,omitempty"`
	// Rebuilt says the summaries judged were rebuilt from the records
	// after the run stopped without writing them (metrics.Summary's
	// Rebuilt), and what was missing; every renderer shows it with the
	// verdict.
	Rebuilt string `json:"rebuilt,omitempty"`
	// Why says, in sentences, what decided the verdict when it is not a
	// plain pass.
	Why []string `json:"why,omitempty"`
	// Failed and Sent count the run's measured requests that failed
	// (cancellations aside) and all it sent; MostFailed is set when more
	// than half failed, which makes a run without rules a runtime failure
	// rather than a success.
	Failed     int          `json:"failed_requests"`
	Sent       int          `json:"sent_requests"`
	MostFailed bool         `json:"most_failed,omitempty"`
	Rows       []RowVerdict `json:"rows"`
	// OperatingPoints holds one entry per sweep judged by an
	// operating_point rule.
	OperatingPoints []OperatingPoint    `json:"operating_points,omitempty"`
	Hypotheses      []HypothesisVerdict `json:"hypotheses,omitempty"`
	// Baseline sets each row beside the baseline run's (JudgeWith).
	Baseline *BaselineRecord `json:"baseline,omitempty"`

	// baselines holds each row's baseline row as rules read it, and
	// baselineWhy why a row has none (see Baseline.row).
	baselines   map[string]*metrics.RowEnv
	baselineWhy map[string]string
}

// Passed reports whether acceptance passed.
func (d *Decision) Passed() bool { return d.Verdict == Pass }

// Row returns the verdict of the row with this id, or nil.
func (d *Decision) Row(id string) *RowVerdict {
	for i := range d.Rows {
		if d.Rows[i].ID == id {
			return &d.Rows[i]
		}
	}
	return nil
}

// ByVerdict sorts the row ids by verdict, for the renderers' summaries.
func (d *Decision) ByVerdict() map[string][]string {
	out := map[string][]string{}
	for _, rv := range d.Rows {
		out[rv.Verdict] = append(out[rv.Verdict], rv.ID)
	}
	return out
}

// RowVerdict is one row's judgement.
type RowVerdict struct {
	ID      string `json:"id"`
	Verdict string `json:"verdict"`
	// Search and Probe mark a search's probe: the search row's id and
	// the probe's place in the search (from 1).
	Search string `json:"search,omitempty"`
	Probe  int    `json:"probe,omitempty"`
	// Validity says whether the row's figures can be trusted, and if not
	// why; every row that ran has one, rules or not.
	Validity validity.Verdict `json:"validity"`
	Rules    []RuleResult     `json:"rules,omitempty"`
	// Ramp is a ramped row's steps, each judged as a sweep point, and
	// its operating step (ramp.go); Rules then fold the steps' results.
	Ramp *RampVerdict `json:"ramp,omitempty"`
}

// Valid reports whether the row ran and its figures can be trusted.
func (rv *RowVerdict) Valid() bool {
	return rv.Verdict != NotRun && rv.Verdict != Skipped && rv.Validity.Valid
}

// RulesPass reports whether every rule judged passed (what an invalid
// row's rules would have said).
func (rv *RowVerdict) RulesPass() bool {
	for _, r := range rv.Rules {
		if !r.Pass {
			return false
		}
	}
	return true
}

// RuleResult is one acceptance rule applied to one row.
type RuleResult struct {
	Rule   string   `json:"rule"`
	Expect string   `json:"expect"`
	Pass   bool     `json:"pass"`
	Sweep  string   `json:"sweep,omitempty"` // operating_point for a rule that judges the sweep as a whole
	Failed []Clause `json:"failed,omitempty"`
	// Reason explains a failure that is not a clause's: no successful
	// requests, an evaluation error.
	Reason string `json:"reason,omitempty"`
	// Unjudged says why the rule was not evaluated: it reads the baseline
	// run, and the row's baseline row cannot be used.
	Unjudged string `json:"unjudged,omitempty"`
}

// Clause is a failed part of a rule, with the measured values it read.
type Clause struct {
	Text   string  `json:"text"`
	Values []Value `json:"values,omitempty"`
	Reason string  `json:"reason,omitempty"`
}

// Value is a named measured number.
type Value struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// HypothesisVerdict is one hypothesis' judgement.
type HypothesisVerdict struct {
	ID        string  `json:"id"`
	Statement string  `json:"statement"`
	Expect    string  `json:"expect"`
	Verdict   string  `json:"verdict"`
	Reason    string  `json:"reason,omitempty"`
	Values    []Value `json:"values,omitempty"`
}

// OperatingPoint is what an operating_point rule found in one sweep: the
// highest-throughput valid point that passes every rule on it.
type OperatingPoint struct {
	Base  string   `json:"base"`  // the swept row's id as written
	Rules []string `json:"rules"` // the operating_point rules judging it
	// Row is the operating point's row id; empty when there is none.
	Row string `json:"row,omitempty"`
	// Verdict is pass (an operating point, and no point above it in load
	// that might have beaten it went unjudged), fail (every point was
	// valid and none passes) or inconclusive.
	Verdict string `json:"verdict"`
	// Rejected lists the valid points that failed (past capacity), and
	// Unjudged the points above the operating point that were invalid or
	// did not run.
	Rejected []string `json:"rejected,omitempty"`
	Unjudged []string `json:"unjudged,omitempty"`
	Why      string   `json:"why"`
}

// Judge applies the plan's acceptance rules, validity checks and
// hypotheses to a summary, without a baseline run.
func Judge(plan *schema.Plan, s *metrics.Summary) *Decision {
	return JudgeWith(plan, s, nil)
}

// JudgeWith is Judge against a baseline run (nil for none): rules and
// hypotheses read its rows as baseline.<metric>, and the decision sets
// every row beside its baseline row. A rule that reads a baseline row that
// is missing, measured another workload or is invalid there is not judged,
// and its row is invalid (BaselineCheck): never a silent pass.
func JudgeWith(plan *schema.Plan, s *metrics.Summary, base *Baseline) *Decision {
	d := &Decision{Interrupted: s.Interrupted, Rebuilt: s.Rebuilt}
	d.baselines, d.baselineWhy = map[string]*metrics.RowEnv{}, map[string]string{}
	for i := range s.Rows {
		id := s.Rows[i].ID
		d.baselines[id], d.baselineWhy[id] = base.row(plan, s, id)
	}
	if base != nil {
		d.Baseline = baselineRecord(base, plan, s, d.baselines, d.baselineWhy)
	}
	rules := map[string][]schema.AcceptanceRule{}
	// eachPoint marks rows judged by at least one rule on their own; a
	// row judged only as a point of a sweep's operating point counts
	// through that (judgeOperatingPoints) when it is invalid or missing.
	eachPoint := map[string]bool{}
	for _, a := range plan.Acceptance {
		for _, id := range a.Rows {
			rules[id] = append(rules[id], a)
			// A ramped row folds its operating_point rules itself
			// (judgeRamp): it counts as a row judged on its own.
			eachPoint[id] = eachPoint[id] || a.Sweep != schema.SweepOperatingPoint || isRamped(plan.Row(id))
		}
	}
	var invalid, notRun, broken, failed []string
	for i := range s.Rows {
		rs := &s.Rows[i]
		d.Sent += rs.Requests.Sent - rs.Requests.Canceled
		d.Failed += rs.Errors.Total
		rv := RowVerdict{ID: rs.ID}
		if r := plan.Row(rs.ID); r != nil && r.Probe != nil {
			rv.Search, rv.Probe = r.Probe.Search, r.Probe.Index
		}
		rv.Validity = validity.Row(validity.Input{Row: plan.Row(rs.ID), Summary: rs, Rules: rules[rs.ID], Config: plan.Validity})
		ran := rs.Status != metrics.RowNotRun && rs.Status != metrics.RowFailed
		if ran {
			env := metrics.NewRowEnv(rs)
			env.Baseline = d.baselines[rs.ID]
			marked := false
			for _, rule := range rules[rs.ID] {
				if env.Baseline == nil && readsBaseline(rule) {
					rr := RuleResult{Rule: rule.Name, Expect: rule.Program.Source, Unjudged: d.baselineWhy[rs.ID], Reason: "not judged: " + d.baselineWhy[rs.ID]}
					if rule.Sweep == schema.SweepOperatingPoint {
						rr.Sweep = rule.Sweep
					}
					rv.Rules = append(rv.Rules, rr)
					if !marked {
						markBaseline(&rv.Validity, d.baselineWhy[rs.ID])
						marked = true
					}
					continue
				}
				rr := judgeRule(rule, rs, env)
				if rule.Sweep == schema.SweepOperatingPoint {
					rr.Sweep = rule.Sweep
				}
				rv.Rules = append(rv.Rules, rr)
			}
			judgeRamp(plan.Row(rs.ID), rs, rules[rs.ID], plan.Validity, &rv)
		}
		switch {
		case !ran:
			rv.Verdict = NotRun
			switch {
			case !eachPoint[rs.ID]:
			case rs.Status == metrics.RowFailed:
				broken = append(broken, rs.ID)
			default:
				notRun = append(notRun, rs.ID)
			}
		case len(rules[rs.ID]) == 0:
			rv.Verdict = NoRules
		case !rv.Validity.Valid:
			rv.Verdict = Invalid
			if eachPoint[rs.ID] {
				invalid = append(invalid, rs.ID)
			}
		default:
			rv.Verdict = Pass
			for _, rr := range rv.Rules {
				switch {
				case rr.Pass:
				case rr.Sweep == schema.SweepOperatingPoint && rv.Verdict == Pass:
					rv.Verdict = Rejected
				case rr.Sweep != schema.SweepOperatingPoint:
					rv.Verdict = Fail
				}
			}
			if rv.Verdict == Fail {
				failed = append(failed, rs.ID)
			}
		}
		d.Rows = append(d.Rows, rv)
	}
	var skipped []string
	for _, id := range plan.Skipped {
		d.Rows = append(d.Rows, RowVerdict{ID: id, Verdict: Skipped})
		if len(rules[id]) > 0 {
			skipped = append(skipped, id)
		}
	}
	d.OperatingPoints = judgeOperatingPoints(plan, s, d)
	d.MostFailed = d.Sent > 0 && 2*d.Failed > d.Sent

	// A pass needs evidence: every row that has rules ran, was valid, and
	// met them (a sweep judged by its operating point: yielded one).
	var opFail, opInconclusive, opNone []string
	for _, op := range d.OperatingPoints {
		switch {
		case op.Verdict == Fail:
			opFail = append(opFail, op.Base)
		case op.Verdict == Inconclusive && op.Row == "":
			opNone = append(opNone, op.Base)
		case op.Verdict == Inconclusive:
			opInconclusive = append(opInconclusive, op.Base)
		}
	}
	judged := false
	for _, rv := range d.Rows {
		judged = judged || rv.Verdict == Pass || rv.Verdict == Fail || rv.Verdict == Rejected || rv.Verdict == Invalid
	}
	why := func(format string, ids []string) {
		if len(ids) > 0 {
			d.Why = append(d.Why, fmt.Sprintf(format, "`"+strings.Join(ids, "`, `")+"`"))
		}
	}
	why("failed acceptance: %s", failed)
	why("no operating point: every point of %s was valid and none passes", opFail)
	why("invalid, so not judged: %s", invalid)
	why("with rules but not run: %s", notRun)
	why("with rules but stopped by a runtime error (the Results table says which): %s", broken)
	why("with rules but left out of this run (--rows): %s", skipped)
	why("an operating point that a point above it, invalid or not run, might beat: %s", opInconclusive)
	why("no operating point can be claimed: no valid point passes, and the points that might were invalid or did not run: %s", opNone)
	if len(s.MissingShards) > 0 {
		d.Why = append(d.Why, fmt.Sprintf("merged without shard%s %s of the distributed run: its figures cover only part of the load", pluralS(len(s.MissingShards)), intList(s.MissingShards)))
	}
	switch {
	case s.Interrupted:
		d.Verdict = Incomplete
	case len(s.MissingShards) > 0:
		// Part of the load is missing: neither a pass nor a failure on
		// the rest stands for the run.
		d.Verdict = Inconclusive
	case len(failed) > 0 || len(opFail) > 0:
		d.Verdict = Fail
	case len(invalid) > 0 || len(notRun) > 0 || len(broken) > 0 || len(skipped) > 0 || len(opInconclusive) > 0 || len(opNone) > 0:
		d.Verdict = Inconclusive
	case !judged:
		d.Verdict = NoRules
	default:
		d.Verdict = Pass
	}
	if d.MostFailed {
		d.Why = append(d.Why, fmt.Sprintf("most requests failed: %d of %d", d.Failed, d.Sent))
	}
	d.Hypotheses = judgeHypotheses(plan, s, d)
	return d
}

// judgeOperatingPoints decides, for every sweep an operating_point rule
// judges, whether the sweep yields an operating point: the valid point
// with the highest output throughput that passes every rule on it.
//
// Points that fail (valid, past capacity) are rejected without failing
// the run. The answer can be trusted only if no point that might have
// beaten it went unjudged: a point with more load than the operating
// point (or, when there is none, any point) that was invalid or did not
// run makes the sweep inconclusive.
func judgeOperatingPoints(plan *schema.Plan, s *metrics.Summary, d *Decision) []OperatingPoint {
	var out []OperatingPoint
	byBase := map[string]int{} // index into out
	for _, a := range plan.Acceptance {
		if a.Sweep != schema.SweepOperatingPoint {
			continue
		}
		for _, id := range a.Rows {
			row := plan.Row(id)
			if row == nil || row.ID == row.Base {
				continue
			}
			i, ok := byBase[row.Base]
			if !ok {
				i = len(out)
				byBase[row.Base] = i
				out = append(out, OperatingPoint{Base: row.Base})
			}
			if !slices.Contains(out[i].Rules, a.Name) {
				out[i].Rules = append(out[i].Rules, a.Name)
			}
		}
	}
	for i := range out {
		op := &out[i]
		var points []*schema.PlannedRow
		for j := range plan.Rows {
			if plan.Rows[j].Base == op.Base && plan.Rows[j].ID != op.Base {
				points = append(points, &plan.Rows[j])
			}
		}
		best, bestTP := "", 0.0
		for _, p := range points {
			rv := d.Row(p.ID)
			rs := s.Row(p.ID)
			if rv == nil || rs == nil {
				continue
			}
			switch rv.Verdict {
			case Pass:
				tp := rs.Throughput.WorkPerS() // input tokens for embeddings and rerank
				better := best == "" || tp > bestTP
				if p.Probe != nil && best != "" {
					// A search's operating point is its answer: the
					// highest load that passes (analysis restates it).
					better = loadOf(p) > loadOf(plan.Row(best))
				}
				if better {
					best, bestTP = p.ID, tp
				}
			case Rejected:
				op.Rejected = append(op.Rejected, p.ID)
			}
		}
		op.Row = best
		bestLoad := -1.0
		if best != "" {
			bestLoad = loadOf(plan.Row(best))
		}
		// A search's probes hold more load never to help (package
		// search): one unjudged above a valid failure cannot beat the
		// operating point.
		ceiling := math.Inf(1)
		for _, id := range op.Rejected {
			if r := plan.Row(id); r != nil && r.Probe != nil {
				ceiling = math.Min(ceiling, loadOf(r))
			}
		}
		for _, p := range points {
			rv := d.Row(p.ID)
			if rv == nil || rv.Verdict == Invalid || rv.Verdict == NotRun || rv.Verdict == Skipped {
				if loadOf(p) > bestLoad && !(p.Probe != nil && loadOf(p) > ceiling) {
					op.Unjudged = append(op.Unjudged, p.ID)
				}
			}
		}
		switch {
		case best != "" && len(op.Unjudged) == 0:
			op.Verdict = Pass
			what := "output"
			if rs := s.Row(best); rs != nil && rs.Throughput.InputsPerS > 0 {
				what = "input" // an embeddings or rerank sweep (metrics.Throughput.WorkPerS)
			}
			op.Why = fmt.Sprintf("operating point `%s`: the highest %s throughput (%s tok/s) of the valid points that pass", best, what, numfmt.Num(bestTP))
			if r := plan.Row(best); r != nil && r.Probe != nil {
				op.Why = fmt.Sprintf("operating point `%s`: the highest load of the search's probes that pass (%s %s tok/s)", best, numfmt.Num(bestTP), what)
			}
			if len(op.Rejected) > 0 {
				op.Why += fmt.Sprintf("; rejected (past capacity): `%s`", strings.Join(op.Rejected, "`, `"))
			}
		case best != "":
			op.Verdict = Inconclusive
			op.Why = fmt.Sprintf("operating point at least `%s` (%s tok/s), but `%s`, with more load, could not be judged", best, numfmt.Num(bestTP), strings.Join(op.Unjudged, "`, `"))
		case len(op.Unjudged) > 0:
			op.Verdict = Inconclusive
			op.Why = fmt.Sprintf("no valid point passes, and `%s` could not be judged", strings.Join(op.Unjudged, "`, `"))
		default:
			op.Verdict = Fail
			op.Why = "no operating point: every point was valid and none passes"
		}
	}
	return out
}

// loadOf is a row's offered load, for ordering a sweep: its concurrency or
// its rate (a trace's speedup).
func loadOf(r *schema.PlannedRow) float64 {
	if r == nil {
		return 0
	}
	switch r.Load.Mode {
	case schema.ModeConcurrency:
		return float64(r.Load.Concurrency)
	case schema.ModeTrace:
		return r.Load.Speedup
	}
	return r.Load.Rate
}

// judgeRule evaluates a rule on a row, clause by clause.
//
// A row with no successful request fails every rule: an expression like
// "ttft.p95 < 1000" would otherwise pass on nothing. Where a rule reads a
// metric with no samples (a non-streamed row has no TTFT), it is judged
// twice, with the missing statistics standing at -Inf and at +Inf: it
// passes only if it passes both ways, that is, if the verdict does not
// depend on the missing data ("ttft.p95 < 100 || e2e.p95 < 100" can pass on
// e2e alone).
func judgeRule(rule schema.AcceptanceRule, rs *metrics.RowSummary, env metrics.RowEnv) RuleResult {
	rr := RuleResult{Rule: rule.Name, Expect: rule.Program.Source}
	if rs.Requests.Completed == 0 {
		rr.Reason = fmt.Sprintf("no successful requests (%d sent, %d failed)", rs.Requests.Sent, rs.Requests.Failed)
		return rr
	}
	empty := env.EmptyMetrics()
	lo, hi := env.Filled(math.Inf(-1)), env.Filled(math.Inf(1))
	holds := func(src string, p *metrics.Program) (bool, error) {
		a, err := runOn(src, p, lo)
		if err != nil {
			return false, err
		}
		b, err := runOn(src, p, hi)
		return a && b, err
	}
	ok, err := holds("", rule.Program)
	if err != nil {
		rr.Reason = err.Error()
		return rr
	}
	if rr.Pass = ok; ok {
		return rr
	}
	for _, c := range rule.Program.Conjuncts() {
		held, err := holds(c, nil)
		if err == nil && held {
			continue
		}
		cl := Clause{Text: c}
		var missing []string
		for _, op := range metrics.Operands(c) {
			if m := metrics.MissingName(strings.Join(op.Path, "."), empty); m != "" {
				missing = append(missing, m)
				continue
			}
			cl.Values = appendValue(cl.Values, op.Text, env)
		}
		switch {
		case len(missing) > 0:
			cl.Reason = missingReason(dedupe(missing))
		case err != nil:
			cl.Reason = err.Error()
		}
		rr.Failed = append(rr.Failed, cl)
	}
	if len(rr.Failed) == 0 {
		// The rule failed but no top-level clause did on its own (an
		// "or" of failing parts): show the whole rule with its numbers.
		cl := Clause{Text: rule.Program.Source}
		for _, op := range metrics.Operands(rule.Program.Source) {
			cl.Values = appendValue(cl.Values, op.Text, env)
		}
		rr.Failed = append(rr.Failed, cl)
	}
	return rr
}

// missingReason says why the named metrics could not be read: no samples,
// for the cache no cached-token counts from the server, for telemetry no
// scrape or a figure the server or GPUs did not publish.
func missingReason(names []string) string {
	var dists, parts []string
	cache := false
	for _, n := range names {
		in, name := "", n
		if rest, ok := strings.CutPrefix(n, metrics.BaselineName+"."); ok {
			in, name = " in the baseline run", rest
		}
		root, _, _ := strings.Cut(name, ".")
		switch {
		case n == "cache":
			cache = true
		case name == metrics.ServerName:
			parts = append(parts, "the row has no server telemetry"+in)
		case name == metrics.GPUName:
			parts = append(parts, "the row has no GPU telemetry"+in)
		case root == metrics.ServerName:
			parts = append(parts, "the server did not report "+name+in)
		case root == metrics.GPUName:
			parts = append(parts, "the GPUs' exporters did not report "+name+in)
		default:
			dists = append(dists, n)
		}
	}
	if len(dists) > 0 {
		parts = append([]string{strings.Join(dists, ", ") + " has no samples"}, parts...)
	}
	if cache {
		parts = append(parts, "the server reported no cached prompt tokens")
	}
	return strings.Join(parts, "; ")
}

// runOn evaluates a compiled program, or else an expression's source, as a
// verdict.
func runOn(src string, p *metrics.Program, env any) (bool, error) {
	if p != nil {
		return p.Run(env)
	}
	v, err := metrics.Value(src, env)
	if err != nil {
		return false, err
	}
	b, _ := v.(bool)
	return b, nil
}

func dedupe(xs []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// appendValue evaluates an operand and appends it if it is a number.
func appendValue(vals []Value, text string, env any) []Value {
	v, err := metrics.Value(text, env)
	if err != nil {
		return vals
	}
	if f, ok := toFloat(v); ok {
		vals = append(vals, Value{Name: text, Value: f})
	}
	return vals
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	}
	return 0, false
}

// judgeHypotheses evaluates each hypothesis over the rows that produced
// data. A hypothesis naming a row without data (not run, filtered out with
// --rows, or with no successful request) is inconclusive: a claim about a
// missing measurement is neither supported nor refuted.
func judgeHypotheses(plan *schema.Plan, s *metrics.Summary, d *Decision) []HypothesisVerdict {
	env := metrics.HypothesisEnv{Rows: map[string]metrics.RowEnv{}}
	usable := map[string]bool{}
	invalid := map[string]bool{}
	for i := range s.Rows {
		rs := &s.Rows[i]
		if rs.Status != metrics.RowNotRun && rs.Status != metrics.RowFailed && rs.Requests.Completed > 0 {
			e := metrics.NewRowEnv(rs)
			e.Baseline = d.baselines[rs.ID]
			env.Rows[rs.ID] = e
			if rv := d.Row(rs.ID); rv != nil && !rv.Validity.Valid {
				invalid[rs.ID] = true
				continue
			}
			usable[rs.ID] = true
		}
	}
	var out []HypothesisVerdict
	for _, h := range plan.Hypotheses {
		hv := HypothesisVerdict{ID: h.ID, Statement: h.Statement, Expect: h.Program.Source}
		var missing, bad, nobase []string
		for _, id := range referencedRows(h.Program.Source) {
			switch {
			case invalid[id]:
				bad = append(bad, id)
			case !usable[id]:
				missing = append(missing, id)
			}
		}
		for _, op := range metrics.Operands(h.Program.Source) {
			if len(op.Path) > 2 && op.Path[0] == "rows" && op.Path[2] == metrics.BaselineName && d.baselines[op.Path[1]] == nil && (usable[op.Path[1]] || invalid[op.Path[1]]) {
				nobase = append(nobase, d.baselineWhy[op.Path[1]])
			}
		}
		if len(nobase) > 0 {
			// More to the point than "row d is invalid", which a row
			// whose rules read a baseline it lacks is for that reason.
			hv.Verdict, hv.Reason = Inconclusive, strings.Join(dedupe(nobase), "; ")
			out = append(out, hv)
			continue
		}
		if len(missing)+len(bad) > 0 {
			sort.Strings(missing)
			sort.Strings(bad)
			var why []string
			if len(missing) > 0 {
				why = append(why, "no data for row "+strings.Join(missing, ", "))
			}
			if len(bad) > 0 {
				why = append(why, "row "+strings.Join(bad, ", ")+" is invalid")
			}
			hv.Verdict = Inconclusive
			hv.Reason = strings.Join(why, "; ")
			out = append(out, hv)
			continue
		}
		missingOps := emptyOperands(h.Program.Source, env)
		for _, op := range metrics.Operands(h.Program.Source) {
			if len(op.Path) >= 3 && slices.ContainsFunc(missingOps, func(m missingOperand) bool {
				return m.Row == op.Path[1] && metrics.MissingName(strings.Join(op.Path[2:], "."), []string{m.Name}) != ""
			}) {
				continue // no samples: a zero here would read as a measurement
			}
			hv.Values = appendValue(hv.Values, op.Text, env)
		}
		// As for rules: evaluated with missing statistics at -Inf and at
		// +Inf. A claim that comes out differently depends on data the
		// run does not have.
		a, errA := h.Program.Run(env.Filled(math.Inf(-1)))
		b, errB := h.Program.Run(env.Filled(math.Inf(1)))
		switch {
		case errA != nil || errB != nil:
			hv.Verdict, hv.Reason = Inconclusive, errors.Join(errA, errB).Error()
		case a != b:
			hv.Verdict, hv.Reason = Inconclusive, dependsOnMissing(missingOps)
		case a:
			hv.Verdict = Supported
		default:
			hv.Verdict = Refuted
		}
		out = append(out, hv)
	}
	return out
}

// missingOperand is a row's missing figure a hypothesis reads: Name is
// what RowEnv.EmptyMetrics lists (ttft, server, server.preemptions).
type missingOperand struct{ Row, Name string }

// emptyOperands lists the row figures a hypothesis reads that are missing:
// distributions with no samples, telemetry not scraped or not published.
func emptyOperands(src string, env metrics.HypothesisEnv) []missingOperand {
	var out []missingOperand
	for _, op := range metrics.Operands(src) {
		if len(op.Path) < 3 {
			continue
		}
		m := missingOperand{Row: op.Path[1], Name: metrics.MissingName(strings.Join(op.Path[2:], "."), env.Rows[op.Path[1]].EmptyMetrics())}
		if m.Name != "" && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// dependsOnMissing says which missing data a hypothesis' verdict depends
// on: rows.<id>.<name> for each distribution without samples, and for
// other missing figures (telemetry, the cache) why each is missing.
func dependsOnMissing(ms []missingOperand) string {
	var dists, other []string
	for _, m := range ms {
		if r := missingReason([]string{m.Name}); !strings.HasSuffix(r, "has no samples") {
			other = append(other, "row "+m.Row+": "+r)
			continue
		}
		dists = append(dists, "rows."+m.Row+"."+m.Name)
	}
	var parts []string
	if len(dists) > 0 {
		parts = append(parts, strings.Join(dists, ", ")+", which has no samples")
	}
	if len(other) > 0 {
		parts = append(parts, "missing data ("+strings.Join(other, "; ")+")")
	}
	return "it depends on " + strings.Join(parts, ", and on ")
}

// referencedRows lists the row ids a hypothesis names (rows.x or
// rows["x/c=1"]).
func referencedRows(src string) []string {
	var out []string
	seen := map[string]bool{}
	for _, op := range metrics.Operands(src) {
		if len(op.Path) >= 2 && op.Path[0] == "rows" && !seen[op.Path[1]] {
			seen[op.Path[1]] = true
			out = append(out, op.Path[1])
		}
	}
	return out
}
