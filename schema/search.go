package schema

import (
	"fmt"
	"slices"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/search"
)

// Search asks for a limit instead of a fixed load: the highest concurrency
// (or rate) at which the row still passes its rules and is valid. A sweep
// answers the same question only to the grid's spacing, and spends most of
// its points far from the answer.
type Search struct {
	Concurrency *SearchUsers      `yaml:"concurrency" json:"concurrency,omitempty" doc:"Search the closed loop's users between min and max."`
	Rate        *SearchRate       `yaml:"rate" json:"rate,omitempty" doc:"Search the open loop's arrival rate (requests per second) between min and max; the row's rate settings (arrival, max_concurrency) apply to every probe."`
	Resolution  *SearchResolution `yaml:"resolution" json:"resolution,omitempty" doc:"How close the answer must be: the search stops when the lowest failing load is within max(relative × the highest passing load, absolute) of it."`
}

// SearchUsers is a range of closed-loop users.
type SearchUsers struct {
	Min int `yaml:"min" json:"min,omitempty" doc:"The first probe: users the server should hold. If it fails, the search ends there." minimum:"1" maximum:"100000" required:"true"`
	Max int `yaml:"max" json:"max,omitempty" doc:"The most users probed; if it passes, the limit is above the range." minimum:"1" maximum:"100000" required:"true"`
}

// SearchRate is a range of arrival rates.
type SearchRate struct {
	Min float64 `yaml:"min" json:"min,omitempty" doc:"The first probe, in requests per second. If it fails, the search ends there." minimum:"0.0001" maximum:"1000000" required:"true"`
	Max float64 `yaml:"max" json:"max,omitempty" doc:"The highest rate probed; if it passes, the limit is above the range." minimum:"0.0001" maximum:"1000000" required:"true"`
}

// SearchResolution is how close a search's bracket must be.
type SearchResolution struct {
	Relative *float64 `yaml:"relative" json:"relative,omitempty" doc:"Width of the answer as a fraction of the highest passing load." default:"0.1" minimum:"0" maximum:"1"`
	Absolute *float64 `yaml:"absolute" json:"absolute,omitempty" doc:"Width of the answer in users or requests per second, whichever is larger than the relative width. Default 1 for concurrency, 0 for rate." minimum:"0"`
}

// SearchPlan is a search row's search, checked and with defaults.
type SearchPlan struct {
	// Vary is the dimension searched: concurrency or rate.
	Vary     string  `json:"vary"`
	Min      float64 `json:"min"`
	Max      float64 `json:"max"`
	Relative float64 `json:"relative"`
	Absolute float64 `json:"absolute,omitempty"`
}

// Strategy is the plan package search runs.
func (s SearchPlan) Strategy() search.Plan {
	return search.Plan{Min: s.Min, Max: s.Max, Integer: s.Vary == "concurrency", Relative: s.Relative, Absolute: s.Absolute}
}

// ProbeInfo marks a row run by a search: which search, in which order,
// and the search's plan, so that a record can restate the search from its
// rows alone.
type ProbeInfo struct {
	Search string     `json:"search"` // the search row's id, e.g. saturation
	Index  int        `json:"index"`  // 1 for the first probe
	Plan   SearchPlan `json:"plan"`
}

// search checks a row's search and sets base up as its template: the load
// mode searched, at min. The row stays one planned row; the runner makes
// the probes. It reports whether the search names its load, so that the
// row's other checks can go on.
func (r *resolver) search(row *Row, rowPath string, m *merged, base *PlannedRow) bool {
	sp := row.Search
	path := rowPath + ".search"
	hasC, hasR := sp.Concurrency != nil, sp.Rate != nil
	switch {
	case hasC && hasR:
		r.problem(path+".rate", "search concurrency and rate in separate rows", "a search varies one load: concurrency or rate, not both")
		return false
	case !hasC && !hasR:
		r.problem(path, "e.g. search: {concurrency: {min: 1, max: 256}}", "search needs concurrency or rate")
		return false
	}
	if row.Sweep != nil {
		r.problem(rowPath+".sweep", "put the sweep and the search in separate rows", "a search row cannot also sweep")
	}
	if m.Repeat != nil && *m.Repeat > 1 {
		r.problem(m.at("repeat"), "a search runs each probe once; remove repeat from this row (repeat: 1)", "a search row cannot repeat")
	}
	if m.Trace != nil {
		r.problem(m.at("trace"), "a trace fixes its own schedule", "a trace row cannot search a load")
	}
	plan := SearchPlan{Relative: search.DefaultRelative}
	if res := sp.Resolution; res != nil {
		if res.Relative != nil {
			plan.Relative = *res.Relative
		}
		if res.Absolute != nil {
			plan.Absolute = *res.Absolute
		}
	}
	if hasC {
		plan.Vary, plan.Min, plan.Max = "concurrency", float64(sp.Concurrency.Min), float64(sp.Concurrency.Max)
		if sp.Resolution == nil || sp.Resolution.Absolute == nil {
			plan.Absolute = search.DefaultUsers
		}
		if row.Settings.fieldSet("concurrency") {
			r.problem(rowPath+".concurrency", "the search sets it; remove one", "concurrency is both set and searched")
		}
		if m.Rate != nil {
			r.problem(m.at("rate"), "remove rate, or search rate instead", "a concurrency search makes this a closed-loop row, but rate is set")
		}
		base.Load = LoadPlan{Mode: ModeConcurrency, Concurrency: sp.Concurrency.Min}
	} else {
		plan.Vary, plan.Min, plan.Max = "rate", sp.Rate.Min, sp.Rate.Max
		if m.Concurrency != nil {
			r.problem(m.at("concurrency"), "remove concurrency, or search concurrency instead", "a rate search makes this an open-loop row, but concurrency is set")
		}
		if _, written := r.d.pos[rowPath+".rate.per_second"]; written {
			r.problem(rowPath+".rate.per_second", "the search sets the rate; keep arrival settings under rate", "rate.per_second is both set and searched")
		}
		if base.Load.Mode != ModeRate {
			base.Load = LoadPlan{Mode: ModeRate, Arrival: DefaultArrival}
		}
		base.Load.Rate = sp.Rate.Min
	}
	vp := path + "." + plan.Vary
	if plan.Min > 0 && plan.Max > 0 && plan.Max <= plan.Min {
		r.problem(vp+".max", "max must be above min", "max %g is not above min %g", plan.Max, plan.Min)
	}
	if plan.Vary == "rate" && plan.Relative == 0 && plan.Absolute == 0 {
		r.problem(path+".resolution", "set relative (e.g. 0.1) or absolute above 0", "a rate search with no resolution never stops")
	}
	base.Search = &plan
	return true
}

// searchRowsWithoutRules reports a search row that no acceptance rule
// names: with nothing to pass, there is no limit to find.
func (r *resolver) searchRowsWithoutRules(rows []PlannedRow, rules []AcceptanceRule) {
	for i, row := range r.exp.Rows {
		if row.Search == nil {
			continue
		}
		judged, planned := false, false
		for _, pr := range rows {
			if pr.Search == nil || pr.Base != row.ID && WithoutVariant(pr.Base) != row.ID {
				continue
			}
			planned = true
			for _, a := range rules {
				judged = judged || slices.Contains(a.Rows, pr.ID)
			}
		}
		if planned && !judged { // a broken search is reported already
			r.problem(indexPath("rows", i)+".search", "add an acceptance rule for the row, e.g. {name: slo, rows: ["+row.ID+"], expect: ttft.p95 < 1000}",
				"no acceptance rule judges search row %q: nothing decides which load passes", row.ID)
		}
	}
}

// hypothesesOnSearches refuses a hypothesis that names a search row: the
// row becomes probes whose loads are known only once it runs, so the name
// would read nothing and the hypothesis could only be inconclusive.
func (r *resolver) hypothesesOnSearches(rows []PlannedRow) {
	searches := map[string]bool{}
	for _, row := range rows {
		if row.Search != nil {
			searches[row.ID] = true
		}
	}
	if len(searches) == 0 {
		return
	}
	for i, h := range r.exp.Hypotheses {
		for _, op := range metrics.Operands(h.Expect) {
			if len(op.Path) > 1 && op.Path[0] == "rows" && searches[op.Path[1]] {
				r.problem(indexPath("hypotheses", i)+".expect", "a search's answer is in analysis.json and the decision record; compare rows of fixed load instead",
					"%s names search row %s, whose probes are known only when it runs", op.Text, op.Path[1])
				break
			}
		}
	}
}

// ProbeRow is probe number index (from 1) of the search row t at load v:
// t as planned, at that load, with its id and sweep point naming the load.
func ProbeRow(t *PlannedRow, index int, v float64) PlannedRow {
	p := *t
	p.Search = nil
	p.Probe = &ProbeInfo{Search: t.ID, Index: index, Plan: *t.Search}
	p.Base = t.ID
	short := "c"
	if t.Search.Vary == "concurrency" {
		p.Load.Concurrency = int(v)
	} else {
		short = "r"
		p.Load.Rate = v
	}
	p.SweepPoint = map[string]float64{t.Search.Vary: v}
	p.ID = WithoutVariant(t.ID) + "/" + short + "=" + search.FormatValue(v)
	if t.Variant != "" {
		p.ID += VariantSuffix(t.Variant)
	}
	return p
}

// WithProbes replaces each search row of the plan with the probes run for
// it (probes[search row id], in order; a search row with none stays, a
// row that did not run), and hands every rule that judged the search row to its probes as
// an operating_point rule: a probe past the limit is what the search looks
// for, not a failure of the run (verdict shows it rejected), and the run
// fails only when no probe passes. Reports judge the plan this returns.
func (p *Plan) WithProbes(probes map[string][]PlannedRow) {
	var rows []PlannedRow
	templates := map[string]bool{}
	for _, row := range p.Rows {
		if row.Search == nil || len(probes[row.ID]) == 0 {
			rows = append(rows, row)
			continue
		}
		templates[row.ID] = true
		rows = append(rows, probes[row.ID]...)
	}
	if len(templates) == 0 {
		return
	}
	p.Rows = rows
	var rules []AcceptanceRule
	for _, a := range p.Acceptance {
		var kept, moved []string
		for _, id := range a.Rows {
			if !templates[id] {
				kept = append(kept, id)
				continue
			}
			for _, pr := range probes[id] {
				moved = append(moved, pr.ID)
			}
		}
		if len(kept) > 0 || len(moved) == 0 {
			k := a
			k.Rows = kept
			rules = append(rules, k)
		}
		if len(moved) > 0 {
			m := a
			m.Rows, m.Sweep = moved, SweepOperatingPoint
			rules = append(rules, m)
		}
	}
	p.Acceptance = rules
}

// String describes a search plan in words: "concurrency 1 to 256".
func (s SearchPlan) String() string {
	unit := ""
	if s.Vary == "rate" {
		unit = " req/s"
	}
	return fmt.Sprintf("search %s %s to %s%s", s.Vary, search.FormatValue(s.Min), search.FormatValue(s.Max), unit)
}

// WorstCaseProbes is the most probes the search row can run.
func (r *PlannedRow) WorstCaseProbes() int {
	if r.Search == nil {
		return 0
	}
	return search.WorstCase(r.Search.Strategy())
}

// estimateSearch is the longest a search row can take: its worst-case
// number of probes, each as long as the longer of a probe at min and one
// at max (a closed loop with a request count finishes sooner with more
// users; one with a duration takes as long at any load).
func estimateSearch(r *PlannedRow, perRequest time.Duration) Estimate {
	var longest Estimate
	for _, v := range []float64{r.Search.Min, r.Search.Max} {
		p := *r
		p.Search = nil
		if r.Search.Vary == "concurrency" {
			p.Load.Concurrency = int(v)
		} else {
			p.Load.Rate = v
		}
		if e := EstimateRow(&p, perRequest); e.Duration > longest.Duration {
			longest = e
		}
	}
	longest.Duration *= time.Duration(r.WorstCaseProbes())
	return longest
}
