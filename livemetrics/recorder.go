// Package livemetrics keeps a run's own figures while it runs (requests in
// flight, completed, errors by class, TTFT, ITL and dispatch-lag
// histograms, output tokens) and serves them in the Prometheus text
// format, so that a long run, or every shard of a distributed one, can be
// watched from Prometheus and Grafana (docs/live-metrics.md).
//
// The run directory stays the record: these figures are a live view of
// the same records, summed into counters and bucketed into histograms, and
// are gone when the process exits. The exact percentiles are the summary's.
//
// It imports metrics only, so that runner can feed it without reports or
// anything above.
package livemetrics

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/common/model"

	"github.com/infermatrix/infermatrix/metrics"
)

// Options configure a Recorder.
type Options struct {
	// Labels are put on every series the recorder exports, and on
	// infermatrix_run_info: shard="2/4" for shard 2 of 4 of a distributed
	// run, so that one dashboard tells the shards apart. Empty for a
	// run that is not sharded.
	Labels map[string]string
}

// reserved are the label names the recorder sets itself.
var reserved = []string{"row", "outcome", "class", "le", "experiment", "run_id"}

// Recorder keeps the live figures of one run. It is safe for concurrent
// use; a nil *Recorder records nothing, so callers need no checks.
type Recorder struct {
	labels []pair // Options.Labels, sorted by name

	mu   sync.Mutex
	rows map[string]*Row
	ids  []string // in the order the rows started

	info atomic.Pointer[runInfo]
}

type pair struct{ name, value string }

type runInfo struct{ experiment, runID string }

// New returns a recorder with no rows yet. Label names must be valid
// Prometheus names and not one the recorder sets itself.
func New(opts Options) (*Recorder, error) {
	r := &Recorder{rows: map[string]*Row{}}
	for _, k := range slices.Sorted(maps.Keys(opts.Labels)) {
		if !model.LegacyValidation.IsValidLabelName(k) {
			return nil, fmt.Errorf("live metrics label %q: not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)", k)
		}
		if slices.Contains(reserved, k) {
			return nil, fmt.Errorf("live metrics label %q: the recorder sets it itself", k)
		}
		r.labels = append(r.labels, pair{k, opts.Labels[k]})
	}
	return r, nil
}

// Start names the run the figures belong to, for infermatrix_run_info:
// the experiment's name and the run id, the prefix of every request's
// X-Request-Id, which finds the run's requests in the server's logs.
func (r *Recorder) Start(experiment, runID string) {
	if r == nil {
		return
	}
	r.info.Store(&runInfo{experiment: experiment, runID: runID})
}

// Row returns the figures of the row with this id, made on first use. A
// repeated row's trials share it. lagged says the row has a schedule
// (open loop, or a rate cap): only then is its dispatch lag observed, as
// a closed-loop request is due whenever its user is free.
func (r *Recorder) Row(id string, lagged bool) *Row {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.rows[id]; ok {
		return w
	}
	w := &Row{id: id, lagged: lagged, errs: make([]atomic.Uint64, len(metrics.ErrorClasses)+1),
		ttft: newHistogram(TTFTBuckets), itl: newHistogram(ITLBuckets), lag: newHistogram(LagBuckets)}
	r.rows[id] = w
	r.ids = append(r.ids, id)
	return w
}

// snapshot returns the rows in the order they started.
func (r *Recorder) snapshot() []*Row {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Row, len(r.ids))
	for i, id := range r.ids {
		out[i] = r.rows[id]
	}
	return out
}

// Row holds one row's live figures. Every method is a few atomic
// operations and allocates nothing, so the dispatch and record paths pay
// nearly nothing for them; a nil *Row records nothing.
type Row struct {
	id     string
	lagged bool

	inFlight atomic.Int64
	ok       atomic.Uint64
	failed   atomic.Uint64
	warmup   atomic.Uint64
	// errs counts failed requests by metrics.ErrorClasses' index; the
	// last slot is a class this build does not know.
	errs      []atomic.Uint64
	outTokens atomic.Uint64

	ttft, itl, lag *histogram
}

// Begin counts a request that has just been sent.
func (w *Row) Begin() {
	if w != nil {
		w.inFlight.Add(1)
	}
}

// End counts a request that has just ended, whatever its outcome.
func (w *Row) End() {
	if w != nil {
		w.inFlight.Add(-1)
	}
}

// Observe folds in a finished request's record. Warmup requests (warm
// prefixes included) are only counted: the row's figures, like its
// summary, are of the measured requests. Latencies and tokens are of
// successful requests, by infermatrix's rule (an error is none); a
// request the client cancelled on purpose counts as an error of class
// canceled, as in the summary's error table.
func (w *Row) Observe(rec *metrics.Record) {
	if w == nil {
		return
	}
	if rec.Warmup {
		w.warmup.Add(1)
		return
	}
	if w.lagged {
		w.lag.observe(rec.StartNS - rec.QueueNS - rec.ScheduledNS)
	}
	if rec.Error != nil {
		w.failed.Add(1)
		i := slices.Index(metrics.ErrorClasses, rec.Error.Class)
		if i < 0 {
			i = len(metrics.ErrorClasses)
		}
		w.errs[i].Add(1)
		return
	}
	w.ok.Add(1)
	if rec.FirstTokenNS > 0 {
		w.ttft.observe(rec.FirstTokenNS)
	}
	w.itl.observeGaps(rec.Events)
	if rec.Inputs == 0 {
		// A pooling request (embeddings, rerank) generates nothing.
		w.outTokens.Add(uint64(max(rec.OutputTokens.Count(), 0)))
	}
}
