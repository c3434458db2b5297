// Package reports judges a run and writes its decision record: acceptance
// verdicts per row with the clause that failed, hypothesis verdicts with the
// numbers that decided them, and the files reviewers read (decision.md,
// decision.json, summary.csv).
//
// Everything here works from a run's data alone (plan, summary, manifest),
// so a run directory can be re-judged and re-rendered long after the run.
package reports

import (
	"fmt"
	"sort"
	"strings"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

// Verdicts.
const (
	Pass    = "pass"
	Fail    = "fail"
	NoRules = "no rules" // no acceptance rule names the row
	NotRun  = "not run"  // the row did not run (interrupted before it, or the tool failed)
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
	failed := 0
	for i := range s.Rows {
		rs := &s.Rows[i]
		rv := RowVerdict{ID: rs.ID}
		switch {
		case rs.Status == metrics.RowNotRun || rs.Status == metrics.RowFailed:
			rv.Verdict = NotRun
		case len(rules[rs.ID]) == 0:
			rv.Verdict = NoRules
		default:
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
	switch {
	case failed > 0:
		d.Verdict = Fail
	case s.Interrupted:
		d.Verdict = NotRun
	default:
		d.Verdict = Pass
	}
	d.Hypotheses = judgeHypotheses(plan, s)
	return d
}

// distNames are the metrics that are distributions; a rule reading one with
// no samples cannot be judged true.
var distNames = map[string]bool{
	"ttft": true, "ttfo": true, "ttst": true, "itl": true, "tpot": true,
	"e2e": true, "queue": true, "input_tokens": true, "output_tokens": true,
}

// judgeRule evaluates a rule on a row, clause by clause.
//
// A row with no successful request fails every rule: an expression like
// "ttft.p95 < 1000" would otherwise pass on the zero of an empty
// distribution. For the same reason a clause that reads a metric with no
// samples fails, saying so.
func judgeRule(rule schema.AcceptanceRule, rs *metrics.RowSummary, env metrics.RowEnv) RuleResult {
	rr := RuleResult{Rule: rule.Name, Expect: rule.Program.Source}
	if rs.Requests.Completed == 0 {
		rr.Reason = fmt.Sprintf("no successful requests (%d sent, %d failed)", rs.Requests.Sent, rs.Requests.Failed)
		return rr
	}
	ok, err := rule.Program.Run(env)
	if err != nil {
		rr.Reason = err.Error()
		return rr
	}
	for _, c := range rule.Program.Conjuncts() {
		cl := Clause{Text: c}
		for _, op := range metrics.Operands(c) {
			if root := op.Path[0]; distNames[root] && distCount(env, root) == 0 {
				cl.Reason = fmt.Sprintf("%s has no samples", root)
				continue
			}
			cl.Values = appendValue(cl.Values, op.Text, env)
		}
		held, err := metrics.Value(c, env)
		b, isBool := held.(bool)
		switch {
		case cl.Reason != "":
			ok = false
			rr.Failed = append(rr.Failed, cl)
		case err != nil:
			cl.Reason = err.Error()
			rr.Failed = append(rr.Failed, cl)
		case isBool && !b:
			rr.Failed = append(rr.Failed, cl)
		}
	}
	rr.Pass = ok && len(rr.Failed) == 0
	if !rr.Pass && len(rr.Failed) == 0 {
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

func distCount(env metrics.RowEnv, name string) int {
	v, err := metrics.Value(name+".count", env)
	if err != nil {
		return -1
	}
	n, _ := v.(int)
	return n
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
		for _, op := range metrics.Operands(h.Program.Source) {
			hv.Values = appendValue(hv.Values, op.Text, env)
		}
		ok, err := h.Program.Run(env)
		switch {
		case err != nil:
			hv.Verdict, hv.Reason = Inconclusive, err.Error()
		case ok:
			hv.Verdict = Supported
		default:
			hv.Verdict = Refuted
		}
		out = append(out, hv)
	}
	return out
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
