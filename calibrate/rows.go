package calibrate

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
)

// ErrNoUsableRows is returned (wrapped) for a run that has no row the fit
// can use: every row failed, or pooled (embeddings, rerank: no tokens are
// generated), or used a load pattern the fit does not replay.
var ErrNoUsableRows = errors.New("no usable rows")

// request is one measured request, as the fit replays it: when the load
// pattern sent it and how many tokens it carried each way by the server's
// count.
type request struct {
	seq       int64 // dispatch order
	scheduled int64 // ns from the row's start: when the pattern wanted it sent
	prompt    int
	output    int
	shared    int // leading prompt tokens shared with other requests on purpose
	warmup    bool
}

// row is one usable row of the measured run.
type row struct {
	plan     schema.PlannedRow
	api      string
	requests []request // in dispatch order, at most Options.MaxRequests
	measured figures
	// cacheHit is the server-reported prefix-cache hit ratio, when the
	// server reported cached tokens; a check on the replayed prompts.
	cacheHit *float64
	load     float64 // concurrency or rate, to order rows by load
	heldOut  bool
	// truncated says the replay keeps only the first of the row's
	// requests (Options.MaxRequests, maxReplayTokens).
	truncated bool
}

// figures are the three numbers the fit matches. An absent figure (the
// run did not measure it) is nil.
type figures struct {
	ttftP50, tpotP50, outputTPS *float64
	// ttftTail and tpotTail are p90 ÷ p50, the spread the noise
	// parameters set; absent with fewer than minTailSamples samples.
	ttftTail, tpotTail *float64
}

// maxReplayTokens bounds the output tokens replayed per row, whatever
// Options.MaxRequests allows: each is an engine event, and the fit replays
// every row hundreds of times.
const maxReplayTokens = 200_000

// minTailSamples is the fewest samples a p90 ÷ p50 is read from: below it
// the p90 is one or two requests.
const minTailSamples = 30

// tail is d's p90 ÷ p50, when d has the samples to say.
func tail(d metrics.Dist) *float64 {
	if d.Count < minTailSamples || d.P50 <= 0 || d.P90 <= 0 {
		return nil
	}
	return ptr(d.P90 / d.P50)
}

func (f figures) get(m int) *float64 {
	switch m {
	case metricTTFT:
		return f.ttftP50
	case metricTPOT:
		return f.tpotP50
	}
	return f.outputTPS
}

// The metrics, in table order.
const (
	metricTTFT = iota
	metricTPOT
	metricOutputTPS
	numMetrics
)

var metricNames = [numMetrics]string{"TTFT p50", "TPOT p50", "output tok/s"}

// run is what the fit reads of a run directory.
type run struct {
	dir       *rundir.Dir
	manifest  *rundir.Manifest
	rows      []*row   // by load mode, then load
	order     []*row   // the same rows in the order the run ran them
	skipped   []string // "row: why", for the report
	simulated *rundir.Simulated
}

func ptr(v float64) *float64 { return &v }

// readRun reads the manifest, the summaries and the records of every row
// the fit can use.
func readRun(path string, opts Options) (*run, error) {
	dir, err := rundir.Open(path)
	if err != nil {
		return nil, err
	}
	man, err := dir.Manifest()
	if err != nil {
		return nil, fmt.Errorf("read the run's manifest: %w", err)
	}
	r := &run{dir: dir, manifest: man, simulated: man.Server.Discovered.Simulated}
	top, _ := dir.Summary() // a killed run may lack it; rows have their own
	for _, p := range man.Rows {
		why := r.usable(p, opts)
		if why == "" {
			var rw *row
			rw, why = r.readRow(p, top, opts)
			if rw != nil {
				r.rows = append(r.rows, rw)
				continue
			}
		}
		r.skipped = append(r.skipped, p.ID+": "+why)
	}
	if len(r.rows) == 0 {
		return r, fmt.Errorf("%w in %s: %d rows, none the fit can replay (%s)", ErrNoUsableRows, path, len(man.Rows), joinSkipped(r.skipped))
	}
	r.order = slices.Clone(r.rows)
	slices.SortStableFunc(r.rows, func(a, b *row) int {
		if c := cmp.Compare(a.plan.Load.Mode, b.plan.Load.Mode); c != 0 {
			return c
		}
		return cmp.Compare(a.load, b.load)
	})
	return r, nil
}

func joinSkipped(s []string) string {
	if len(s) == 0 {
		return "the manifest plans none"
	}
	if len(s) > 4 {
		return fmt.Sprintf("%s; and %d more", joinSkipped(s[:4]), len(s)-4)
	}
	out := s[0]
	for _, x := range s[1:] {
		out += "; " + x
	}
	return out
}

// usable says why a planned row cannot be replayed, or "" if it can.
func (r *run) usable(p schema.PlannedRow, opts Options) string {
	api := p.API
	if api == "" {
		api = r.manifest.Server.Declared.API
	}
	switch {
	case p.Variant != opts.Variant:
		if opts.Variant == "" {
			return "runs under variant " + p.Variant + " (choose one with --variant)"
		}
		return "not of variant " + opts.Variant
	case metrics.IsPooling(api):
		return "a pooling row (" + api + "): it generates no tokens"
	case p.Search != nil:
		return "a search row as planned (its probes are rows of their own)"
	case p.Load.Ramp != nil:
		return "a ramped row: its load changes step by step"
	case p.Conversation != nil:
		return "a conversation row: its requests wait on each other's replies"
	case p.Repeat > 1:
		return "a repeated row: its trials are separate runs"
	case p.Load.Mode != schema.ModeConcurrency && p.Load.Mode != schema.ModeRate && p.Load.Mode != schema.ModeTrace:
		return "load mode " + p.Load.Mode + " is not replayed"
	}
	return ""
}

// readRow reads one row's summary and records.
func (r *run) readRow(p schema.PlannedRow, top *metrics.Summary, opts Options) (*row, string) {
	var s *metrics.RowSummary
	if top != nil {
		s = top.Row(p.ID)
	}
	if s == nil {
		var one metrics.RowSummary
		data, err := os.ReadFile(filepath.Join(r.dir.Path, rundir.RowFile(p.ID, rundir.SummaryFile)))
		if err != nil {
			return nil, "no summary (the row did not run)"
		}
		if err := json.Unmarshal(data, &one); err != nil {
			return nil, fmt.Sprintf("unreadable summary: %v", err)
		}
		s = &one
	}
	switch {
	case s.Status == metrics.RowFailed || s.Status == metrics.RowNotRun:
		return nil, "status " + s.Status
	case s.Requests.Completed == 0:
		return nil, "no request completed"
	}
	rw := &row{plan: p, api: p.API}
	if rw.api == "" {
		rw.api = r.manifest.Server.Declared.API
	}
	m := s.Metrics
	if m.TTFT.Count > 0 && m.TTFT.P50 > 0 {
		rw.measured.ttftP50 = ptr(m.TTFT.P50)
	}
	if m.TPOT.Count > 0 && m.TPOT.P50 > 0 {
		rw.measured.tpotP50 = ptr(m.TPOT.P50)
	}
	if s.Throughput.OutputTokensPerS > 0 {
		rw.measured.outputTPS = ptr(s.Throughput.OutputTokensPerS)
	}
	rw.measured.ttftTail, rw.measured.tpotTail = tail(m.TTFT), tail(m.TPOT)
	if s.Cache.Requests > 0 {
		rw.cacheHit = ptr(s.Cache.HitRatio)
	}
	switch p.Load.Mode {
	case schema.ModeConcurrency:
		rw.load = float64(p.Load.Concurrency)
	default:
		rw.load = p.Load.Rate
	}
	err := r.dir.ReadRecords(p.ID, func(rec *metrics.Record) error {
		if !rec.OK() {
			// A failed request loaded the server differently (or not
			// at all); it is left out of the replay.
			return nil
		}
		out := rec.OutputTokens.Count()
		if out < 1 {
			return nil
		}
		// What the server found cached was shared with an earlier
		// request, whatever the client declared: a chat template's
		// system prefix, say. The replay shares it too.
		shared := rec.SharedTokens
		if rec.CachedTokens != nil {
			shared = max(shared, *rec.CachedTokens)
		}
		rw.requests = append(rw.requests, request{seq: rec.Seq, scheduled: rec.ScheduledNS, prompt: max(rec.InputTokens.Count(), 1), output: out,
			shared: shared, warmup: rec.Warmup})
		return nil
	})
	if err != nil {
		return nil, fmt.Sprintf("unreadable records: %v", err)
	}
	// Records are appended as requests end; the replay sends them in
	// the order the load pattern did, the first MaxRequests of them.
	slices.SortStableFunc(rw.requests, func(a, b request) int { return cmp.Compare(a.seq, b.seq) })
	if opts.MaxRequests > 0 && len(rw.requests) > opts.MaxRequests {
		rw.requests, rw.truncated = rw.requests[:opts.MaxRequests], true
	}
	tokens := 0
	for i, q := range rw.requests {
		tokens += q.output
		if tokens > maxReplayTokens && i > 0 {
			rw.requests, rw.truncated = rw.requests[:i], true
			break
		}
	}
	measuredN := 0
	for _, q := range rw.requests {
		if !q.warmup {
			measuredN++
		}
	}
	if measuredN == 0 {
		return nil, "no successful measured request in its records"
	}
	if rw.measured == (figures{}) {
		return nil, "no TTFT, TPOT or output throughput measured"
	}
	return rw, ""
}
