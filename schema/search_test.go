package schema

import (
	"strings"
	"testing"
)

// TestSearchRow: a search row plans as one template at min, with its
// search's defaults; probes take its settings at their own load and id.
func TestSearchRow(t *testing.T) {
	p := mustParse(t, `defaults: {requests: 10, input_tokens: 8, output_tokens: 8, rate: {per_second: 2, arrival: constant}}
rows:
  - {id: sat, search: {concurrency: {min: 2, max: 64}}}
  - {id: open, search: {rate: {min: 0.5, max: 8}, resolution: {relative: 0.05}}}
acceptance:
  - {name: slo, expect: ttft.p95 < 1000}
`, Options{})
	c, r := p.Rows[0], p.Rows[1]
	if c.Search == nil || c.Search.Vary != "concurrency" || c.Search.Min != 2 || c.Search.Max != 64 || c.Search.Relative != 0.1 || c.Search.Absolute != 1 {
		t.Fatalf("concurrency search: %+v", c.Search)
	}
	if c.Load.Mode != ModeConcurrency || c.Load.Concurrency != 2 {
		t.Errorf("concurrency template load %+v", c.Load)
	}
	if r.Search == nil || r.Search.Vary != "rate" || r.Search.Relative != 0.05 || r.Search.Absolute != 0 || r.Load.Mode != ModeRate || r.Load.Arrival != "constant" {
		t.Fatalf("rate search: %+v, load %+v", r.Search, r.Load)
	}
	pr := ProbeRow(&r, 3, 3.46)
	if pr.ID != "open/r=3.46" || pr.Base != "open" || pr.Load.Rate != 3.46 || pr.SweepPoint["rate"] != 3.46 || pr.Probe.Index != 3 || pr.Search != nil {
		t.Errorf("probe %+v", pr)
	}
	p.WithProbes(map[string][]PlannedRow{"sat": {ProbeRow(&c, 1, 2), ProbeRow(&c, 2, 4)}, "open": {pr}})
	var ids []string
	for _, row := range p.Rows {
		ids = append(ids, row.ID)
	}
	if strings.Join(ids, " ") != "sat/c=2 sat/c=4 open/r=3.46" {
		t.Errorf("rows after WithProbes: %v", ids)
	}
	if len(p.Acceptance) != 1 || p.Acceptance[0].Sweep != SweepOperatingPoint || strings.Join(p.Acceptance[0].Rows, " ") != "sat/c=2 sat/c=4 open/r=3.46" {
		t.Errorf("rules after WithProbes: %+v", p.Acceptance)
	}
}

// TestSearchProblems: every misuse of search is reported at its key.
func TestSearchProblems(t *testing.T) {
	all := problemsText(t, header+`defaults: {requests: 10, input_tokens: 8, output_tokens: 8}
rows:
  - {id: both, search: {concurrency: {min: 1, max: 4}, rate: {min: 1, max: 2}}}
  - {id: inverted, search: {concurrency: {min: 8, max: 4}}}
  - {id: zero, search: {concurrency: {min: 0, max: 4}}}
  - {id: swept, search: {concurrency: {min: 1, max: 4}}, sweep: {input_tokens: [8, 16]}}
  - {id: repeated, repeat: 3, search: {concurrency: {min: 1, max: 4}}}
  - {id: mixed, rate: {per_second: 1}, search: {concurrency: {min: 1, max: 4}}}
  - {id: norate, search: {rate: {min: 1, max: 4}, resolution: {relative: 0}}}
  - {id: unjudged, search: {concurrency: {min: 1, max: 4}}}
  - {id: fixed, concurrency: 1}
acceptance:
  - {name: slo, rows: [both, inverted, zero, swept, repeated, mixed, norate], expect: ttft.p95 < 1000}
hypotheses:
  - {id: H1, statement: s, expect: rows.inverted.ttft.p95 > rows.fixed.ttft.p95}
`)
	for _, want := range []string{
		"test.yaml:6:62: rows[0].search.rate: a search varies one load",
		"test.yaml:7:56: rows[1].search.concurrency.max: max 4 is not above min 8",
		"rows[2].search.concurrency.min: must be at least 1",
		"rows[3].sweep: a search row cannot also sweep",
		"rows[4].repeat: a search row cannot repeat",
		"rows[5].rate: a concurrency search makes this a closed-loop row, but rate is set",
		"rows[6].search.resolution: a rate search with no resolution never stops",
		`rows[7].search: no acceptance rule judges search row "unjudged"`,
		"hypotheses[0].expect: rows.inverted.ttft.p95 names search row inverted",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing %q in:\n%s", want, all)
		}
	}
	// One mistake, one message: a broken search is not also a row
	// without load or without rules.
	if strings.Contains(all, "rows[0]: the row offers no load") || strings.Contains(all, `search row "both"`) {
		t.Errorf("follow-on problems of a broken search:\n%s", all)
	}
}
