package metrics

import (
	"math"

	"github.com/infermatrix/infermatrix/stats"
)

// DefaultConfidence is the level of the intervals a repeated row's summary
// gives, unless report.confidence says otherwise.
const DefaultConfidence = 0.95

// IntervalMethod names how Intervals are computed, for the summary's
// reader: Student's t over the trials' figures.
const IntervalMethod = "student_t_over_trials"

// Intervals are a repeated row's confidence intervals: for each headline
// figure, an interval for the mean of that figure over trials, computed by
// Student's t from the trials' own values (stats.TInterval). A trial's p95
// TTFT is one number; N trials give N of them, and the interval says where
// the p95 of another run of the same row would fall on average, at Level.
// It assumes the trials are independent draws of the same row (no drift
// from one to the next that the interleaving did not spread, no trial
// served from another's cache) and that the figure's trial-to-trial
// spread is roughly normal, which averages of hundreds of requests are.
//
// A row with one trial has no intervals: one value shows no spread.
type Intervals struct {
	Level  float64 `json:"level"`
	Method string  `json:"method"`
	// Trials is how many trials the intervals rest on.
	Trials     int              `json:"trials"`
	TTFT       DistBounds       `json:"ttft_ms"`
	TPOT       DistBounds       `json:"tpot_ms"`
	ITL        DistBounds       `json:"itl_ms"`
	E2E        DistBounds       `json:"e2e_ms"`
	Throughput ThroughputBounds `json:"throughput"`
	Goodput    GoodputBounds    `json:"goodput"`
	Errors     ErrorBounds      `json:"errors"`
}

// Bounds is one figure's interval. N is the number of trial values behind
// it: trials without a sample of the metric (a trial whose requests all
// failed has no TTFT) are left out, and below two values there is no
// interval (Known).
type Bounds struct {
	Lower float64 `json:"lower"`
	Upper float64 `json:"upper"`
	N     int     `json:"n"`
}

// Known reports whether the interval rests on two or more trials.
func (b Bounds) Known() bool { return b.N >= 2 }

// DistBounds are the intervals of a distribution's headline statistics.
type DistBounds struct {
	Mean Bounds `json:"mean"`
	P50  Bounds `json:"p50"`
	P90  Bounds `json:"p90"`
	P95  Bounds `json:"p95"`
	P99  Bounds `json:"p99"`
}

// ThroughputBounds are the intervals of the throughputs.
type ThroughputBounds struct {
	RequestsPerS      Bounds `json:"requests_per_s"`
	OutputTokensPerS  Bounds `json:"output_tokens_per_s"`
	InputTokensPerS   Bounds `json:"input_tokens_per_s"`
	TotalTokensPerS   Bounds `json:"total_tokens_per_s"`
	OutputTokensPerSU Bounds `json:"output_tokens_per_s_per_user"`
}

// GoodputBounds are the intervals of goodput.
type GoodputBounds struct {
	RequestsPerS Bounds `json:"requests_per_s"`
	Ratio        Bounds `json:"ratio"`
}

// ErrorBounds is the interval of the error ratio.
type ErrorBounds struct {
	Ratio Bounds `json:"ratio"`
}

// Figure is one headline figure a repeated row gives per trial and with
// an interval: its name in rules (tpot.p95), how to read it from a row's
// summary, and where its interval goes.
type Figure struct {
	Name string
	// Dist is the distribution it is a statistic of ("tpot"), empty for a
	// throughput, goodput or the error ratio.
	Dist string
	Get  func(*RowSummary) float64
	// bounds finds the figure's interval in an Intervals.
	bounds func(*Intervals) *Bounds
}

// Bounds returns the figure's interval in iv.
func (f Figure) Bounds(iv *Intervals) Bounds { return *f.bounds(iv) }

// Figures lists the headline figures of a repeated row, in the order
// reports show them.
var Figures = func() []Figure {
	var out []Figure
	dists := []struct {
		name string
		get  func(*Metrics) *Dist
		b    func(*Intervals) *DistBounds
	}{
		{"ttft", func(m *Metrics) *Dist { return &m.TTFT }, func(iv *Intervals) *DistBounds { return &iv.TTFT }},
		{"tpot", func(m *Metrics) *Dist { return &m.TPOT }, func(iv *Intervals) *DistBounds { return &iv.TPOT }},
		{"itl", func(m *Metrics) *Dist { return &m.ITL }, func(iv *Intervals) *DistBounds { return &iv.ITL }},
		{"e2e", func(m *Metrics) *Dist { return &m.E2E }, func(iv *Intervals) *DistBounds { return &iv.E2E }},
	}
	stats := []struct {
		name string
		get  func(*Dist) float64
		b    func(*DistBounds) *Bounds
	}{
		{"p50", func(d *Dist) float64 { return d.P50 }, func(b *DistBounds) *Bounds { return &b.P50 }},
		{"p90", func(d *Dist) float64 { return d.P90 }, func(b *DistBounds) *Bounds { return &b.P90 }},
		{"p95", func(d *Dist) float64 { return d.P95 }, func(b *DistBounds) *Bounds { return &b.P95 }},
		{"p99", func(d *Dist) float64 { return d.P99 }, func(b *DistBounds) *Bounds { return &b.P99 }},
		{"mean", func(d *Dist) float64 { return d.Mean }, func(b *DistBounds) *Bounds { return &b.Mean }},
	}
	for _, d := range dists {
		for _, s := range stats {
			out = append(out, Figure{
				Name: d.name + "." + s.name, Dist: d.name,
				Get:    func(rs *RowSummary) float64 { return s.get(d.get(&rs.Metrics)) },
				bounds: func(iv *Intervals) *Bounds { return s.b(d.b(iv)) },
			})
		}
	}
	plain := func(name string, get func(*RowSummary) float64, b func(*Intervals) *Bounds) {
		out = append(out, Figure{Name: name, Get: get, bounds: b})
	}
	plain("throughput.requests_per_s", func(s *RowSummary) float64 { return s.Throughput.RequestsPerS },
		func(iv *Intervals) *Bounds { return &iv.Throughput.RequestsPerS })
	plain("throughput.output_tokens_per_s", func(s *RowSummary) float64 { return s.Throughput.OutputTokensPerS },
		func(iv *Intervals) *Bounds { return &iv.Throughput.OutputTokensPerS })
	plain("throughput.input_tokens_per_s", func(s *RowSummary) float64 { return s.Throughput.InputTokensPerS },
		func(iv *Intervals) *Bounds { return &iv.Throughput.InputTokensPerS })
	plain("throughput.total_tokens_per_s", func(s *RowSummary) float64 { return s.Throughput.TotalTokensPerS },
		func(iv *Intervals) *Bounds { return &iv.Throughput.TotalTokensPerS })
	plain("throughput.output_tokens_per_s_per_user", func(s *RowSummary) float64 { return s.Throughput.OutputTokensPerSU },
		func(iv *Intervals) *Bounds { return &iv.Throughput.OutputTokensPerSU })
	plain("goodput.requests_per_s", func(s *RowSummary) float64 { return s.Goodput.RequestsPerS },
		func(iv *Intervals) *Bounds { return &iv.Goodput.RequestsPerS })
	plain("goodput.ratio", func(s *RowSummary) float64 { return s.Goodput.Ratio },
		func(iv *Intervals) *Bounds { return &iv.Goodput.Ratio })
	plain("errors.ratio", func(s *RowSummary) float64 { return s.Errors.Ratio },
		func(iv *Intervals) *Bounds { return &iv.Errors.Ratio })
	return out
}()

// FigureNamed returns the headline figure of this name (tpot.p95).
func FigureNamed(name string) (Figure, bool) {
	for _, f := range Figures {
		if f.Name == name {
			return f, true
		}
	}
	return Figure{}, false
}

// TrialIntervals computes a repeated row's intervals at level (0 means
// DefaultConfidence) from its trials' summaries. It returns nil for fewer
// than two trials. A trial whose distribution is empty gives no value for
// that distribution's figures, and a trial in which no request succeeded
// none for the throughputs and goodput either: its zeros are the absence
// of a measurement, not a measurement of zero.
func TrialIntervals(trials []RowSummary, level float64) *Intervals {
	if len(trials) < 2 {
		return nil
	}
	if level <= 0 {
		level = DefaultConfidence
	}
	iv := &Intervals{Level: level, Method: IntervalMethod, Trials: len(trials)}
	for _, f := range Figures {
		var xs []float64
		for i := range trials {
			t := &trials[i]
			if !figureMeasured(f, t) {
				continue
			}
			xs = append(xs, f.Get(t))
		}
		b := f.bounds(iv)
		b.N = len(xs)
		if len(xs) < 2 {
			continue
		}
		ci := stats.TInterval(xs, level)
		if math.IsNaN(ci.Lower) || math.IsNaN(ci.Upper) {
			b.N = 0
			continue
		}
		b.Lower, b.Upper = round6(ci.Lower), round6(ci.Upper)
	}
	return iv
}

// figureMeasured reports whether a trial measured the figure at all.
func figureMeasured(f Figure, t *RowSummary) bool {
	if f.Dist != "" {
		return distCountOf(t, f.Dist) > 0
	}
	if f.Name == "errors.ratio" {
		return t.Requests.Sent-t.Requests.Canceled > 0
	}
	return t.Requests.Completed > 0
}

func distCountOf(t *RowSummary, name string) int {
	switch name {
	case "ttft":
		return t.Metrics.TTFT.Count
	case "tpot":
		return t.Metrics.TPOT.Count
	case "itl":
		return t.Metrics.ITL.Count
	case "e2e":
		return t.Metrics.E2E.Count
	}
	return 0
}
