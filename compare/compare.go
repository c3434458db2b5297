package compare

import (
	"fmt"
	"hash/fnv"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/infermatrix/infermatrix/internal/suggest"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/stats"
	"github.com/infermatrix/infermatrix/validity"
)

// Format versions comparison.json.
const Format = "infermatrix.comparison/v1"

// Defaults: the confidence level of every interval, and the practical
// threshold a significant change must exceed to count (5%: smaller changes
// are within what a driver or engine upgrade is expected to move, and
// within the run-to-run spread of a real server that one run's records
// cannot see; docs/comparison.md).
const (
	DefaultLevel     = 0.95
	DefaultThreshold = 0.05
)

// Options shape a comparison.
type Options struct {
	// Level is the confidence level of the intervals (0: DefaultLevel).
	Level float64
	// Threshold is the practical threshold, a fraction (0: DefaultThreshold);
	// Thresholds overrides it per metric, keyed by a metric ("tpot.p95") or
	// a family ("tpot": all its percentiles).
	Threshold  float64
	Thresholds map[string]float64
	// Force compares runs of different experiments (different names), row
	// by row where ids and workloads match.
	Force bool
	// Resamples is the bootstrap's (0: stats' default).
	Resamples int
}

// Metric verdicts.
const (
	Regression  = "regression"  // worse by more than the threshold, the whole interval included
	Improvement = "improvement" // better by more than the threshold, the whole interval included
	// Possible: significant and past the threshold as measured, but the
	// interval reaches back inside it. Shown and listed, never a failure:
	// run-to-run noise the interval does not see (see docs/comparison.md)
	// lands here, not in Regression.
	Possible            = "possible regression"
	PossibleImprovement = "possible improvement"
	Within              = "within threshold"
	NoChange            = "no significant change"
	NotJudged           = "not judged" // shown, with Note saying why no claim is made
)

// Comparison verdicts.
const (
	VerdictRegression = "regression"
	VerdictOK         = "no regression"
	// VerdictNotComparable: no row could be compared (none in common, or
	// every one in common invalid or changed).
	VerdictNotComparable = "not comparable"
)

// Comparison is the result: comparison.json.
type Comparison struct {
	Format string  `json:"format"`
	Base   RunInfo `json:"base"`
	New    RunInfo `json:"new"`
	// Verdict is regression, no regression or not comparable; Why says
	// what decided it.
	Verdict    string             `json:"verdict"`
	Why        string             `json:"why"`
	Level      float64            `json:"level"`
	Threshold  float64            `json:"threshold"`
	Thresholds map[string]float64 `json:"thresholds,omitempty"`
	Resamples  int                `json:"resamples"`
	Seed       uint64             `json:"seed"`
	// Changes is what differs between the manifests.
	Changes []Change `json:"changes"`
	// Rows are the rows in both runs with the same workload; Diffs the
	// rows added, removed, or changed in their workload, not compared.
	Rows  []RowComparison `json:"rows"`
	Diffs []RowDiff       `json:"diffs,omitempty"`
	// Regressions lists every regression, most severe first; Possible
	// the possible regressions, which do not fail the comparison.
	Regressions []Finding `json:"regressions"`
	Possible    []Finding `json:"possible_regressions,omitempty"`
	Notes       []string  `json:"notes,omitempty"`

	base, new *Run
	samples   map[string]*rowSamples // by row id, for the plots
}

// RunInfo identifies one side.
type RunInfo struct {
	Path       string `json:"path"`
	Name       string `json:"name"`
	Experiment string `json:"experiment"`
	SHA256     string `json:"sha256"`
	Started    string `json:"started"`
	Verdict    string `json:"verdict,omitempty"`
}

// RowComparison is one matched row.
type RowComparison struct {
	ID string `json:"id"`
	// Comparable is false when either side's figures cannot be trusted
	// or did not run; Reason says which side and why, and Metrics is
	// empty: an invalid row is never a regression nor an improvement.
	Comparable bool           `json:"comparable"`
	Reason     string         `json:"reason,omitempty"`
	Metrics    []MetricChange `json:"metrics,omitempty"`
	// SweepPoint is the row's sweep values, for the overlay plots.
	Base       string             `json:"base_id,omitempty"`
	SweepPoint map[string]float64 `json:"sweep_point,omitempty"`
}

// MetricChange is one metric of one row.
type MetricChange struct {
	Metric string  `json:"metric"` // as rules name it: tpot.p95, throughput.output_tokens_per_s
	Unit   string  `json:"unit"`
	Base   float64 `json:"base"`
	New    float64 `json:"new"`
	// Change is (new − base) ÷ base, a fraction; for a ratio whose base is
	// zero it is the difference new − base in points (Absolute set).
	Change   float64 `json:"change"`
	Absolute bool    `json:"absolute,omitempty"`
	// CI is the interval of Change at the comparison's level; nil when
	// not judged.
	CI *Bounds `json:"ci,omitempty"`
	// P is the two-sided p-value of no change, where the method gives one.
	P *float64 `json:"p,omitempty"`
	// Significant: the interval excludes 0. Beyond: |Change| exceeds
	// Threshold. Confident: the whole interval lies beyond the threshold,
	// on the side of the change. Worse: the change is in the direction
	// that is worse for this metric (latency and errors up, throughput and
	// goodput down).
	Significant bool    `json:"significant"`
	Beyond      bool    `json:"beyond_threshold"`
	Confident   bool    `json:"confidently_beyond"`
	Worse       bool    `json:"worse"`
	Threshold   float64 `json:"threshold"`
	Verdict     string  `json:"verdict"`
	Method      string  `json:"method"`
	BaseN       int     `json:"base_n"`
	NewN        int     `json:"new_n"`
	Note        string  `json:"note,omitempty"`
}

// Bounds is a finite interval (stats.Interval without its NaNs, which JSON
// cannot carry).
type Bounds struct {
	Lower float64 `json:"lower"`
	Upper float64 `json:"upper"`
}

// Finding is one regression, for the list at the top of every rendering.
type Finding struct {
	Row    string  `json:"row"`
	Metric string  `json:"metric"`
	Base   float64 `json:"base"`
	New    float64 `json:"new"`
	Change float64 `json:"change"`
	CI     Bounds  `json:"ci"`
	Unit   string  `json:"unit"`
	// Possible marks a possible regression (see Possible).
	Possible bool `json:"possible,omitempty"`
}

// metricDef is one headline metric.
type metricDef struct {
	key, family, unit string
	// q is the percentile of a latency distribution; 0 for the rest.
	q    float64
	dist func(*metrics.Metrics) metrics.Dist
	// higherWorse: an increase is the bad direction.
	higherWorse bool
}

// headline lists the metrics compared, in the order shown.
func headline() []metricDef {
	var defs []metricDef
	for _, f := range []struct {
		name string
		dist func(*metrics.Metrics) metrics.Dist
	}{
		{"ttft", func(m *metrics.Metrics) metrics.Dist { return m.TTFT }},
		{"tpot", func(m *metrics.Metrics) metrics.Dist { return m.TPOT }},
		{"itl", func(m *metrics.Metrics) metrics.Dist { return m.ITL }},
		{"e2e", func(m *metrics.Metrics) metrics.Dist { return m.E2E }},
	} {
		for _, q := range []float64{50, 95, 99} {
			defs = append(defs, metricDef{key: f.name + "." + metrics.PercentileKey(q), family: f.name, unit: "ms", q: q, dist: f.dist, higherWorse: true})
		}
	}
	return append(defs,
		metricDef{key: "throughput.output_tokens_per_s", family: "throughput", unit: "tok/s"},
		metricDef{key: "throughput.requests_per_s", family: "throughput", unit: "req/s"},
		metricDef{key: "goodput.ratio", family: "goodput", unit: "ratio"},
		metricDef{key: "errors.ratio", family: "errors", unit: "ratio", higherWorse: true},
	)
}

// ThresholdKeys lists what --threshold accepts before the '=': each
// metric and each family.
func ThresholdKeys() []string {
	seen := map[string]bool{}
	var keys []string
	for _, d := range headline() {
		for _, k := range []string{d.family, d.key} {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// ParseThreshold reads one --threshold value: "5%" (the default for every
// metric), or "tpot=3%", "tpot.p95=3%", "errors.ratio=0.5%" for one metric
// or family. A bare fraction below 1 ("0.05") is read as such; a bare
// number of 1 or more is refused as ambiguous.
func ParseThreshold(s string) (key string, v float64, err error) {
	val := s
	if k, rest, ok := strings.Cut(s, "="); ok {
		key, val = strings.TrimSpace(k), rest
		known := false
		for _, k := range ThresholdKeys() {
			known = known || k == key
		}
		if !known {
			hint := ""
			if c := suggest.Closest(key, ThresholdKeys(), 3); len(c) > 0 {
				hint = "; did you mean " + suggest.Quote(c) + "?"
			}
			return "", 0, fmt.Errorf("threshold %q: unknown metric %q%s", s, key, hint)
		}
	}
	val = strings.TrimSpace(val)
	pct := strings.HasSuffix(val, "%")
	f, perr := strconv.ParseFloat(strings.TrimSuffix(val, "%"), 64)
	switch {
	case perr != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0:
		return "", 0, fmt.Errorf("threshold %q: want a percentage such as 5%% or tpot=3%%", s)
	case pct:
		v = f / 100
	case f < 1:
		v = f
	default:
		return "", 0, fmt.Errorf("threshold %q: write it as a percentage (%g%%) or a fraction (%g)", s, f, f/100)
	}
	return key, v, nil
}

func (o Options) level() float64 {
	if o.Level == 0 {
		return DefaultLevel
	}
	return o.Level
}

// threshold is the metric's practical threshold: its own, its family's,
// else the default.
func (o Options) threshold(d metricDef) float64 {
	if v, ok := o.Thresholds[d.key]; ok {
		return v
	}
	if v, ok := o.Thresholds[d.family]; ok {
		return v
	}
	if o.Threshold > 0 {
		return o.Threshold
	}
	return DefaultThreshold
}

// Compare compares two loaded runs. The error is ErrNotComparable (wrapped)
// when the runs are of different experiments without Force; a comparison
// with no row to compare is returned with VerdictNotComparable.
func Compare(base, new *Run, opts Options) (*Comparison, error) {
	if opts.Level <= 0 && opts.Level != 0 || opts.Level >= 1 {
		return nil, fmt.Errorf("confidence level %g: want a fraction in (0, 1), such as 0.95", opts.Level)
	}
	bn, nn := base.Manifest.Experiment.Name, new.Manifest.Experiment.Name
	if bn != nn && !opts.Force {
		return nil, fmt.Errorf("%w: the runs are of different experiments (%q and %q); --force compares the rows they share by id and workload anyway", ErrNotComparable, bn, nn)
	}
	c := &Comparison{
		Format: Format, Base: runInfo(base), New: runInfo(new),
		Level: opts.level(), Threshold: opts.threshold(metricDef{}), Thresholds: opts.Thresholds,
		Resamples: opts.Resamples, Seed: runSeed(base, new),
		Changes: ManifestChanges(base.Manifest, new.Manifest),
		base:    base, new: new, samples: map[string]*rowSamples{},
	}
	if c.Resamples == 0 {
		c.Resamples = 2000
	}
	if bn != nn {
		c.Notes = append(c.Notes, fmt.Sprintf("compared with --force: the runs are of different experiments (%q and %q)", bn, nn))
	}
	if filepath.Clean(base.Dir.Path) == filepath.Clean(new.Dir.Path) {
		c.Notes = append(c.Notes, "the base and the new run are the same directory")
	}
	sloSame := base.Summary.SLO == new.Summary.SLO
	if !sloSame {
		c.Notes = append(c.Notes, "the runs' SLOs differ: goodput.ratio is not compared")
	}
	matched, diffs := matchRows(base, new)
	c.Diffs = diffs
	for _, id := range matched {
		rc, err := c.compareRow(id, opts, sloSame)
		if err != nil {
			return nil, err
		}
		c.Rows = append(c.Rows, rc)
	}
	c.decide()
	return c, nil
}

func runInfo(r *Run) RunInfo {
	return RunInfo{Path: r.Dir.Path, Name: r.Name, Experiment: r.Manifest.Experiment.Name,
		SHA256: r.Manifest.Experiment.SHA256, Started: r.Manifest.Started.UTC().Format("2006-01-02 15:04:05Z"),
		Verdict: r.verdict()}
}

// verdict is the run's verdict as decision.json gives it.
func (r *Run) verdict() string { return r.runVerdict }

// runSeed derives the bootstrap's seed from the two runs' identities (their
// folder names and start times), so that comparing the same two runs
// always prints the same intervals, and comparing other runs draws other
// resamples.
func runSeed(base, new *Run) uint64 {
	h := fnv.New64a()
	for _, r := range []*Run{base, new} {
		fmt.Fprintf(h, "%s\x00%d\x00", r.Name, r.Manifest.Started.UnixNano())
	}
	return h.Sum64()
}

// metricSeed gives each row's metric its own stream of resamples, so a
// metric's interval does not depend on which metrics were computed before.
func (c *Comparison) metricSeed(row, metric string) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s\x00%s", c.Seed, row, metric)
	return h.Sum64()
}

// rowSamples are a row's figures by the run's own definitions, from its
// records, and each latency's values in blocks of consecutive requests for
// the block bootstrap (blocks.go).
type rowSamples struct {
	base, new             metrics.RowSummary
	baseBlocks, newBlocks blocks
}

// notComparable says why a row on one side has no figures to compare:
// it did not complete, or decision.json found it invalid.
func notComparable(side string, r *Run, id string) string {
	rs := r.Summary.Row(id)
	switch {
	case rs == nil:
		return side + ": no summary"
	case rs.Status != metrics.RowComplete:
		return side + ": " + strings.ReplaceAll(rs.Status, "_", " ")
	}
	if v, ok := r.Validity[id]; ok && !v.Valid {
		return side + ": " + v.Summary()
	}
	if _, ok := r.Validity[id]; !ok {
		return side + ": no validity verdict in decision.json; run `infermatrix report` on it"
	}
	return ""
}

func (c *Comparison) compareRow(id string, opts Options, sloSame bool) (RowComparison, error) {
	pr := c.new.planned(id)
	rc := RowComparison{ID: id, Base: pr.Base, SweepPoint: pr.SweepPoint}
	var why []string
	for _, s := range []struct {
		side string
		r    *Run
	}{{"base", c.base}, {"new", c.new}} {
		if w := notComparable(s.side, s.r, id); w != "" {
			why = append(why, w)
		}
	}
	if len(why) > 0 {
		rc.Reason = strings.Join(why, "; ")
		return rc, nil
	}
	bs, bb, err := summarise(c.base, id)
	if err != nil {
		rc.Reason = "base: " + err.Error()
		return rc, nil
	}
	ns, nb, err := summarise(c.new, id)
	if err != nil {
		rc.Reason = "new: " + err.Error()
		return rc, nil
	}
	c.samples[id] = &rowSamples{base: bs, new: ns, baseBlocks: bb, newBlocks: nb}
	rc.Comparable = true
	bsum, nsum := c.base.Summary.Row(id), c.new.Summary.Row(id)
	for _, d := range headline() {
		m := MetricChange{Metric: d.key, Unit: d.unit, Threshold: opts.threshold(d)}
		switch {
		case d.q > 0:
			c.percentileChange(&m, d, id, c.samples[id])
		case d.family == "throughput":
			c.throughputChange(&m, d, id, bsum, nsum)
		case d.key == "goodput.ratio":
			if !sloSame {
				m.Base, m.New = bsum.Goodput.Ratio, nsum.Goodput.Ratio
				m.Verdict, m.Note = NotJudged, "the runs' SLOs differ"
				break
			}
			if c.base.Summary.SLO.IsZero() {
				m.Verdict, m.Note = NotJudged, "no SLO: every request counts as good"
				m.Base, m.New = 1, 1
				break
			}
			bg, bn := goodBase(&bs), goodBase(&ns)
			proportionChange(&m, bs.Goodput.Good, bg, ns.Goodput.Good, bn, c.Level)
		case d.key == "errors.ratio":
			proportionChange(&m, bs.Errors.Total, bs.Requests.Sent-bs.Requests.Canceled, ns.Errors.Total, ns.Requests.Sent-ns.Requests.Canceled, c.Level)
		}
		judge(&m, d)
		if (d.family == "ttft" || d.family == "itl") && lockstep(pr) && (bsum == nil || len(bsum.Trials) < 2) {
			// See lockstep: at most a possible regression.
			switch m.Verdict {
			case Regression:
				m.Verdict = Possible
			case Improvement:
				m.Verdict = PossibleImprovement
			}
			if m.Verdict == Possible || m.Verdict == PossibleImprovement {
				m.Note = "equal lengths in a closed loop: users move in step, and this latency lands on a mode that another run may not; judged only with repeat"
			}
		}
		rc.Metrics = append(rc.Metrics, m)
	}
	return rc, nil
}

// goodBase is the number of requests goodput.ratio divides by, as the
// summary counts it: every measured request but deliberate cancellations
// (AIPerf's: every measured request).
func goodBase(rs *metrics.RowSummary) int {
	if rs.Semantics == metrics.SemAIPerf {
		return rs.Requests.Sent
	}
	return rs.Requests.Completed + rs.Errors.Total
}

// summarise summarises a row from its records as the run did (its
// percentiles, SLO, semantics and API), for the samples behind each
// distribution, and cuts each latency's values into blocks of consecutive
// requests. A row with trials has its records in rows/<id>/trial-<k>/:
// they are pooled, as the row's summary pools them, and no block spans two
// trials.
func summarise(r *Run, id string) (metrics.RowSummary, blocks, error) {
	row := r.planned(id)
	opts := metrics.Options{Percentiles: r.Summary.Percentiles, SLO: r.Summary.SLO, Semantics: r.Summary.Semantics,
		API: r.Manifest.Server.Declared.API}
	if row.Load.Mode == schema.ModeRate {
		opts.RequestedRate = row.Load.Rate
	}
	opts.OpenLoop = row.Load.Mode == schema.ModeRate || row.Load.Mode == schema.ModeTrace
	opts.Ramp = row.Load.Ramp.Metrics()
	agg := metrics.NewAggregator(opts)
	sem := r.semantics()
	var reqs []request
	part := 0
	add := func(rec *metrics.Record) error {
		agg.Add(rec)
		if !rec.Warmup && metrics.Succeeded(sem, rec) {
			reqs = append(reqs, newRequest(sem, opts.API, part, rec))
		}
		return nil
	}
	parts, err := r.Dir.RecordParts(id)
	if err != nil {
		return metrics.RowSummary{}, blocks{}, err
	}
	for i, p := range parts {
		part = i
		if _, err := r.Dir.ScanRecords(p, add); err != nil {
			return metrics.RowSummary{}, blocks{}, err
		}
	}
	rs := agg.Summary(id, row.Base, metrics.RowComplete)
	return rs, cutBlocks(reqs, rs.InFlight.Mean), nil
}

// percentileChange puts an interval on a latency percentile's change by a
// block bootstrap of the two sides' requests (blocks.go). A side with
// fewer samples than validity.MinSamples asks of the percentile is not
// judged: its largest sample cannot bound the percentile, and neither can a
// bootstrap of it; nor is one with fewer than minBlocks blocks.
func (c *Comparison) percentileChange(m *MetricChange, d metricDef, id string, s *rowSamples) {
	bv, nv := d.dist(&s.base.Metrics).Values(), d.dist(&s.new.Metrics).Values()
	m.BaseN, m.NewN = len(bv), len(nv)
	bb, nb := s.baseBlocks.of(d.family), s.newBlocks.of(d.family)
	m.Method = fmt.Sprintf("block bootstrap of the %s: blocks of %d and %d consecutive requests", metrics.PercentileKey(d.q), s.baseBlocks.size, s.newBlocks.size)
	need := validity.MinSamples(d.q)
	if len(bv) > 0 {
		m.Base = stats.Percentile(bv, d.q)
	}
	if len(nv) > 0 {
		m.New = stats.Percentile(nv, d.q)
	}
	if m.Base > 0 {
		m.Change = (m.New - m.Base) / m.Base
	}
	switch {
	case len(bv) < need || len(nv) < need:
		m.Verdict = NotJudged
		m.Note = fmt.Sprintf("too few samples for a %s (%d and %d; it needs %d)", metrics.PercentileKey(d.q), len(bv), len(nv), need)
		return
	case len(bb) < minBlocks || len(nb) < minBlocks:
		m.Verdict = NotJudged
		m.Note = fmt.Sprintf("too few blocks of requests to resample (%d and %d; it needs %d)", len(bb), len(nb), minBlocks)
		return
	}
	ch := clusteredChange(bb, nb, d.q, c.Level, c.Resamples, c.metricSeed(id, d.key))
	// The figures shown are the summaries' own; the interval is the
	// resampled one.
	ch.Base, ch.New, ch.Rel = m.Base, m.New, m.Change
	fromChange(m, ch)
}

// throughputChange compares a row's throughput. A throughput is a count
// over the row's window, one figure per run, not a mean of independent
// requests: resampling requests does not give it an interval, and without
// trials it is shown, not judged. With two trials or more on both sides
// (repeat), each trial's figure is a sample and their means are compared
// (stats.MeanChange).
func (c *Comparison) throughputChange(m *MetricChange, d metricDef, id string, b, n *metrics.RowSummary) {
	get := func(rs *metrics.RowSummary) float64 {
		if d.key == "throughput.requests_per_s" {
			return rs.Throughput.RequestsPerS
		}
		return rs.Throughput.OutputTokensPerS
	}
	m.Base, m.New = get(b), get(n)
	m.BaseN, m.NewN = 1, 1
	if m.Base > 0 {
		m.Change = (m.New - m.Base) / m.Base
	}
	if len(b.Trials) >= 2 && len(n.Trials) >= 2 {
		var bv, nv []float64
		for i := range b.Trials {
			bv = append(bv, get(&b.Trials[i]))
		}
		for i := range n.Trials {
			nv = append(nv, get(&n.Trials[i]))
		}
		m.BaseN, m.NewN = len(bv), len(nv)
		m.Method = "bootstrap of the mean over the trials"
		fromChange(m, stats.MeanChange(bv, nv, c.Level, stats.Bootstrap{Resamples: c.Resamples, Seed: c.metricSeed(id, d.key)}))
		return
	}
	m.Verdict = NotJudged
	m.Method = "one figure per run"
	m.Note = "one figure per run: no interval without repeated trials"
}

// proportionChange compares two ratios of counts (errors, goodput).
func proportionChange(m *MetricChange, bHits, bN, nHits, nN int, level float64) {
	m.BaseN, m.NewN = bN, nN
	m.Method = "difference of two proportions"
	if bN <= 0 || nN <= 0 {
		m.Verdict, m.Note = NotJudged, "no requests to count"
		return
	}
	ch := stats.ProportionChange(bHits, bN, nHits, nN, level)
	fromChange(m, ch)
	// A ratio moves in points: 2% of requests failing instead of 1% is
	// one point, not +100%, and a goodput of 4.6% falling to 0 at a
	// saturated sweep point is not a 100% regression. Its change and
	// interval are the difference new − base, its threshold in points.
	m.Change, m.Absolute = ch.New-ch.Base, true
	if m.CI != nil && !ch.Absolute {
		m.CI = &Bounds{Lower: m.CI.Lower * ch.Base, Upper: m.CI.Upper * ch.Base}
	}
}

// lockstep reports whether a row's users move in step: a closed loop whose
// every prompt and reply has the same length. Its users then stay in phase
// for the whole run, and when each one's first token waits (alone, or
// behind a batch's prefill) is set by the luck of the first steps: TTFT
// and ITL land on one of a few modes, the same mode for the whole run.
// Within one run nothing shows that a second run may land on another, so
// the interval is too narrow by a margin it cannot know.
func lockstep(pr *schema.PlannedRow) bool {
	constant := func(l schema.Length) bool {
		return l.Stddev == 0 && len(l.Values) <= 1 && (l.Max == 0 || l.Max == l.Min || l.Min == 0)
	}
	return pr != nil && pr.Load.Mode == schema.ModeConcurrency && pr.Dataset == nil && pr.Trace == nil &&
		constant(pr.Input) && constant(pr.Output)
}

// fromChange copies stats' result, leaving out what is not finite.
func fromChange(m *MetricChange, ch stats.Change) {
	m.Base, m.New = ch.Base, ch.New
	m.Change = finiteOr(ch.Rel, 0)
	m.Absolute = ch.Absolute
	if !math.IsNaN(ch.CI.Lower) && !math.IsNaN(ch.CI.Upper) && !math.IsInf(ch.CI.Lower, 0) && !math.IsInf(ch.CI.Upper, 0) {
		m.CI = &Bounds{Lower: ch.CI.Lower, Upper: ch.CI.Upper}
	}
	if !math.IsNaN(ch.P) {
		p := ch.P
		m.P = &p
	}
}

func finiteOr(v, or float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return or
	}
	return v
}

// judge gives a metric its verdict. A regression is a change in the
// direction worse for the metric whose whole interval lies beyond the
// threshold: the data say it is worse by more than the practical margin,
// not only that it changed. One run's interval sees the noise within the
// run, not how much a second run of the same matrix moves (the server's
// phase, the host's other work), so a change that is significant and
// past the threshold only as measured is a possible regression: listed,
// not failed. An improvement is the same the other way.
func judge(m *MetricChange, d metricDef) {
	if m.Verdict == NotJudged {
		return
	}
	if m.CI == nil {
		m.Verdict, m.Note = NotJudged, "no interval could be computed"
		return
	}
	m.Significant = m.CI.Lower > 0 || m.CI.Upper < 0
	m.Worse = (m.Change > 0) == d.higherWorse && m.Change != 0
	m.Beyond = math.Abs(m.Change) > m.Threshold
	m.Confident = m.CI.Lower > m.Threshold || m.CI.Upper < -m.Threshold
	switch {
	case !m.Significant:
		m.Verdict = NoChange
	case !m.Beyond:
		m.Verdict = Within
	case m.Worse && m.Confident:
		m.Verdict = Regression
	case m.Worse:
		m.Verdict = Possible
	case m.Confident:
		m.Verdict = Improvement
	default:
		m.Verdict = PossibleImprovement
	}
}

// decide lists the regressions and sets the verdict.
func (c *Comparison) decide() {
	compared := 0
	for _, rc := range c.Rows {
		if !rc.Comparable {
			continue
		}
		compared++
		for _, m := range rc.Metrics {
			if m.Verdict != Regression && m.Verdict != Possible {
				continue
			}
			f := Finding{Row: rc.ID, Metric: m.Metric, Base: m.Base, New: m.New, Change: m.Change, CI: *m.CI, Unit: m.Unit}
			switch m.Verdict {
			case Regression:
				c.Regressions = append(c.Regressions, f)
			case Possible:
				f.Possible = true
				c.Possible = append(c.Possible, f)
			}
		}
	}
	for _, fs := range [][]Finding{c.Regressions, c.Possible} {
		sort.SliceStable(fs, func(i, j int) bool { return math.Abs(fs[i].Change) > math.Abs(fs[j].Change) })
	}
	if c.Regressions == nil {
		c.Regressions = []Finding{}
	}
	counts := map[string]int{}
	for _, d := range c.Diffs {
		counts[d.Kind]++
	}
	var notCompared []string
	for _, k := range []string{RowAdded, RowRemoved, RowChanged} {
		if counts[k] > 0 {
			notCompared = append(notCompared, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	tail := ""
	if len(notCompared) > 0 {
		tail = "; rows not compared: " + strings.Join(notCompared, ", ")
	}
	if invalid := len(c.Rows) - compared; invalid > 0 {
		tail += fmt.Sprintf("; %d matched row%s not comparable (invalid or not run)", invalid, plural(invalid))
	}
	switch {
	case compared == 0:
		c.Verdict = VerdictNotComparable
		c.Why = "no row could be compared" + tail
	case len(c.Regressions) > 0:
		c.Verdict = VerdictRegression
		c.Why = fmt.Sprintf("%d regression%s beyond threshold, the whole interval included, in %d compared row%s%s", len(c.Regressions), plural(len(c.Regressions)), compared, plural(compared), tail)
	default:
		c.Verdict = VerdictOK
		c.Why = fmt.Sprintf("nothing regressed beyond its threshold in %d compared row%s%s", compared, plural(compared), tail)
		if n := len(c.Possible); n > 0 {
			c.Why += fmt.Sprintf("; %d possible regression%s, past the threshold as measured but not established (its interval reaches inside the threshold, or its row's users move in step): run again, or use repeat, to tell it from noise", n, plural(n))
		}
	}
}
