package verdict

import (
	"fmt"
	"strings"

	"github.com/infermatrix/infermatrix/internal/numfmt"
)

// ProbeOutcome is what one probe of a search row showed: whether it
// passed, and if not why, in the words every record uses. The runner
// decides the search's next probe from it, and the record restates the
// search from it, so the two cannot disagree.
type ProbeOutcome struct {
	Passed bool `json:"passed"`
	// Invalid says the probe's figures could not be trusted (or it did
	// not run): it counts as not passing, since no limit is claimed that
	// a probe did not show.
	Invalid bool `json:"invalid,omitempty"`
	// Rule and Clause name the first failed rule and its clause, with
	// the values it read; Why says it all in one phrase.
	Rule   string  `json:"rule,omitempty"`
	Clause string  `json:"clause,omitempty"`
	Values []Value `json:"values,omitempty"`
	Why    string  `json:"why,omitempty"`
}

// OutcomeOf reads a probe's outcome from its row verdict (nil: the probe
// has none, so it did not run).
func OutcomeOf(rv *RowVerdict) ProbeOutcome {
	if rv == nil {
		return ProbeOutcome{Invalid: true, Why: "not run"}
	}
	switch rv.Verdict {
	case Pass:
		return ProbeOutcome{Passed: true}
	case NotRun, Skipped:
		return ProbeOutcome{Invalid: true, Why: "not run (" + rv.Verdict + ")"}
	case Invalid:
		var why []string
		for _, r := range rv.Validity.Reasons {
			why = append(why, r.Check+": "+r.Message)
		}
		if len(why) == 0 {
			why = []string{rv.Validity.Summary()}
		}
		return ProbeOutcome{Invalid: true, Why: "invalid (" + strings.Join(why, "; ") + ")"}
	}
	for _, rr := range rv.Rules {
		if rr.Pass {
			continue
		}
		o := ProbeOutcome{Rule: rr.Rule}
		switch {
		case len(rr.Failed) > 0:
			c := rr.Failed[0]
			o.Clause, o.Values = c.Text, c.Values
			var vals []string
			for _, v := range c.Values {
				vals = append(vals, v.Name+" "+numfmt.Num(v.Value))
			}
			o.Why = fmt.Sprintf("fails %s on `%s`", rr.Rule, c.Text)
			if len(vals) > 0 {
				o.Why = fmt.Sprintf("fails %s: %s (`%s`)", rr.Rule, strings.Join(vals, ", "), c.Text)
			}
			if c.Reason != "" {
				o.Why += ": " + c.Reason
			}
		case rr.Reason != "":
			o.Why = fmt.Sprintf("fails %s: %s", rr.Rule, rr.Reason)
		default:
			o.Why = "fails " + rr.Rule
		}
		return o
	}
	return ProbeOutcome{Why: rv.Verdict}
}
