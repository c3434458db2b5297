// Package reports judges a run and writes its decision record: acceptance
// verdicts per row with the clause that failed, hypothesis verdicts with the
// numbers that decided them, and the files reviewers read (decision.md,
// decision.json, summary.csv).
//
// Everything here works from a run's data alone (plan, summary, manifest),
// so a run directory can be re-judged and re-rendered long after the run.
package reports

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

// Verdicts, of a row and of a run.
const (
	Pass    = "pass"
	Fail    = "fail"
	NoRules = "no rules" // no acceptance rule names the row (or, for a run, any row)
	NotRun  = "not run"  // the row did not run (interrupted before it, or the tool failed)
	// Incomplete is a run's verdict when a row with rules has no verdict:
	// the run was interrupted or failed before judging everything it set
	// out to judge. It never counts as a pass.
	Incomplete = "incomplete"
)

// Hypothesis verdicts.
const (
	Supported    = "supported"
	Refuted      = "refuted"
	Inconclusive = "inconclusive"
)

// Decision is the judgement of a run.
type Decision struct {
	// Verdict is pass when every row with rules passed them all.
	Verdict     string              `json:"verdict"`
	Interrupted bool                `json:"interrupted,omitempty"`
	Rows        []RowVerdict        `json:"rows"`
	Hypotheses  []HypothesisVerdict `json:"hypotheses,omitempty"`
}

// Passed reports whether acceptance passed.
func (d *Decision) Passed() bool { return d.Verdict == Pass }

// byVerdict sorts the row ids by verdict, for the renderers' summaries.
func (d *Decision) byVerdict() (pass, fail, none, notRun []string) {
	for _, rv := range d.Rows {
		switch rv.Verdict {
		case Pass:
			pass = append(pass, rv.ID)
		case Fail:
			fail = append(fail, rv.ID)
		case NoRules:
			none = append(none, rv.ID)
		case NotRun:
			notRun = append(notRun, rv.ID)
		}
	}
	return pass, fail, none, notRun
}

// RowVerdict is one row's judgement.
type RowVerdict struct {
	ID      string       `json:"id"`
	Verdict string       `json:"verdict"`
	Rules   []RuleResult `json:"rules,omitempty"`
}

// RuleResult is one acceptance rule applied to one row.
type RuleResult struct {
	Rule   string   `json:"rule"`
	Expect string   `json:"expect"`
	Pass   bool     `json:"pass"`
	Failed []Clause `json:"failed,omitempty"`
	// Reason explains a failure that is not a clause's: no successful
	// requests, an evaluation error.
	Reason string `json:"reason,omitempty"`
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

// Judge applies the plan's acceptance rules and hypotheses to a summary.
func Judge(plan *schema.Plan, s *metrics.Summary) *Decision {
	d := &Decision{Interrupted: s.Interrupted}
	rules := map[string][]schema.AcceptanceRule{}
	for _, a := range plan.Acceptance {
		for _, id := range a.Rows {
			rules[id] = append(rules[id], a)
		}
	}
	failed, judged, unjudged := 0, 0, 0
	for i := range s.Rows {
		rs := &s.Rows[i]
		rv := RowVerdict{ID: rs.ID}
		switch {
		case len(rules[rs.ID]) == 0:
			rv.Verdict = NoRules
		case rs.Status == metrics.RowNotRun || rs.Status == metrics.RowFailed:
			rv.Verdict = NotRun
			unjudged++
		default:
			judged++
			rv.Verdict = Pass
			env := metrics.NewRowEnv(rs)
			for _, rule := range rules[rs.ID] {
				rr := judgeRule(rule, rs, env)
				if !rr.Pass {
					rv.Verdict = Fail
				}
				rv.Rules = append(rv.Rules, rr)
			}
			if rv.Verdict == Fail {
				failed++
			}
		}
		d.Rows = append(d.Rows, rv)
	}
	// A pass needs evidence: every row that has rules ran and met them.
	switch {
	case failed > 0:
		d.Verdict = Fail
	case unjudged > 0 || s.Interrupted:
		d.Verdict = Incomplete
	case judged == 0:
		d.Verdict = NoRules
	default:
		d.Verdict = Pass
	}
	d.Hypotheses = judgeHypotheses(plan, s)
	return d
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
	empty := map[string]bool{}
	for _, m := range env.EmptyMetrics() {
		empty[m] = true
	}
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
			if empty[op.Path[0]] {
				missing = append(missing, op.Path[0])
				continue
			}
			cl.Values = appendValue(cl.Values, op.Text, env)
		}
		switch {
		case len(missing) > 0:
			cl.Reason = strings.Join(dedupe(missing), ", ") + " has no samples"
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
func judgeHypotheses(plan *schema.Plan, s *metrics.Summary) []HypothesisVerdict {
	env := metrics.HypothesisEnv{Rows: map[string]metrics.RowEnv{}}
	usable := map[string]bool{}
	for i := range s.Rows {
		rs := &s.Rows[i]
		if rs.Status != metrics.RowNotRun && rs.Status != metrics.RowFailed && rs.Requests.Completed > 0 {
			env.Rows[rs.ID] = metrics.NewRowEnv(rs)
			usable[rs.ID] = true
		}
	}
	var out []HypothesisVerdict
	for _, h := range plan.Hypotheses {
		hv := HypothesisVerdict{ID: h.ID, Statement: h.Statement, Expect: h.Program.Source}
		var missing []string
		for _, id := range referencedRows(h.Program.Source) {
			if !usable[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			hv.Verdict = Inconclusive
			hv.Reason = "no data for row " + strings.Join(missing, ", ")
			out = append(out, hv)
			continue
		}
		skip := map[string]bool{}
		for _, m := range emptyOperands(h.Program.Source, env) {
			skip[m] = true
		}
		for _, op := range metrics.Operands(h.Program.Source) {
			if len(op.Path) >= 3 && skip["rows."+op.Path[1]+"."+op.Path[2]] {
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
			hv.Verdict, hv.Reason = Inconclusive, "it depends on "+strings.Join(emptyOperands(h.Program.Source, env), ", ")+", which has no samples"
		case a:
			hv.Verdict = Supported
		default:
			hv.Verdict = Refuted
		}
		out = append(out, hv)
	}
	return out
}

// emptyOperands names the row metrics a hypothesis reads that have no
// samples.
func emptyOperands(src string, env metrics.HypothesisEnv) []string {
	var out []string
	for _, op := range metrics.Operands(src) {
		if len(op.Path) < 3 {
			continue
		}
		for _, m := range env.Rows[op.Path[1]].EmptyMetrics() {
			if m == op.Path[2] {
				out = append(out, "rows."+op.Path[1]+"."+m)
			}
		}
	}
	return dedupe(out)
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
