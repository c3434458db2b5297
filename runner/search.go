package runner

import (
	"context"
	"fmt"
	"strings"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/protocol"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/search"
	"github.com/infermatrix/infermatrix/verdict"
)

// searchRuns holds what a run's search rows have probed so far. Each probe
// is a row like any other: the records, summary and telemetry of
// rows/<search>/c=<N>/, prompts of its own (its id seeds them), prefix
// priming and warmup as a standalone row does them, so it starts from the
// state a standalone row at that load would.
type searchRuns struct {
	// base is the baseline run rules read, as the record judges them.
	base *verdict.Baseline
	// man is the run's manifest; its rows list each probe as it runs,
	// so a run stopped mid-search still says what it measured.
	man    *rundir.Manifest
	probes map[string][]schema.PlannedRow
	sums   map[string][]metrics.RowSummary
	// count numbers the run's probes, to keep their record ids apart.
	count int
}

func newSearchRuns(base *verdict.Baseline, man *rundir.Manifest) *searchRuns {
	return &searchRuns{base: base, man: man, probes: map[string][]schema.PlannedRow{}, sums: map[string][]metrics.RowSummary{}}
}

// runSearch runs search row t: probe after probe, each judged as the
// record will judge it (verdict.JudgeWith on a plan holding that probe),
// until package search has its answer. Its signature is runRow's, so that
// the run's row loop dispatches to it; the summary it returns stands for
// the search until the run ends and its probes replace it (expand).
func (st *runState) runSearch(ctx context.Context, t *schema.PlannedRow, index, trial int, cl *protocol.Client) (metrics.RowSummary, bool, error) {
	sr := st.searches
	placeholder := metrics.RowSummary{ID: t.ID, Base: t.Base, Status: metrics.RowNotRun}
	s, err := search.New(t.Search.Strategy())
	if err != nil {
		placeholder.Status, placeholder.Error = metrics.RowFailed, err.Error()
		return placeholder, false, fmt.Errorf("search: %w", err)
	}
	st.logf("search %s: %s, worst case %d probes", t.ID, strings.TrimPrefix(t.Search.String(), "search "), search.WorstCase(t.Search.Strategy()))
	for k := 1; ; k++ {
		v, ok := s.Next()
		if !ok {
			break
		}
		if ctx.Err() != nil {
			s.Stop()
			return placeholder, true, nil
		}
		probe := schema.ProbeRow(t, k, v)
		pp := probePlan(st.plan, t, probe)
		pst := *st
		pst.plan = pp
		sr.count++
		sum, interrupted, err := pst.runRow(ctx, &pp.Rows[0], len(st.plan.Rows)+sr.count, trial, cl)
		sum.Error = st.secrets.String(sum.Error)
		sr.probes[t.ID] = append(sr.probes[t.ID], probe)
		sr.sums[t.ID] = append(sr.sums[t.ID], sum)
		sr.note(st)
		placeholder = sum
		if err != nil || interrupted {
			s.Stop()
			return placeholder, interrupted, err
		}
		out := verdict.OutcomeOf(verdict.JudgeWith(pp, &metrics.Summary{
			Format: metrics.SummaryFormat, Percentiles: pp.Percentiles, SLO: pp.SLO, Semantics: pp.Semantics,
			Rows: []metrics.RowSummary{sum},
		}, sr.base).Row(probe.ID))
		word := "passes"
		if !out.Passed {
			word = out.Why
		}
		st.logf("search %s: probe %d, %s: %s", t.ID, k, probe.ID, word)
		s.Record(v, out.Passed)
	}
	r := s.Result()
	st.logf("search %s: %s", t.ID, describe(t.Search.Vary, r))
	return placeholder, false, nil
}

// describe is the search's answer in a log line.
func describe(vary string, r search.Result) string {
	f := func(p *float64) string {
		if p == nil {
			return "none"
		}
		return search.FormatValue(*p)
	}
	return fmt.Sprintf("%s (%s passing %s, failing %s, %d probes)", r.Status, vary, f(r.Passing), f(r.Failing), len(r.Probes))
}

// probePlan is the plan one probe is run and judged under: the run's, with
// the probe as its only row and the search row's rules on it, as the
// record's plan will have them (Plan.WithProbes).
func probePlan(plan *schema.Plan, t *schema.PlannedRow, probe schema.PlannedRow) *schema.Plan {
	pp := *plan
	pp.Rows = []schema.PlannedRow{*t}
	pp.Skipped, pp.Hypotheses = nil, nil
	pp.Acceptance = nil
	for _, a := range plan.Acceptance {
		for _, id := range a.Rows {
			if id == t.ID {
				a.Rows = []string{t.ID}
				pp.Acceptance = append(pp.Acceptance, a)
				break
			}
		}
	}
	pp.WithProbes(map[string][]schema.PlannedRow{t.ID: {probe}})
	return &pp
}

// note brings the manifest's rows up to date with the probes run so far.
// The manifest on disk is rewritten when the run ends; this keeps the one
// in memory (and any later write) honest if the run stops mid-search.
func (sr *searchRuns) note(st *runState) {
	if sr.man == nil {
		return
	}
	p := *st.plan
	p.WithProbes(sr.probes)
	sr.man.Rows = p.Rows
	_ = st.dir.WriteJSON(rundir.ManifestFile, sr.man)
}

// expand replaces, at the end of the run, each search row with its probes:
// in the plan (which the caller's reports then judge), the manifest's rows
// and the summaries. A search row none of whose probes ran stays as it
// is, a row that did not run.
func (sr *searchRuns) expand(plan *schema.Plan, rows []metrics.RowSummary) []metrics.RowSummary {
	if len(sr.probes) == 0 {
		return rows
	}
	var out []metrics.RowSummary
	for i := range plan.Rows {
		if i >= len(rows) {
			break
		}
		id := plan.Rows[i].ID
		if plan.Rows[i].Search != nil && len(sr.sums[id]) > 0 {
			out = append(out, sr.sums[id]...)
			continue
		}
		out = append(out, rows[i])
	}
	plan.WithProbes(sr.probes)
	if sr.man != nil {
		sr.man.Rows = plan.Rows
	}
	return out
}
