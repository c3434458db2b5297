package schema

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestRamp: a ramp resolves to its levels, stops after its last step
// (steps × step_duration, whatever the defaults' stopping keys), keeps the
// row's rate settings, and prefill_concurrency reaches the planned row
// (swept rows included).
func TestRamp(t *testing.T) {
	p := mustParse(t, `defaults: {requests: 50, input_tokens: 8, output_tokens: 8, prefill_concurrency: 3}
rows:
  - {id: users, warmup: 4, ramp: {concurrency: {from: 4, to: 16, step: 4}, step_duration: 30s}}
  - {id: arrivals, rate: {arrival: constant, max_concurrency: 9}, ramp: {rate: {from: 0.1, to: 0.4, step: 0.1}, step_duration: 2s}}
  - {id: swept, concurrency: 2, sweep: {input_tokens: [16, 32]}}
`, Options{})
	u := p.Rows[0]
	if u.Load.Ramp == nil || !reflect.DeepEqual(u.Load.Ramp.Levels, []float64{4, 8, 12, 16}) || u.Load.Mode != ModeConcurrency || u.Load.Concurrency != 16 {
		t.Fatalf("users: load %+v, ramp %+v; want concurrency levels 4..16, peak 16", u.Load, u.Load.Ramp)
	}
	if u.Requests != 0 || u.Duration.D() != 2*time.Minute || u.Warmup != 4 {
		t.Errorf("users: requests %d, duration %v, warmup %d; want 0, 2m (4 steps of 30s), 4", u.Requests, u.Duration, u.Warmup)
	}
	if got := u.Load.String(); got != "concurrency 4→16 in 4 steps of 30s" {
		t.Errorf("users: load described as %q", got)
	}
	a := p.Rows[1]
	if a.Load.Mode != ModeRate || a.Load.Arrival != "constant" || a.Load.MaxConcurrency != 9 || a.Load.Rate != 0.4 ||
		!reflect.DeepEqual(a.Load.Ramp.Levels, []float64{0.1, 0.2, 0.3, 0.4}) {
		t.Errorf("arrivals: load %+v, levels %v; want constant rate, cap 9, levels 0.1..0.4 exactly", a.Load, a.Load.Ramp.Levels)
	}
	for _, r := range p.Rows {
		if r.PrefillConcurrency != 3 {
			t.Errorf("%s: prefill_concurrency %d; want 3 from defaults", r.ID, r.PrefillConcurrency)
		}
	}
	if a.Load.Ramp.Label(2) != "r=0.3" || u.Load.Ramp.Label(0) != "c=4" {
		t.Errorf("labels %q, %q; want r=0.3, c=4", a.Load.Ramp.Label(2), u.Load.Ramp.Label(0))
	}
}

// TestRampProblems: every mistake in a ramp is reported at once, at its
// position, with a hint.
func TestRampProblems(t *testing.T) {
	all := problemsText(t, header+`defaults: {input_tokens: 8, output_tokens: 8}
rows:
  - {id: both, concurrency: 3, ramp: {concurrency: {from: 2, to: 8, step: 2}, step_duration: 1s}}
  - {id: uneven, ramp: {concurrency: {from: 2, to: 7, step: 2}, step_duration: 1s}}
  - {id: down, ramp: {rate: {from: 4, to: 2, step: 1}, step_duration: 1s}}
  - {id: frac, ramp: {concurrency: {from: 1.5, to: 8, step: 2}, step_duration: 1s}}
  - {id: swept, ramp: {concurrency: {from: 1, to: 3, step: 1}, step_duration: 1s}, sweep: {concurrency: [1, 2]}}
  - {id: stops, duration: 5s, ramp: {rate: {from: 1, to: 3, step: 1}, step_duration: 1s}}
  - {id: nodur, ramp: {concurrency: {from: 1, to: 3, step: 1}}}
  - {id: persec, rate: {per_second: 2}, ramp: {rate: {from: 1, to: 3, step: 1}, step_duration: 1s}}
  - {id: many, ramp: {rate: {from: 1, to: 1000, step: 1}, step_duration: 1s}}
  - {id: gate, concurrency: 2, requests: 5, prefill_concurrency: 0}
  - {id: found, search: {concurrency: {min: 1, max: 8}}, ramp: {concurrency: {from: 1, to: 3, step: 1}, step_duration: 1s}}
`)
	for _, want := range []string{
		"test.yaml:6:29: rows[0].concurrency: concurrency is both set and ramped",
		"rows[1].ramp.concurrency.step: (to - from) / step is not a whole number of steps",
		"rows[2].ramp.rate.to: ramp to (2) is not above from (4)",
		"rows[3].ramp.concurrency.from: concurrency from must be an integer, got 1.5",
		"rows[4].sweep.concurrency: a row cannot both ramp and sweep its load",
		"rows[5].duration: duration cannot be set with a ramp",
		`rows[6].ramp.step_duration: missing required key "step_duration"`,
		"rows[7].rate.per_second: rate.per_second is both set and ramped",
		"rows[8].ramp.rate.step: the ramp has 1000 steps, over the limit of 256",
		"rows[9].prefill_concurrency: must be at least 1, got 0",
		"rows[10].ramp: a search row cannot also ramp",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing %q in:\n%s", want, all)
		}
	}
}
