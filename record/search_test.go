package record

import (
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

func fp(v float64) *float64 { return &v }

// TestSearchSentence: each way a search ends is said in one sentence that
// names the load, the hardware, the failing probe's rule and value, or why
// there is no bracket.
func TestSearchSentence(t *testing.T) {
	fails := &verdict.ProbeOutcome{Rule: "slo", Why: "fails slo: ttft.p95 1,210 (`ttft.p95 < 1000`)"}
	invalid := &verdict.ProbeOutcome{Invalid: true, Why: "invalid (samples: too few samples for ttft.p95)"}
	base := analysis.SearchAnalysis{Row: "sat", Vary: "concurrency", Min: 1, Max: 256, Probes: make([]analysis.SearchProbe, 7)}
	for _, c := range []struct {
		name string
		edit func(*analysis.SearchAnalysis)
		hw   schema.Hardware
		want string
	}{
		{"bracketed", func(s *analysis.SearchAnalysis) {
			s.Status, s.PassingValue, s.FailingValue, s.PassingRow, s.FailingRow, s.Failing = "bracketed", fp(37), fp(42), "sat/c=37", "sat/c=42", fails
		}, schema.Hardware{GPU: "H100", Count: 1},
			"Search `sat`: holds 37 users (`sat/c=37`) on one H100 under its rules; 42 (`sat/c=42`) fails slo: ttft.p95 1,210 (`ttft.p95 < 1000`)."},
		{"per GPU", func(s *analysis.SearchAnalysis) {
			s.Status, s.PassingValue, s.FailingValue, s.Failing = "bracketed", fp(37), fp(42), fails
		}, schema.Hardware{GPU: "H100", Count: 2}, "holds 37 users on 2× H100 (18.5 users per GPU)"},
		{"failing probe invalid", func(s *analysis.SearchAnalysis) {
			s.Status, s.PassingValue, s.FailingValue, s.Failing = "bracketed", fp(37), fp(42), invalid
		}, schema.Hardware{}, "42 was invalid (samples: too few samples for ttft.p95), so it counts as not passing."},
		{"all pass", func(s *analysis.SearchAnalysis) {
			s.Status, s.PassingValue, s.PassingRow = "all_pass", fp(256), "sat/c=256"
		}, schema.Hardware{},
			"holds the maximum, 256 users (`sat/c=256`), under its rules: the limit is above the range."},
		{"min fails", func(s *analysis.SearchAnalysis) { s.Status, s.FailingValue, s.Failing = "min_fails", fp(1), fails }, schema.Hardware{},
			"the minimum, 1 user, already fails slo: ttft.p95 1,210 (`ttft.p95 < 1000`): the limit is below the range."},
		{"min invalid", func(s *analysis.SearchAnalysis) { s.Status, s.FailingValue, s.Failing = "min_fails", fp(1), invalid }, schema.Hardware{},
			"the minimum, 1 user, was invalid (samples: too few samples for ttft.p95): it counts as not passing, so no limit can be claimed."},
		{"stopped", func(s *analysis.SearchAnalysis) { s.Status, s.PassingValue = "stopped", fp(16) }, schema.Hardware{},
			"stopped after 7 probes, before its answer; holds at least 16 users."},
		{"rate", func(s *analysis.SearchAnalysis) {
			s.Vary, s.Status, s.PassingValue, s.FailingValue, s.Failing = "rate", "bracketed", fp(3.5), fp(3.8), fails
		}, schema.Hardware{}, "holds 3.5 req/s under its rules; 3.8 fails slo"},
		{"not run", func(s *analysis.SearchAnalysis) { s.Status = analysis.NotRun }, schema.Hardware{}, "Search `sat`: did not run."},
	} {
		sa := base
		c.edit(&sa)
		if got := SearchSentence(sa, c.hw); !strings.Contains(got, c.want) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}
