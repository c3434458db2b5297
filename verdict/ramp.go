package verdict

import (
	"fmt"
	"strings"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/validity"
)

// StepVerdict is one step of a ramped row, judged as a sweep point is: its
// own validity, and the row's rules applied to its own figures.
type StepVerdict struct {
	Step  int    `json:"step"`
	Label string `json:"label"`
	// Verdict is pass, fail, invalid (its figures cannot be trusted) or
	// no_rules.
	Verdict  string           `json:"verdict"`
	Validity validity.Verdict `json:"validity"`
	Rules    []RuleResult     `json:"rules,omitempty"`
}

// RampVerdict is what the rules found along a ramp: each step's verdict,
// and the operating step, the highest valid step that passes every rule
// (empty when none does).
type RampVerdict struct {
	Steps     []StepVerdict `json:"steps"`
	Operating string        `json:"operating_step,omitempty"`
	// Rejected lists the valid steps above the operating step that fail
	// (past capacity), Unjudged the invalid steps above it.
	Rejected []string `json:"rejected,omitempty"`
	Unjudged []string `json:"unjudged,omitempty"`
}

// judgeRamp judges a ramped row step by step and folds the steps into
// the row's verdict, replacing the rules' results on the pooled figures
// (which mix every level, and answer nothing):
//
//   - A rule (each_point, the default) holds for the row when it holds at
//     every step; it fails at the first valid step that fails it, and the
//     row fails. With no valid step failing, an invalid step makes the row
//     invalid (inconclusive): its figures cannot say whether it passes.
//   - An operating_point rule asks only that the ramp has an operating
//     step: it holds when one exists and no step above it was invalid;
//     the steps above it that fail are rejected (past capacity) without
//     failing the row. With no passing step and every step valid the row
//     fails; otherwise it is invalid.
//
// The row's own validity still applies (the client, the whole window);
// its load check is made per step (validity skips it for a ramped row).
func judgeRamp(row *schema.PlannedRow, rs *metrics.RowSummary, rules []schema.AcceptanceRule, cfg schema.ValidityPlan, rv *RowVerdict) {
	if row == nil || row.Load.Ramp == nil || len(rs.Steps) == 0 {
		return
	}
	rp := &RampVerdict{}
	opPoint := false
	for _, r := range rules {
		opPoint = opPoint || r.Sweep == schema.SweepOperatingPoint
	}
	for i := range rs.Steps {
		st := &rs.Steps[i]
		pr := stepRow(row, st)
		sv := StepVerdict{Step: st.Step, Label: st.Label}
		sv.Validity = validity.Row(validity.Input{Row: pr, Summary: &st.RowSummary, Rules: rules, Config: cfg})
		env := metrics.NewRowEnv(&st.RowSummary)
		for _, rule := range rules {
			if readsBaseline(rule) {
				// A baseline run has rows, not this run's steps: the
				// rule keeps judging the row (see below).
				sv.Rules = append(sv.Rules, RuleResult{Rule: rule.Name, Expect: rule.Program.Source, Pass: true, Unjudged: "reads the baseline run, which is compared row by row"})
				continue
			}
			sv.Rules = append(sv.Rules, judgeRule(rule, &st.RowSummary, env))
		}
		switch {
		case len(rules) == 0:
			sv.Verdict = NoRules
		case !sv.Validity.Valid:
			sv.Verdict = Invalid
		default:
			sv.Verdict = Pass
			for _, rr := range sv.Rules {
				if !rr.Pass {
					sv.Verdict = Fail
				}
			}
		}
		rp.Steps = append(rp.Steps, sv)
	}
	op := -1
	for i, sv := range rp.Steps {
		if sv.Verdict == Pass {
			op = i
		}
	}
	if op >= 0 {
		rp.Operating = rp.Steps[op].Label
	}
	for _, sv := range rp.Steps[op+1:] {
		switch sv.Verdict {
		case Fail:
			rp.Rejected = append(rp.Rejected, sv.Label)
		case Invalid:
			rp.Unjudged = append(rp.Unjudged, sv.Label)
		}
	}
	rv.Ramp = rp
	if len(rules) == 0 {
		return
	}

	// The row's rule results, from the steps'.
	firstFail := -1
	var invalid []string
	for i, sv := range rp.Steps {
		if sv.Verdict == Fail && firstFail < 0 {
			firstFail = i
		}
		if sv.Verdict == Invalid {
			invalid = append(invalid, sv.Label)
		}
	}
	whole := rv.Rules
	rv.Rules = nil
	failing := false // a rule failed on valid steps alone
	for k, rule := range rules {
		rr := RuleResult{Rule: rule.Name, Expect: rule.Program.Source, Pass: true}
		if readsBaseline(rule) && k < len(whole) {
			rr = whole[k]
			rr.Sweep = ""
			failing = failing || (!rr.Pass && rr.Unjudged == "")
			rv.Rules = append(rv.Rules, rr)
			continue
		}
		if rule.Sweep == schema.SweepOperatingPoint {
			rr.Pass = op >= 0 && len(rp.Unjudged) == 0
			switch {
			case rr.Pass:
			case op >= 0:
				rr.Reason = fmt.Sprintf("operating step at least %s, but %s, above it, could not be judged (invalid)", rp.Operating, strings.Join(rp.Unjudged, ", "))
			case len(invalid) == 0:
				rr.Reason = "no operating step: every step was valid and none passes"
				failing = true
			default:
				rr.Reason = fmt.Sprintf("no valid step passes, and %s could not be judged (invalid)", strings.Join(invalid, ", "))
			}
		} else {
			for _, sv := range rp.Steps {
				if sv.Verdict != Invalid && !sv.Rules[k].Pass {
					rr.Pass, failing = false, true
					rr.Failed = stepClauses(sv.Label, sv.Rules[k])
					rr.Reason = sv.Rules[k].Reason
					if rr.Reason != "" {
						rr.Reason = "at " + sv.Label + ": " + rr.Reason
					}
					break
				}
			}
		}
		rv.Rules = append(rv.Rules, rr)
	}
	// An invalid step that the verdict rests on makes the row invalid,
	// unless a valid step already failed it. Under operating_point only
	// the invalid steps above the operating step matter.
	var blame []string
	switch {
	case failing:
	case opPoint && !eachPointRule(rules):
		blame = rp.Unjudged
		if op < 0 {
			blame = invalid
		}
	default:
		blame = invalid
	}
	for _, label := range blame {
		for _, sv := range rp.Steps {
			if sv.Label != label {
				continue
			}
			for _, r := range sv.Validity.Reasons {
				rv.Validity.Valid = false
				rv.Validity.Reasons = append(rv.Validity.Reasons, validity.Reason{Check: r.Check, Message: "step " + label + ": " + r.Message, Fix: r.Fix})
			}
		}
	}
}

// isRamped reports whether a planned row has a ramp.
func isRamped(r *schema.PlannedRow) bool { return r != nil && r.Load.Ramp != nil }

// eachPointRule reports whether any rule judges every step.
func eachPointRule(rules []schema.AcceptanceRule) bool {
	for _, r := range rules {
		if r.Sweep != schema.SweepOperatingPoint {
			return true
		}
	}
	return false
}

// stepClauses names the step in each failed clause, so that the row's
// result says where it failed.
func stepClauses(label string, rr RuleResult) []Clause {
	out := make([]Clause, len(rr.Failed))
	for i, c := range rr.Failed {
		c.Text = label + ": " + c.Text
		out[i] = c
	}
	return out
}

// stepRow is the planned row as one step of its ramp: the step's load,
// without the ramp, so that validity checks the load the step offered.
func stepRow(row *schema.PlannedRow, st *metrics.StepSummary) *schema.PlannedRow {
	pr := *row
	pr.Load.Ramp = nil
	pr.Duration = row.Load.Ramp.StepDuration
	if st.Concurrency > 0 {
		pr.Load.Concurrency = st.Concurrency
	} else {
		pr.Load.Rate = st.Rate
	}
	return &pr
}

// Describe says in one sentence what the ramp found, for the renderers.
func (rp *RampVerdict) Describe() string {
	if rp == nil {
		return ""
	}
	var b strings.Builder
	where := " above it"
	if rp.Operating != "" {
		fmt.Fprintf(&b, "Operating step `%s`: the highest valid step that passes every rule", rp.Operating)
	} else {
		b.WriteString("No step is both valid and passing")
		where = ""
	}
	if len(rp.Rejected) > 0 {
		fmt.Fprintf(&b, "; failing%s (past capacity): `%s`", where, strings.Join(rp.Rejected, "`, `"))
	}
	if len(rp.Unjudged) > 0 {
		fmt.Fprintf(&b, "; invalid%s: `%s`", where, strings.Join(rp.Unjudged, "`, `"))
	}
	return b.String()
}
