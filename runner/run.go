// Package runner executes an experiment plan against an OpenAI-compatible
// server: it offers each row's load, measures every request at the protocol
// events, writes each request's record to the run directory the moment it
// completes, and summarises each row.
//
// It never imports the report renderers: a run's artifacts are data, and
// package reports turns them into decision records, from a live run or
// from a run directory long after.
package runner

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/infermatrix/infermatrix/discovery"
	"github.com/infermatrix/infermatrix/internal/buildinfo"
	"github.com/infermatrix/infermatrix/internal/redact"
	"github.com/infermatrix/infermatrix/internal/textsafe"
	"github.com/infermatrix/infermatrix/livemetrics"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/protocol"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/sim"
	"github.com/infermatrix/infermatrix/validity"
	"github.com/infermatrix/infermatrix/verdict"
	"github.com/infermatrix/infermatrix/workload"
)

// Options configure a run.
type Options struct {
	// Out is the exact run directory; empty means Base/<name>/<UTC time>.
	Out string
	// Base is the parent of default run directories ("runs").
	Base string
	// Command is the command line, recorded so the run can be reproduced.
	Command []string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// Terminal says Log is a terminal: each row then draws a live
	// progress bar on it instead of writing a line every few seconds.
	Terminal bool
	// Baseline is the run the rules' baseline.<metric> names read,
	// recorded in the manifest (the judging itself is reports').
	Baseline *rundir.BaselineInfo
	// BaselineRun is that run as rules read it: a search row's probes
	// are judged against it as the record will judge them.
	BaselineRun *verdict.Baseline
	// Virtual runs the experiment on the built-in server's virtual clock
	// (runner/virtual.go): no socket, no waiting, the same records.
	Virtual bool
	// Live receives every request's start, end and record as the run
	// goes, for run --metrics-addr (docs/live-metrics.md); nil for none.
	Live *livemetrics.Recorder
	// Shard runs one shard of a distributed run (run --shard I/N,
	// runner/shard.go, docs/sharding.md); zero for the whole run.
	Shard Shard
	// StartAt, with Shard, starts the first row at that instant and each
	// later row at the instant the plan fixes (runner/startat.go); zero
	// starts at once.
	StartAt time.Time
}

// Result is a finished (or interrupted) run.
type Result struct {
	Dir         *rundir.Dir
	Manifest    *rundir.Manifest
	Summary     *metrics.Summary // with raw samples, for p(metric, q)
	Interrupted bool
}

// ErrServerUnreachable is returned when the server cannot be reached before
// the run starts: better no run directory than one full of connect errors.
var ErrServerUnreachable = errors.New("server unreachable")

// ErrBadSource is wrapped by Run's error, before anything is sent, when a
// row's dataset or trace file has lines that cannot be used. It is
// workload.ErrBadSource, named here too because callers of Run tell this
// error (a problem of the experiment) from a runtime one.
var ErrBadSource = workload.ErrBadSource

// Run executes every row of plan, in order. Cancelling ctx interrupts the
// run: dispatching stops, requests in flight get the row's grace period,
// every record is written, and summaries are marked interrupted. The
// returned error is for failures of the tool itself (the run directory
// cannot be written, the server cannot be reached); failed requests are
// data, recorded in the results.
//
// A search row (row.Search) runs as probes, each a row of its own; when
// the run ends, plan.WithProbes has replaced the search row with them, in
// plan, in the manifest and in the summary, so that the caller's reports
// judge and show the probes.
//
// Credentials are read from the environment first (api_key_env,
// header_env): a variable that is not set stops the run before anything is
// sent. Their values are scrubbed from every file, log line and error, in
// case the server echoes one back.
func Run(ctx context.Context, plan *schema.Plan, opts Options) (*Result, error) {
	creds, err := readCredentials(plan.Server)
	if err != nil {
		return nil, err
	}
	if ls := launchSecrets(plan); len(ls) > 0 {
		creds.values = append(creds.values, ls...)
		creds.secrets = redact.NewSecrets(creds.values...)
	}
	res, err := run(ctx, plan, opts, creds)
	return res, creds.secrets.Error(err)
}

// run is Run once the credentials are read.
func run(ctx context.Context, plan *schema.Plan, opts Options, creds credentials) (*Result, error) {
	// Every line logged carries text from the experiment or the server
	// (model ids, notes, error messages); none may drive the terminal.
	logf := func(format string, args ...any) {
		if opts.Log != nil {
			fmt.Fprintln(opts.Log, textsafe.Terminal(fmt.Sprintf(format, args...)))
		}
	}
	if err := opts.Shard.Check(); err != nil {
		return nil, err
	}
	if opts.Shard.on() {
		if p := shardProblems(plan, opts.Shard); len(p) > 0 {
			return nil, fmt.Errorf("%w: %s", ErrBadShard, strings.Join(p, "; "))
		}
	}
	if !opts.StartAt.IsZero() {
		var p []string
		switch {
		case !opts.Shard.on():
			p = append(p, "--start-at aligns shards: it needs --shard")
		case opts.Virtual:
			p = append(p, "--start-at is a wall-clock instant: it does not apply on virtual time")
		case time.Until(opts.StartAt) < -StartPastTolerance:
			p = append(p, fmt.Sprintf("%s is %v in the past", opts.StartAt.UTC().Format(time.RFC3339), -time.Until(opts.StartAt).Round(time.Second)))
		}
		p = append(p, startProblems(plan)...)
		if len(p) > 0 {
			return nil, fmt.Errorf("%w: %s", ErrBadStart, strings.Join(p, "; "))
		}
	}
	if opts.Virtual {
		if p := VirtualProblems(plan); len(p) > 0 {
			return nil, fmt.Errorf("%w: %s", ErrNotVirtual, strings.Join(p, "; "))
		}
	}
	notes, err := workload.CheckSources(plan)
	if err != nil {
		return nil, err
	}
	for _, n := range notes {
		logf("%s", n)
	}
	if err := checkURLs(plan.Server.URLs); err != nil {
		return nil, err
	}
	apiKey := creds.apiKey
	if !creds.secrets.Empty() {
		logClean := logf
		logf = func(format string, args ...any) { logClean("%s", creds.secrets.String(fmt.Sprintf(format, args...))) }
	}
	toks, waitToks := loadTokenizers(plan)
	if plan.Server.Builtin || len(plan.Server.Variants) > 0 {
		// The built-in server counts with them as it starts.
		if err := waitToks(); err != nil {
			return nil, err
		}
	}

	var truth *truthSink
	if wantsTruth(plan) {
		truth = &truthSink{}
		defer truth.Close()
	}

	maxConns := 0
	for _, row := range plan.Rows {
		maxConns = max(maxConns, row.Load.Concurrency, row.Load.MaxConcurrency)
		if row.Search != nil && row.Search.Vary == schema.ModeConcurrency {
			maxConns = max(maxConns, int(row.Search.Max)) // its probes go up to max
		}
		if (row.Load.Mode == schema.ModeRate || row.Load.Mode == schema.ModeTrace) && row.Load.MaxConcurrency == 0 {
			// An uncapped open-loop row has no bound on requests in flight;
			// keep enough idle connections that a busy second does not pay
			// new connections inside TTFT.
			maxConns = max(maxConns, 4096)
		}
	}
	httpClient := protocol.NewHTTPClient(maxConns)
	defer httpClient.CloseIdleConnections()
	budget := protocol.NewBudget(protocol.MaxBufferedResponses)

	// Without variants the one server is started and asked what it serves
	// before the run directory exists: better no directory than one full of
	// connect errors. Each variant's server opens when its rows come
	// (runner/variants.go).
	su := &serverSetup{plan: plan, toks: toks, truth: truth, http: httpClient, apiKey: apiKey,
		headers: mergeHeaders(plan.Server.Headers, creds.headers), logf: logf,
		virtual: opts.Virtual, epoch: VirtualEpoch}
	srv := &serverSession{}
	if len(plan.Server.Variants) == 0 {
		srv, err = su.open(ctx, targetOf(plan, nil))
		if err != nil {
			return nil, err
		}
		defer srv.close()
	}
	// A server at a URL was asked what it serves while the tokenizers
	// loaded; the requests need them from here.
	if err := waitToks(); err != nil {
		return nil, err
	}
	urls, bi, scrape, found, model, vs := srv.urls, srv.builtin, srv.scrape, srv.found, srv.model, srv.virtual

	started := time.Now()
	dir, err := rundir.Create(opts.Base, plan.Experiment.Name, opts.Out, started)
	if err != nil {
		return nil, err
	}
	dir.Scrub(creds.secrets)
	// What the server said of itself is kept, and shown in reports that
	// read it from memory: a key it echoes must not be.
	scrubJSON(creds.secrets, &found)
	declared := plan.Server
	declared.Model = creds.secrets.String(model)
	host, _ := os.Hostname()
	man := &rundir.Manifest{
		Format:  rundir.Format,
		Tool:    buildinfo.Get(),
		Host:    rundir.Host{Name: host, OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU()},
		Command: redact.Args(opts.Command),
		Experiment: rundir.ExperimentInfo{
			Name: plan.Experiment.Name, Description: plan.Experiment.Description,
			File: plan.File, SHA256: plan.SHA256, Metadata: plan.Experiment.Metadata,
		},
		Started:   started.UTC(),
		Status:    rundir.StatusRunning,
		Server:    rundir.ServerInfo{Declared: declared, Discovered: found},
		SLO:       plan.SLO,
		Semantics: plan.Semantics,
		Rows:      plan.Rows,
		Baseline:  opts.Baseline,
		Virtual:   opts.Virtual,
	}
	if opts.Shard.on() {
		man.Shard = &rundir.ShardInfo{Index: opts.Shard.Index, Count: opts.Shard.Count, PlanSHA256: plan.SHA256}
		if !opts.StartAt.IsZero() {
			at := opts.StartAt.UTC()
			man.Shard.StartAt = &at
		}
	}
	if err := writeStart(dir, plan, man); err != nil {
		return nil, err
	}
	logf("run directory %s", dir.Path)
	if truth != nil {
		if err := truth.attach(filepath.Join(dir.Path, rundir.SimGroundTruthFile)); err != nil {
			return nil, err
		}
	}

	nonce := randomNonce()
	if opts.Virtual {
		// Prompts are drawn afresh on every run so that no server's
		// cache holds them from an earlier one. The virtual server starts
		// empty every time, and a run on virtual time must be the same
		// for the same experiment: its nonce is the experiment's hash.
		nonce = virtualNonce(plan)
	}
	gt := newGate(plan.Server.UnreachableAfter.D(), nonce)
	if gt.giveUp <= 0 {
		gt.giveUp = schema.DefaultUnreachableAfter
	}
	res := &Result{Dir: dir, Manifest: man, Summary: &metrics.Summary{
		Format: metrics.SummaryFormat, Experiment: plan.Experiment.Name,
		Percentiles: plan.Percentiles, SLO: plan.SLO,
		Semantics: plan.Semantics, SemanticsNotes: metrics.SemanticsNotes(plan.Semantics, plan.SLO),
		Virtual: opts.Virtual,
	}}
	rs := &runState{dir: dir, plan: plan, nonce: nonce, model: model, urls: urls, gate: gt, builtin: bi, virtual: vs, logf: logf, secrets: creds.secrets, scrape: scrape,
		searches: newSearchRuns(opts.BaselineRun, man), live: opts.Live, shard: opts.Shard}
	if man.Shard != nil && man.Shard.StartAt != nil {
		rs.starts = &startClock{next: *man.Shard.StartAt, first: true, gap: StartGap, logf: logf,
			skew:    func(d time.Duration) { man.Shard.StartSkewNS = d.Nanoseconds() },
			started: func(s rundir.RowStart) { man.Shard.RowStarts = append(man.Shard.RowStarts, s) }}
		logf("shard %s: first row at %s", opts.Shard, man.Shard.StartAt.Format(time.RFC3339Nano))
	}
	opts.Live.Start(plan.Experiment.Name, runID(nonce))
	if opts.Terminal {
		rs.bar = opts.Log
	}
	var runErr error
	rows := make([]metrics.RowSummary, len(plan.Rows))
	trials := make([][]metrics.RowSummary, len(plan.Rows))
	// Each variant's rows run together against its own server (one group
	// of every row without variants); a variant whose server fails leaves
	// its rows not run, with why, and the next variant runs.
	for _, g := range rowGroups(plan) {
		var groupErr error
		var vr *variantRun
		if g.variant != nil && ctx.Err() == nil && runErr == nil {
			vr, groupErr = rs.enterVariant(ctx, su, g.variant, man)
			if groupErr != nil {
				logf("variant %s: its rows do not run: %v", g.variant.Name, groupErr)
			}
		}
		// Rows run in rounds: round k runs trial k of every row repeated at
		// least k times, in plan order (round 1 is every row). Interleaving
		// spreads a slow drift of the server (heat, caches, other tenants)
		// over every row's trials rather than loading it onto one row's.
		for round := 1; round <= plan.MaxRepeat(); round++ {
			for _, i := range g.rows {
				row := &plan.Rows[i]
				if round > row.Trials() {
					continue
				}
				if ctx.Err() != nil || runErr != nil || groupErr != nil {
					if round == 1 {
						rows[i] = notRun(row, groupErr)
					}
					continue
				}
				trial := 0
				if row.Repeat > 1 {
					trial = round
				}
				cl := &protocol.Client{HTTP: httpClient, API: plan.RowAPI(row), APIKey: apiKey,
					Headers: mergeHeaders(mergeHeaders(plan.Server.Headers, row.Headers), creds.headers), Tok: toks[row.Tokenizer], Budget: budget}
				if rs.virtual != nil {
					cl.HTTP, cl.Clock = rs.virtual.http, rs.virtual.v.ClientClock
				}
				if rs.starts != nil && !rs.starts.wait(ctx, row) {
					if round == 1 {
						rows[i] = notRun(row, nil)
					}
					continue
				}
				runRow := rs.runRow
				if row.Search != nil {
					runRow = rs.runSearch // runner/search.go
				}
				s, interrupted, err := runRow(ctx, row, i, trial, cl)
				if rs.starts != nil {
					// Each row's start (shard.row_starts) is on disk when
					// the row ends, not only when the run does; the write
					// falls outside every row's load.
					_ = dir.WriteJSON(rundir.ManifestFile, man)
				}
				s.Error = creds.secrets.String(s.Error)
				if trial == 0 {
					rows[i] = s
				} else {
					trials[i] = append(trials[i], s)
				}
				switch {
				case err != nil && variantStops(g, err):
					groupErr = creds.secrets.Error(fmt.Errorf("variant %s stopped at row %s: %w", g.variant.Name, row.ID, err))
				case err != nil && trial > 0:
					runErr = fmt.Errorf("row %s trial %d: %w", row.ID, trial, err)
				case err != nil:
					runErr = fmt.Errorf("row %s: %w", row.ID, err)
				}
				if interrupted {
					res.Interrupted = true
				}
				if trial > 0 && (trial == row.Repeat || err != nil || interrupted) {
					rows[i] = rs.poolRow(row, trials[i])
					trials[i] = nil
				}
			}
		}
		rs.leaveVariant(vr)
	}
	// A repeated row whose later trials the run did not reach (an
	// interrupt, a failure elsewhere) is pooled on the trials it ran.
	for i := range plan.Rows {
		if len(trials[i]) > 0 {
			rows[i] = rs.poolRow(&plan.Rows[i], trials[i])
		}
	}
	res.Summary.Rows = rs.searches.expand(plan, rows) // each search row becomes its probes
	if g := discoveredGPUs(rows); len(g) > 0 {
		man.Server.Discovered.GPUModels = g
	}
	if ctx.Err() != nil {
		// Also when the interrupt fell between two rows: the rows after
		// it did not run.
		res.Interrupted = true
	}
	res.Summary.Interrupted = res.Interrupted

	ended := time.Now().UTC()
	man.Ended = &ended
	switch {
	case runErr != nil:
		man.Status, man.Error = rundir.StatusFailed, creds.secrets.String(runErr.Error())
	case res.Interrupted:
		man.Status = rundir.StatusInterrupted
	default:
		man.Status = rundir.StatusComplete
	}
	if err := dir.WriteJSON(rundir.SummaryFile, res.Summary); err != nil {
		return res, errors.Join(runErr, err)
	}
	if err := dir.WriteJSON(rundir.ManifestFile, man); err != nil {
		return res, errors.Join(runErr, err)
	}
	return res, runErr
}

// writeStart writes what is known before the first request: the
// experiment as run, its hash, and the manifest marked running, so even a
// run killed outright leaves a directory that says what it was.
func writeStart(dir *rundir.Dir, plan *schema.Plan, man *rundir.Manifest) error {
	if err := dir.WriteFile(rundir.ExperimentFile, plan.Source); err != nil {
		return err
	}
	if err := dir.WriteFile(rundir.HashFile, []byte(plan.SHA256+"  "+rundir.ExperimentFile+"\n")); err != nil {
		return err
	}
	return dir.WriteJSON(rundir.ManifestFile, man)
}

// runState is what every row of a run shares.
type runState struct {
	dir   *rundir.Dir
	plan  *schema.Plan
	nonce uint64 // the run's: prompt text and record ids
	model string
	urls  []string
	gate  *gate
	// builtin is the built-in server, nil against a real one.
	builtin *builtinRun
	// virtual is the built-in server on virtual time, nil in real time.
	virtual *virtualServer
	logf    func(string, ...any)
	bar     io.Writer // the terminal for progress bars; nil for lines
	// secrets are scrubbed from each record before it is kept.
	secrets redact.Secrets
	// scrape is where each row reads telemetry; nil when it is off.
	scrape *scrapePlan
	// searches holds the search rows' probes (runner/search.go).
	searches *searchRuns
	// live keeps the run's live figures; nil when they are off.
	live *livemetrics.Recorder
	// shard is the run's shard; zero when it is not sharded.
	shard Shard
	// starts holds each row to its planned start (--start-at); nil
	// starts each row as soon as the one before ends.
	starts *startClock
}

// runRow runs one row with its collector: the single goroutine that appends
// each record to requests.jsonl and folds it into the summary.
//
// trial is the trial of a repeated row (from 1), whose files go to
// rows/<id>/trial-<k>/ and whose summary is the trial's alone; 0 for a
// row without repeat.
func (st *runState) runRow(ctx context.Context, row *schema.PlannedRow, index, trial int, cl *protocol.Client) (metrics.RowSummary, bool, error) {
	dir, plan, nonce, gt, bi := st.dir, st.plan, st.nonce, st.gate, st.builtin
	files := row.ID
	if trial > 0 {
		files = rundir.TrialRow(row.ID, trial)
	}
	fail := func(err error) (metrics.RowSummary, bool, error) {
		return metrics.RowSummary{ID: row.ID, Base: row.Base, Status: metrics.RowFailed, Error: err.Error(), Trial: trial}, false, err
	}
	wl, err := workload.NewTrial(row, plan.RowAPI(row), st.model, cl.Tok, nonce, trial)
	if err != nil {
		return fail(err)
	}
	w, err := dir.CreateRecords(files)
	if err != nil {
		return fail(err)
	}
	agg := metrics.NewAggregator(st.rowOptions(row))
	prog := newProgress(row, st.logf, st.bar)
	if trial > 0 {
		prog.name = fmt.Sprintf("%s trial %d/%d", row.ID, trial, row.Repeat)
	}
	defer prog.stop()

	// Each finished request is written and summarised before its goroutine
	// moves on: a record is on disk the moment its request is over, and
	// nothing waits in a buffer for a second Ctrl-C to lose. One write of a
	// few hundred bytes under a lock costs microseconds beside a request.
	var mu sync.Mutex
	var werr error
	var tc *truthCollector
	var lateness sim.LatenessSnapshot
	if bi != nil {
		lateness = bi.inst.LatenessSnapshot()
		if bi.truth != nil {
			tc = bi.truth.collect()
		}
	}
	var totals recordTotals
	ro := st.rowOptions(row)
	live := st.live.Row(row.ID, ro.OpenLoop || ro.RequestedRate > 0)
	record := func(rec *metrics.Record) {
		rec.Virtual = st.virtual != nil
		scrubRecord(st.secrets, rec)
		totals.add(rec)
		live.Observe(rec)
		mu.Lock()
		defer mu.Unlock()
		if werr == nil {
			werr = w.Write(rec)
		}
		agg.Add(rec)
		prog.add(rec)
		if tc != nil {
			tc.record(rec)
		}
	}
	rr := &rowRun{row: row, index: index, trial: trial, runID: runID(nonce), client: cl, wl: wl, urls: st.urls, record: record, gate: gt, live: live}
	rr.templateTokens = st.templateCounter(row, cl)
	rr.shard = st.shard
	// The row's clock starts here, and its first scrape is taken before
	// its first request, so the server's counters cover every request.
	rr.start = time.Now()
	if st.virtual != nil {
		v, from := st.virtual.v, st.virtual.v.Now()
		rr.start = v.Time(from)
		prog.simulated = func() time.Duration { return v.Now() - from }
	}
	sc, err := st.scrape.startScrape(ctx, dir, files, rr.start)
	if err != nil {
		_ = w.Close()
		return fail(err)
	}
	rr.phase, rr.scrapeNow = sc.phase, sc.round
	if st.virtual != nil && sc != nil {
		rr.scrapeEvery = plan.Telemetry.Interval.D()
	}
	prog.begin()
	// The client's own CPU and scheduling delay, read around the row and
	// not inside it, for the self-check.
	probe := startLoadProbe()
	var interrupted bool
	var runErr error
	var load metrics.ClientLoad
	if st.virtual != nil {
		// Nothing waits on virtual time: the client's own load and lag
		// have nothing to say about it.
		interrupted, runErr = rr.runVirtual(ctx, st.virtual)
		probe.stop(false)
	} else {
		interrupted, runErr = rr.run(ctx)
		load = probe.stop(bi != nil)
	}
	if bi != nil {
		// The built-in server's own lateness over the row, and the
		// client's stamps against its ground truth.
		n, _, p99, _ := bi.inst.LatenessSnapshot().Since(lateness)
		load.SimFlushes, load.SimLatenessP99NS = n, float64(p99)
		if tc != nil {
			load.StampErrorP99NS, load.StampErrors = tc.p99()
		}
	}
	agg.SetClientLoad(load)
	werr = errors.Join(werr, w.Close())
	if since, tripped := gt.outage(); tripped && runErr == nil {
		runErr = fmt.Errorf("%w since %s: no connection succeeded for %s; the row and the run stopped",
			ErrServerUnreachable, since.UTC().Format("15:04:05.000 UTC"), gt.giveUp)
	}

	status := metrics.RowComplete
	if interrupted {
		status = metrics.RowInterrupted
	}
	window := [3]int64{}
	if a, b, ok := agg.Window(); ok {
		window = [3]int64{a, b, 1}
	}
	s := agg.Summary(row.ID, row.Base, status)
	s.Requests.Unsent = rr.unsent
	s.ScheduleStartNS = rr.scheduleStart()
	s.Trial = trial
	var terr error
	s.Server, s.GPU, s.Telemetry, terr = sc.finish(window, totals.totals(), &s.Metrics, plan.Telemetry.Interval.D())
	werr = errors.Join(werr, terr)
	if err := errors.Join(runErr, werr); err != nil {
		s.Status, s.Error = metrics.RowFailed, err.Error()
		_ = dir.WriteJSON(rundir.RowFile(files, rundir.SummaryFile), s)
		return s, interrupted, err
	}
	var rules []schema.AcceptanceRule
	for _, a := range plan.Acceptance {
		if slices.Contains(a.Rows, row.ID) {
			rules = append(rules, a)
		}
	}
	check := validity.Row
	if trial > 0 {
		check = validity.Trial // the samples are judged on the pooled row
	}
	prog.end(&s, check(validity.Input{Row: row, Summary: &s, Rules: rules, Config: plan.Validity}))
	if err := dir.WriteJSON(rundir.RowFile(files, rundir.SummaryFile), s); err != nil {
		return s, interrupted, err
	}
	return s, interrupted, nil
}

// SimEngineName is the engine name the built-in server goes by in the
// record, whether in-process or on its own port (infermatrix sim).
const SimEngineName = "infermatrix-sim"

// simulatedInfo describes the built-in server as it ran, for the record.
func simulatedInfo(s schema.SimSettings) *rundir.Simulated {
	out := &rundir.Simulated{Preset: s.Preset, Model: s.Model, Replicas: max(s.Replicas, 1), MaxModelLen: s.MaxModelLen, Calibration: s.Calibration.Summary()}
	if s.Preset == schema.PresetFixed {
		return out
	}
	if ec, err := s.EngineConfig(); err == nil {
		out.GPU = ec.GPU.Name
	}
	return out
}

// builtinRun is the built-in server a run started, for the rows'
// simulator and stamp checks.
type builtinRun struct {
	inst  *sim.Instance
	truth *truthSink // nil without server.sim.ground_truth
}

func mergeHeaders(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// runID is the run's id: the prefix of every record id, and so of every
// request's X-Request-Id.
func runID(nonce uint64) string { return fmt.Sprintf("%08x", uint32(nonce)) }

func randomNonce() uint64 {
	var b [8]byte
	if _, err := crand.Read(b[:]); err != nil {
		return uint64(time.Now().UnixNano())
	}
	return binary.LittleEndian.Uint64(b[:])
}

// discover asks the server which models it serves. A server that cannot be
// reached at all fails the run before it starts; one that answers but has no
// usable /models is noted and the run goes on.
func discover(ctx context.Context, hc *http.Client, base, apiKey string, headers map[string]string) (rundir.Discovered, error) {
	d := rundir.Discovered{URL: base}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := getRequest(ctx, base+"/models", apiKey, headers)
	if err != nil {
		return d, fmt.Errorf("%w: %v", ErrServerUnreachable, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if redir := (*protocol.RedirectError)(nil); errors.As(err, &redir) {
			// The server answered: it is reachable, and its requests will
			// be refused the same way, each recorded with class redirect.
			d.Error = "GET /models: " + redir.Error()
			return d, nil
		}
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return d, fmt.Errorf("asking %s for its models: %w", base, err)
		}
		return d, fmt.Errorf("%w at %s: %v", ErrServerUnreachable, base, err)
	}
	defer resp.Body.Close()
	d.Server = resp.Header.Get("Server")
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		d.Error = fmt.Sprintf("GET /models: %s", resp.Status)
		return d, nil
	}
	var list struct {
		Data []rundir.Model `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		d.Error = fmt.Sprintf("GET /models: %v", err)
		return d, nil
	}
	d.Models = list.Data
	discoverEngine(ctx, hc, base, apiKey, headers, &d)
	return d, nil
}

// discoverEngine asks the server which engine it is, and what it says of
// its limits (package discovery reads the answers). /models' owned_by and
// the Server header say which engine to ask first; a server none of the
// probes recognises keeps what those two said, or nothing. Failures are
// silent: this is for the record, not a precondition.
func discoverEngine(ctx context.Context, hc *http.Client, base, apiKey string, headers map[string]string, d *rundir.Discovered) {
	hint := ""
	if len(d.Models) > 0 {
		hint = strings.ToLower(d.Models[0].OwnedBy)
		if n := d.Models[0].MaxModelLen; n > 0 {
			d.Properties = map[string]string{discovery.MaxModelLen: strconv.Itoa(n)}
		}
	}
	if strings.Contains(strings.ToLower(d.Server), "llama.cpp") {
		hint = "llama.cpp"
	}
	probes := discovery.Order(hint)
	if hint == "infermatrix" {
		// infermatrix sim on its own port: the built-in server, which
		// answers vLLM's /version with its own build.
		d.Engine, d.EngineFrom = SimEngineName, "/models owned_by"
		probes = probes[:0]
		for _, p := range discovery.Probes {
			if p.Engine == "vllm" {
				probes = append(probes, p)
			}
		}
	} else {
		for _, p := range discovery.Probes {
			if discovery.Same(p.Engine, hint) {
				d.Engine, d.EngineFrom = p.Engine, "/models owned_by or the Server header"
			}
		}
	}
	root := strings.TrimSuffix(strings.TrimRight(base, "/"), "/v1")
	for _, p := range probes {
		if ctx.Err() != nil {
			return
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		req, err := getRequest(pctx, root+p.Path, apiKey, headers)
		if err != nil {
			cancel()
			return
		}
		resp, err := hc.Do(req)
		if err != nil {
			cancel()
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		cancel()
		if resp.StatusCode != http.StatusOK {
			continue
		}
		v, props, ok := p.Read(body)
		if !ok {
			continue
		}
		if d.Engine == SimEngineName {
			d.EngineVersion = v
			return
		}
		d.Engine, d.EngineVersion, d.EngineFrom = p.Engine, v, p.Path
		for k, val := range props {
			if d.Properties == nil {
				d.Properties = map[string]string{}
			}
			if _, set := d.Properties[k]; !set {
				d.Properties[k] = val
			}
		}
		return
	}
}

// getRequest is a GET of url with the run's headers and API key, as every
// request the run sends carries them.
func getRequest(ctx context.Context, url, apiKey string, headers map[string]string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	return req, nil
}
