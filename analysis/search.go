package analysis

import (
	"cmp"
	"slices"

	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/search"
	"github.com/infermatrix/infermatrix/verdict"
)

// SearchAnalysis is what a search row found: the highest load that passed
// and the lowest above it that did not, restated from its probe rows and
// their verdicts exactly as the run decided its probes (package search
// replaying verdict.OutcomeOf), so analysis.json and the run agree.
type SearchAnalysis struct {
	Row  string  `json:"row"`  // the search row's id, e.g. saturation
	Vary string  `json:"vary"` // concurrency or rate
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
	// Status is bracketed, all_pass (max passed), min_fails, stopped
	// (the run ended first) or not_run.
	Status       string   `json:"status"`
	PassingValue *float64 `json:"passing_value"`
	FailingValue *float64 `json:"failing_value"`
	// PassingRow and FailingRow are the probes at those values.
	PassingRow string `json:"passing_row,omitempty"`
	FailingRow string `json:"failing_row,omitempty"`
	// Failing is why the failing probe did not pass.
	Failing *verdict.ProbeOutcome `json:"failing,omitempty"`
	Probes  []SearchProbe         `json:"probes"`
}

// SearchProbe is one probe, in the order the search ran them.
type SearchProbe struct {
	Row   string  `json:"row"`
	Value float64 `json:"value"`
	verdict.ProbeOutcome
}

// NotRun is a search's status when none of its probes ran.
const NotRun = "not_run"

// analyzeSearches restates every search of the plan, in plan order.
func analyzeSearches(plan *schema.Plan, d *verdict.Decision) []SearchAnalysis {
	if plan == nil {
		return nil
	}
	var out []SearchAnalysis
	at := map[string]int{}
	for i := range plan.Rows {
		r := &plan.Rows[i]
		switch {
		case r.Search != nil: // no probe ran
			out = append(out, SearchAnalysis{Row: r.ID, Vary: r.Search.Vary, Min: r.Search.Min, Max: r.Search.Max, Status: NotRun, Probes: []SearchProbe{}})
		case r.Probe != nil:
			j, ok := at[r.Probe.Search]
			if !ok {
				j = len(out)
				at[r.Probe.Search] = j
				sp := r.Probe.Plan
				out = append(out, SearchAnalysis{Row: r.Probe.Search, Vary: sp.Vary, Min: sp.Min, Max: sp.Max})
			}
			var rv *verdict.RowVerdict
			if d != nil {
				rv = d.Row(r.ID)
			}
			out[j].Probes = append(out[j].Probes, SearchProbe{Row: r.ID, Value: r.SweepPoint[r.Probe.Plan.Vary], ProbeOutcome: verdict.OutcomeOf(rv)})
		}
	}
	index := map[string]int{}
	for k := range plan.Rows {
		if p := plan.Rows[k].Probe; p != nil {
			index[plan.Rows[k].ID] = p.Index
		}
	}
	for i := range out {
		sa := &out[i]
		if sa.Status == NotRun {
			continue
		}
		slices.SortStableFunc(sa.Probes, func(a, b SearchProbe) int { return cmp.Compare(index[a.Row], index[b.Row]) })
		var probes []search.Probe
		var strategy search.Plan
		for _, p := range sa.Probes {
			probes = append(probes, search.Probe{Value: p.Value, Passed: p.Passed})
		}
		if r := plan.Row(sa.Probes[0].Row); r != nil {
			strategy = r.Probe.Plan.Strategy()
		}
		res := search.Replay(strategy, probes)
		sa.Status, sa.PassingValue, sa.FailingValue = string(res.Status), res.Passing, res.Failing
		for j := range sa.Probes {
			p := &sa.Probes[j]
			if res.Passing != nil && p.Value == *res.Passing && p.Passed {
				sa.PassingRow = p.Row
			}
			if res.Failing != nil && p.Value == *res.Failing && !p.Passed {
				sa.FailingRow = p.Row
				o := p.ProbeOutcome
				sa.Failing = &o
			}
		}
	}
	return out
}
