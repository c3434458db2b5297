package metrics

import (
	"fmt"
	"unicode/utf8"

	"github.com/infermatrix/infermatrix/metrics/samples"
)

// SummaryFormat versions summary.json. Readers refuse other versions rather
// than misreading them.
const SummaryFormat = "infermatrix.summary/v1"

// Row statuses.
const (
	RowComplete    = "complete"    // every planned request was sent and finished or failed
	RowInterrupted = "interrupted" // the run was stopped (Ctrl-C) during or before this row
	RowFailed      = "failed"      // the tool failed during the row; RowSummary.Error says why
	RowNotRun      = "not_run"     // the run ended (interrupted or failed) before this row began
)

// Summary is the whole run's summary.json.
type Summary struct {
	Format      string `json:"format"`
	Experiment  string `json:"experiment"`
	Interrupted bool   `json:"interrupted,omitempty"`
	// Virtual says every figure is from the built-in server's virtual
	// clock (run --virtual), not from a socket and the wall clock.
	Virtual     bool      `json:"virtual,omitempty"`
	Percentiles []float64 `json:"percentiles"`
	SLO         SLO       `json:"slo"`
	// Semantics names whose metric definitions every row's summary
	// follows (SemInfermatrix when empty, as in summaries written before
	// the setting existed); SemanticsNotes says where they depart from
	// that tool or keep infermatrix's.
	Semantics      string       `json:"semantics"`
	SemanticsNotes []string     `json:"semantics_notes,omitempty"`
	Rows           []RowSummary `json:"rows"`
	// Rebuilt is set when this summary was not written by the run but
	// put together afterwards from its records (infermatrix report, after
	// a run killed before it wrote its summaries): it says, in sentences,
	// what was missing and what was summarised again, so that a record
	// judged on it says it was rebuilt.
	Rebuilt string `json:"rebuilt,omitempty"`
	// MissingShards lists the shards (by index, from 1) that a merged
	// run (infermatrix merge) lacks: its figures cover only part of the
	// load, so the run is judged INCONCLUSIVE whatever its rows say.
	MissingShards []int `json:"missing_shards,omitempty"`
}

// Row returns the summary of the row with this id, or nil.
func (s *Summary) Row(id string) *RowSummary {
	for i := range s.Rows {
		if s.Rows[i].ID == id {
			return &s.Rows[i]
		}
	}
	return nil
}

// SLO holds per-request objectives in milliseconds; zero means unset.
type SLO struct {
	TTFTms float64 `json:"ttft_ms,omitempty"`
	TPOTms float64 `json:"tpot_ms,omitempty"`
	ITLms  float64 `json:"itl_ms,omitempty"`
	E2Ems  float64 `json:"e2e_ms,omitempty"`
}

// IsZero reports whether no objective is set.
func (s SLO) IsZero() bool { return s == SLO{} }

// RowSummary is one row's results: rows/<id>/summary.json and one entry of
// the top-level summary.json.
type RowSummary struct {
	ID     string `json:"id"`
	Base   string `json:"base"` // the row id as written, before sweep expansion
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`

	// WindowS is the measured window in seconds: from the dispatch of the
	// first measured request to the end of the last one. Throughputs
	// divide by it.
	WindowS float64 `json:"window_s"`
	// ScheduleStartNS is where an open loop's arrival schedule began, in
	// ns on the row's clock (the clock of the records' scheduled_ns): a
	// record's scheduled_ns minus it is the arrival's time in the
	// schedule, a trace's own timestamp (divided by its speedup). The
	// schedule starts once the first request is built and the first
	// telemetry scrape taken, and after any warm-prefix priming; a
	// sharded row's at the row's start (its schedule is the global one,
	// which the shards' clocks align), or after its priming. 0 for a
	// closed loop, and in a pooled, merged or rebuilt summary (the
	// records do not hold it).
	ScheduleStartNS int64      `json:"schedule_start_ns,omitempty"`
	Requests        Requests   `json:"requests"`
	Metrics         Metrics    `json:"metrics"`
	Throughput      Throughput `json:"throughput"`
	Goodput         Goodput    `json:"goodput"`
	Errors          Errors     `json:"errors"`
	SelfCheck       SelfCheck  `json:"self_check"`
	// InFlight is how many requests the server had at once.
	InFlight InFlight `json:"in_flight"`
	// Cache is what the server said of its prefix cache.
	Cache Cache `json:"cache"`
	// Tokens compares the lengths the row asked for with the server's.
	Tokens TokenCheck `json:"tokens"`
	// Server and GPU are what the server's metrics endpoint and the GPUs'
	// DCGM exporters reported over the measured window (package
	// telemetry); nil when nothing was scraped. Telemetry is every scrape
	// of the row, reduced to the figures plotted over time.
	Server    *ServerTelemetry `json:"server,omitempty"`
	GPU       *GPUTelemetry    `json:"gpu,omitempty"`
	Telemetry []TelemetryPoint `json:"telemetry,omitempty"`
	// Cost is the row's price per token over the measured window (Price);
	// nil when the experiment sets no price.
	Cost *Cost `json:"cost,omitempty"`
	// Timeslices are the row over time, always by infermatrix's
	// definitions.
	Timeslices Timeslices `json:"timeslices"`
	// ByTurn splits a conversation row's figures by turn (turns.go);
	// absent for rows without conversations.
	ByTurn []TurnSummary `json:"by_turn,omitempty"`
	// Semantics repeats the run's, so a row's own summary.json says what
	// its numbers mean; SemanticsNotes are this row's departures from it,
	// such as records lacking what it needs.
	Semantics      string   `json:"semantics,omitempty"`
	SemanticsNotes []string `json:"semantics_notes,omitempty"`
	// Rebuilt is set when the row was summarised from its records after
	// the run stopped without writing its summary. The records hold every
	// request, but not what the live run measured of the client itself
	// (CPU use, the timer probe, the built-in server's lateness), so those
	// self-check figures are absent and their validity checks not made.
	Rebuilt bool `json:"rebuilt,omitempty"`
	// Merged is set on a merged run's row (infermatrix merge): what its
	// shards measured of themselves, and how far apart they began it.
	Merged *MergedRow `json:"merged,omitempty"`

	// Trial is set in one trial's own summary (rows/<id>/trial-<k>/
	// summary.json, and each entry of Trials): k, from 1. Zero for a
	// row without repeat.
	Trial int `json:"trial,omitempty"`
	// Trials are a repeated row's trials, each summarised alone (without
	// its timeslices, which stay in the trial's own summary.json); the
	// figures above pool every trial's measured requests (PoolTrials).
	// Empty for a row without repeat.
	Trials []RowSummary `json:"trials,omitempty"`
	// Intervals are the confidence intervals of the headline figures over
	// the trials; nil with fewer than two trials.
	Intervals *Intervals `json:"intervals,omitempty"`
	// Steps are a ramped row's steps, each summarised alone by the
	// requests sent in it (metrics/ramp.go); the figures above pool every
	// step. Empty for a row without ramp.
	Steps []StepSummary `json:"steps,omitempty"`
}

// InFlight is the load the server actually saw: how many of the row's
// requests, warmup included, were between their start and their end,
// averaged over the measured window with each instant weighted alike. A
// closed-loop row of c users should keep close to c in flight; a short row
// never gets there, and its drain at the end pulls the mean down.
type InFlight struct {
	Mean float64 `json:"mean" expr:"mean"`
	Max  int     `json:"max" expr:"max"`
}

// Cache is the row's prefix-cache figures, from the server's own counts
// (Record.CachedTokens), over the successful measured requests that
// reported one.
type Cache struct {
	// Requests counts the requests the server reported cached tokens for;
	// zero means it reported none, and the hit ratio is unknown.
	Requests int `json:"requests"`
	// PromptTokens and CachedTokens sum those requests' prompt lengths
	// (the server's count, else the client's) and cached tokens.
	PromptTokens int64 `json:"prompt_tokens"`
	CachedTokens int64 `json:"cached_tokens"`
	// HitRatio is CachedTokens / PromptTokens.
	HitRatio float64 `json:"hit_ratio"`
	// UnexpectedTokens sums, per request, the cached tokens beyond what
	// the request shares on purpose (Record.SharedTokens) and beyond the
	// tokens the server adds itself (its prompt count less the client's:
	// a chat template): max(0, cached − shared − added). They are hits on
	// text the row did not mean to repeat, left in the cache by another
	// row, another run or another client. UnexpectedRatio is their share
	// of PromptTokens, and UnexpectedRequests counts requests with any.
	UnexpectedTokens   int64   `json:"unexpected_tokens"`
	UnexpectedRatio    float64 `json:"unexpected_ratio"`
	UnexpectedRequests int     `json:"unexpected_requests"`
}

// Known reports whether the server said anything of its cache.
func (c Cache) Known() bool { return c.Requests > 0 }

// SelfCheck says whether the client offered the load the row asked for,
// and how much its own load may have blurred what it measured. A benchmark
// client that falls behind its own schedule, or stamps events late, measures
// itself, not the server; these figures make that visible instead of silent.
type SelfCheck struct {
	// For open-loop rows: the rate asked for, the rate of the arrival
	// schedule actually drawn (a finite random sample), and the rate
	// requests were actually dispatched at.
	RequestedRate float64 `json:"requested_rate_per_s,omitempty"`
	ScheduledRate float64 `json:"scheduled_rate_per_s,omitempty"`
	AchievedRate  float64 `json:"achieved_rate_per_s,omitempty"`
	// Users is how many of a closed-loop row's users this run ran, set
	// only when it is not the row's concurrency: a shard of a
	// distributed run (run --shard) runs its part of them, and is held
	// to that part.
	Users int `json:"users,omitempty"`
	// DispatchLag is how late each open-loop request left the client
	// against its schedule, queue time excluded, in ms.
	DispatchLag Dist `json:"dispatch_lag_ms"`

	// ClientCPU is the client process's CPU use during the row: user plus
	// system CPU seconds (CPUSeconds) over the row's wall time, as a
	// fraction of the Cores the process may run on (GOMAXPROCS). A client
	// near saturation stamps events late, whatever its dispatch lag says.
	ClientCPU  float64 `json:"client_cpu,omitempty"`
	CPUSeconds float64 `json:"client_cpu_s,omitempty"`
	Cores      int     `json:"cores,omitempty"`
	// HostCPU is the whole machine's CPU use over the row (Linux only).
	// Other processes competing for the cores delay the client in ways
	// its own figures do not show; a note says so from CPUSaturation on,
	// without flagging the row, since a busy machine delays the client
	// only when both want a core at once.
	HostCPU float64 `json:"host_cpu,omitempty"`
	// MeasurementErrorMS estimates how late the client may stamp an event
	// after its bytes reached the process: the clock's resolution
	// (ClockResolutionMS) plus the p99 time a goroutine waited to run
	// during the row (SchedDelayP99MS). docs/metrics.md says what it
	// leaves out.
	MeasurementErrorMS float64 `json:"measurement_error_ms,omitempty"`
	ClockResolutionMS  float64 `json:"clock_resolution_ms,omitempty"`
	SchedDelayP99MS    float64 `json:"sched_delay_p99_ms,omitempty"`
	// ClientFileErrors counts measured requests that failed in the client
	// before they could leave it: its process had no file descriptor left
	// for the connection (Error.Detail client_files). They count among
	// the row's connection errors too.
	ClientFileErrors int `json:"client_file_errors,omitempty"`
	// SharedWithServer is set when the built-in server ran in the client's
	// process: the CPU use and scheduling delay include the server's.
	SharedWithServer bool `json:"shared_with_server,omitempty"`
	// TimerLatenessP99MS is how late a timer the client set during the row
	// fired, at the 99th percentile: a probe that sleeps a few milliseconds
	// at a time and measures its overshoot. It sees what delays the whole
	// process (other processes on the cores, a throttled container), which
	// the runtime's own scheduling figure does not.
	TimerLatenessP99MS float64 `json:"timer_lateness_p99_ms,omitempty"`

	// Gaps counts the gaps between consecutive text events of the
	// successful streamed requests, and ZeroGaps those of zero length: two
	// events taken from one read of the socket. A client that reads on
	// time sees each event on its own; events read together reached the
	// client before it read them (it was late), or something between held
	// them back (a buffering proxy). ZeroGapShare is ZeroGaps / Gaps. Such
	// a row's ITL is made of bursts and zeros, not of the server's pace.
	Gaps         int     `json:"gaps,omitempty"`
	ZeroGaps     int     `json:"zero_gaps,omitempty"`
	ZeroGapShare float64 `json:"zero_gap_share,omitempty"`

	// SimLatenessP99MS is, for the built-in server in real time, how late
	// it flushed tokens against its own engine's schedule during the row
	// (p99, and the count behind it): a simulator that falls behind on a
	// busy machine serves its lateness, not its model.
	SimLatenessP99MS float64 `json:"sim_lateness_p99_ms,omitempty"`
	SimFlushes       uint64  `json:"sim_flushes,omitempty"`
	// StampErrorP99MS is, where the built-in server wrote its ground truth,
	// the p99 of how far the client's token stamps fell outside the
	// server's writes of them (StampErrors counts the stamps matched).
	StampErrorP99MS float64 `json:"stamp_error_p99_ms,omitempty"`
	StampErrors     int     `json:"stamp_errors,omitempty"`

	// ClientBound is set when the client may have limited the measurement;
	// Notes say why, or warn of a busy machine.
	ClientBound bool     `json:"client_bound,omitempty"`
	Notes       []string `json:"notes,omitempty"`
}

// CPUSaturation is the CPU use, as a fraction of the client's cores, from
// which a row is flagged client-bound. Beyond it runnable goroutines queue
// for a core, and a stamp taken by a goroutine that waited is late by the
// wait.
const CPUSaturation = 0.9

// ClientLoad is what the runner measured of its own process around a row,
// for the self-check.
type ClientLoad struct {
	CPUSeconds  float64 // user + system CPU time of the process
	WallSeconds float64 // the row's wall time
	Cores       int     // GOMAXPROCS; 0 where the CPU time could not be read
	// ClockResolutionNS is the smallest step the monotonic clock showed.
	ClockResolutionNS float64
	// SchedDelayP99NS is the p99 time goroutines spent runnable before
	// running during the row (runtime/metrics /sched/latencies:seconds).
	SchedDelayP99NS float64
	// SharedWithServer is set when the built-in server ran in the same
	// process, so that its CPU and its goroutines count too.
	SharedWithServer bool
	// HostCPU is the whole machine's CPU use over the row, a fraction of
	// its CPUs; 0 where it cannot be read (it comes from Linux's
	// /proc/stat).
	HostCPU float64
	// TimerLatenessP99NS is the p99 overshoot of the probe's timers.
	TimerLatenessP99NS float64
	// SimLatenessP99NS and SimFlushes are the built-in server's flush
	// lateness during the row, when it ran in real time; StampErrorP99NS
	// and StampErrors the client's stamp error against its ground truth.
	SimLatenessP99NS float64
	SimFlushes       uint64
	StampErrorP99NS  float64
	StampErrors      int
}

// TokenMismatchLimit is the relative difference between the lengths a row
// asked for and the server's count beyond which the row is flagged.
const TokenMismatchLimit = 0.05

// TokenCheck compares the input and output lengths a row asked for with
// what the server reported in its usage. A row whose lengths differ
// measures another workload than it says: a chat template's tokens on
// short prompts, outputs stopping at EOS without ignore_eos, a server
// counting with another tokenizer.
type TokenCheck struct {
	Input  LengthCheck `json:"input"`
	Output LengthCheck `json:"output"`
	// Mismatch is set when either side's mean differs by more than
	// TokenMismatchLimit; Notes say which, or that a side had no usage.
	Mismatch bool     `json:"mismatch,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

// LengthCheck is one side of a TokenCheck, over the successful measured
// requests with both a requested length and the server's count.
type LengthCheck struct {
	Requests      int     `json:"requests"`
	RequestedMean float64 `json:"requested_mean,omitempty"`
	ServerMean    float64 `json:"server_mean,omitempty"`
	// TemplateMean is the mean of the chat template's tokens the client
	// learnt (Record.TemplateTokens), part of ServerMean. They are allowed: Diff compares the server's
	// count less them, so that a template is not taken for a miscount
	// and a tokenizer that counts otherwise still is.
	TemplateMean float64 `json:"template_mean,omitempty"`
	// Diff is (Σ server − Σ template − Σ requested) ÷ Σ requested: the
	// signed relative difference of the means, the known template's
	// tokens allowed.
	Diff float64 `json:"diff"`
	// Over counts requests whose own difference exceeds the limit either
	// way, which a mean can hide when some are long and some short.
	Over     int  `json:"over"`
	Mismatch bool `json:"mismatch,omitempty"`
}

// Requests counts the row's requests by outcome.
type Requests struct {
	Sent      int `json:"sent" expr:"sent"`           // measured requests dispatched
	Completed int `json:"completed" expr:"completed"` // measured requests that succeeded
	Failed    int `json:"failed" expr:"failed"`       // measured requests that failed, cancellations included
	Canceled  int `json:"canceled" expr:"canceled"`   // of Failed, those the client cancelled on purpose
	Warmup    int `json:"warmup" expr:"warmup"`       // warmup requests, excluded from everything else
	// Retried counts measured requests the HTTP transport resent because
	// their reused connection closed before any response (see
	// Record.Retries).
	Retried int `json:"retried" expr:"retried"`
	// Unsent counts open-loop arrivals that came due while the server
	// refused connections and were not sent (the client backs off); they
	// have no record.
	Unsent int `json:"unsent,omitempty" expr:"unsent"`
}

// Metrics are the per-request distributions. Latencies are in milliseconds.
type Metrics struct {
	TTFT         Dist `json:"ttft_ms" expr:"ttft"`
	TTFO         Dist `json:"ttfo_ms" expr:"ttfo"`
	TTST         Dist `json:"ttst_ms" expr:"ttst"`
	ITL          Dist `json:"itl_ms" expr:"itl"`
	TPOT         Dist `json:"tpot_ms" expr:"tpot"`
	E2E          Dist `json:"e2e_ms" expr:"e2e"`
	Queue        Dist `json:"queue_ms" expr:"queue"`
	InputTokens  Dist `json:"input_tokens" expr:"input_tokens"`
	OutputTokens Dist `json:"output_tokens" expr:"output_tokens"`
}

// Throughput is measured over the row's window.
type Throughput struct {
	RequestsPerS      float64 `json:"requests_per_s" expr:"requests_per_s"`
	OutputTokensPerS  float64 `json:"output_tokens_per_s" expr:"output_tokens_per_s"`
	InputTokensPerS   float64 `json:"input_tokens_per_s" expr:"input_tokens_per_s"`
	TotalTokensPerS   float64 `json:"total_tokens_per_s" expr:"total_tokens_per_s"`
	OutputTokensPerSU float64 `json:"output_tokens_per_s_per_user" expr:"output_tokens_per_s_per_user"`
	// OutputTokensPerSPerGPU is OutputTokensPerS over the GPUs the server
	// runs on (Pricing.GPUs, 1 unless the experiment says more). Absent
	// from summaries written before it existed.
	OutputTokensPerSPerGPU float64 `json:"output_tokens_per_s_per_gpu,omitempty" expr:"output_tokens_per_s_per_gpu"`
	// InputsPerS is an embeddings or rerank row's inputs (texts embedded,
	// documents scored) completed per second; absent for a row that
	// generates (IsPooling).
	InputsPerS float64 `json:"inputs_per_s,omitempty" expr:"inputs_per_s"`
}

// Goodput counts requests that met every SLO.
type Goodput struct {
	Good         int     `json:"good" expr:"good"`
	RequestsPerS float64 `json:"requests_per_s" expr:"requests_per_s"`
	Ratio        float64 `json:"ratio" expr:"ratio"`
}

// Errors counts measured requests that failed for reasons other than the
// client cancelling them on purpose: what the server (or the network) did.
// Deliberate cancellations are counted in Requests.Canceled instead, so a
// rule like "errors.total == 0" holds on a row that cancels by design.
type Errors struct {
	Total   int            `json:"total"`
	Ratio   float64        `json:"ratio"` // Total / (Sent - Canceled)
	ByClass map[string]int `json:"by_class,omitempty"`
	// Examples holds, for each class, the message of the first request
	// that failed with it (clipped to MaxErrorExample bytes), so that the
	// decision record says what went wrong, not only how often: "307 to
	// another origin, not followed" is the finding, "redirect 5" the count.
	Examples map[string]string `json:"examples,omitempty"`
}

// MaxErrorExample bounds an error example kept in a summary: the message
// came from the server under test.
const MaxErrorExample = 300

// Options shape a summary.
type Options struct {
	Percentiles []float64 // extra percentiles, beyond p50/p90/p95/p99
	SLO         SLO
	// RequestedRate is a rate row's rate, for the self-check; 0 for
	// other rows.
	RequestedRate float64
	// Users is a closed-loop shard's part of the row's users, for the
	// self-check (SelfCheck.Users); 0 for the row's own.
	Users int
	// OpenLoop says the row dispatches on a schedule (a rate or a trace),
	// so that dispatch lag is measured and checked.
	OpenLoop bool
	// Semantics names whose definitions the summary follows; empty means
	// SemInfermatrix. API is the server's ("chat" or "completions"), which
	// vLLM's definitions depend on.
	Semantics string
	API       string
	// Timeslice is the width of the timeslices in ns; 0 means a second.
	Timeslice int64
	// Pricing is the deployment's price and GPU count, from which the
	// summary's cost and per-GPU throughput are computed (Price).
	Pricing Pricing
	// Ramp, for a ramped row, summarises each step besides the row
	// (RowSummary.Steps, metrics/ramp.go).
	Ramp *Ramp
	// SpillDir is where a row's samples go beyond SpillLimit a metric
	// (package metrics/samples): os.TempDir() when empty. The file is
	// removed as soon as it is open, wherever the system allows.
	SpillDir string
	// SpillLimit is how many samples of a metric stay in memory before
	// they spill: samples.DefaultLimit when 0.
	SpillLimit int
}

// Aggregator builds one row's summary from its records as they arrive. It
// keeps every sample (see Dist), in memory up to Options.SpillLimit a
// metric and in a temporary file beyond (package metrics/samples), so that
// its memory does not grow with the row's length while its figures stay
// exact; the timeslices take at most MaxTimeslices slots.
type Aggregator struct {
	turns   turnAcc // conversation rows' figures by turn
	opts    Options
	sem     string
	reqs    Requests
	errs    map[string]int
	errMsgs map[string]string // the first message of each class
	// clientFiles counts measured requests the client could not send for
	// want of a file descriptor (DetailClientFiles).
	clientFiles int
	first       int64 // earliest dispatch of a measured request, ns since row start
	last        int64 // latest end of a measured request
	anyMeas     bool
	// okFirst and okLast bound the successful requests, from start to
	// E2E end: AIPerf's benchmark duration.
	okFirst, okLast int64

	ttft, ttfo, ttst, itl, tpot, e2e, queue, in, out samples.Column
	perUser                                          samples.Column
	inSum, outSum                                    int64
	good, goodBase                                   int
	// inputs sums the successful pooling requests' inputs; pooled counts
	// those requests, which have no output side (Record.Inputs).
	inputs, pooled int64

	slices         *slicer
	inLen, outLen  lengthAcc
	fallback, noIn int // requests whose figures the semantics could not take as defined
	// noOut counts successful requests whose output nobody counted: the
	// server sent no usage and the client's count of a huge output was
	// abandoned (Tokens.Uncounted).
	noOut            int
	streamed, noText int // successful streams, and those of them without any text

	lag                   samples.Column
	firstSched, lastSched int64
	lastDispatchNS        int64 // the earliest dispatch is first
	load                  *ClientLoad

	gaps, zeroGaps int
	// spans are every request's [start, end], warmup included, for the
	// in-flight count.
	spans samples.Spans
	cache Cache
	// uncounted and uncountedPrompt are the successful requests the
	// server said nothing of its cache for, and their prompt tokens.
	uncounted       int
	uncountedPrompt int64
	// ramp summarises a ramped row's steps (Options.Ramp).
	ramp *rampSteps
	// spillNotes say which figures were lost to a spill file that could
	// not be read back.
	spillNotes []string
	store      *samples.Store // where the samples spill, shared with the steps
}

// lengthAcc accumulates one side of the token check.
type lengthAcc struct {
	n, over                     int
	requested, server, template int64
}

func (l *lengthAcc) add(t Tokens) { l.addAllowing(t, 0) }

// addAllowing adds a request whose server count includes template tokens
// the client knows of (Record.TemplateTokens): they are taken off the
// server's count before the comparison, and summed apart.
func (l *lengthAcc) addAllowing(t Tokens, template int) {
	if t.Server == nil || t.Requested <= 0 {
		return
	}
	l.n++
	l.requested += int64(t.Requested)
	l.server += int64(*t.Server)
	l.template += int64(template)
	if d := *t.Server - template - t.Requested; float64(max(d, -d)) > TokenMismatchLimit*float64(t.Requested) {
		l.over++
	}
}

func (l *lengthAcc) check() LengthCheck {
	c := LengthCheck{Requests: l.n, Over: l.over}
	if l.n == 0 {
		return c
	}
	c.RequestedMean = float64(l.requested) / float64(l.n)
	c.ServerMean = float64(l.server) / float64(l.n)
	c.TemplateMean = round6(float64(l.template) / float64(l.n))
	c.Diff = round6(float64(l.server-l.template-l.requested) / float64(l.requested))
	c.Mismatch = c.Diff > TokenMismatchLimit || c.Diff < -TokenMismatchLimit
	return c
}

// NewAggregator starts an empty row summary.
func NewAggregator(opts Options) *Aggregator {
	return newAggregatorIn(opts, samples.NewStore(opts.SpillDir))
}

// newAggregatorIn starts an empty row summary spilling to store, which a
// ramped row's steps share with the row.
func newAggregatorIn(opts Options, store *samples.Store) *Aggregator {
	sem := opts.Semantics
	if sem == "" {
		sem = SemInfermatrix
	}
	k := opts.SpillLimit
	a := &Aggregator{opts: opts, sem: sem, errs: map[string]int{}, errMsgs: map[string]string{}, store: store,
		slices: newSlicer(opts.Timeslice, store, slotLimit(k)), turns: turnAcc{store: store, limit: k}}
	for _, c := range []*samples.Column{&a.ttft, &a.ttfo, &a.ttst, &a.itl, &a.tpot, &a.e2e, &a.queue, &a.in, &a.out, &a.perUser, &a.lag} {
		*c = samples.NewColumn(store, k)
	}
	a.spans = samples.NewSpans(store, k)
	if opts.Ramp != nil && len(opts.Ramp.Levels) > 0 {
		a.ramp = newRampSteps(opts, store)
	}
	return a
}

// SetClientLoad records what the runner measured of its own process
// during the row, for the self-check.
func (a *Aggregator) SetClientLoad(l ClientLoad) { a.load = &l }

// Add folds in one record. Warmup records are only counted.
func (a *Aggregator) Add(r *Record) {
	a.spans.Add(r.StartNS, r.StartNS+r.EndNS)
	if a.ramp != nil {
		a.ramp.add(r)
	}
	if r.Warmup {
		a.reqs.Warmup++
		return
	}
	a.reqs.Sent++
	if r.Retries > 0 {
		a.reqs.Retried++
	}
	dispatch := r.StartNS - r.QueueNS
	end := r.StartNS + r.EndNS
	if !a.anyMeas {
		a.first, a.last = dispatch, end
		a.firstSched, a.lastSched = r.ScheduledNS, r.ScheduledNS
		a.lastDispatchNS = dispatch
	}
	a.anyMeas = true
	a.first, a.last = min(a.first, dispatch), max(a.last, end)
	a.firstSched, a.lastSched = min(a.firstSched, r.ScheduledNS), max(a.lastSched, r.ScheduledNS)
	a.lastDispatchNS = max(a.lastDispatchNS, dispatch)
	if a.opts.OpenLoop || a.opts.RequestedRate > 0 {
		a.lag.Add(ms(dispatch - r.ScheduledNS))
	}
	a.slices.add(r)
	ok := r.OK()
	if a.sem == SemVLLM {
		ok = vllmSucceeded(r)
	}
	if !ok {
		a.reqs.Failed++
		switch {
		case r.Canceled():
			a.reqs.Canceled++
		case r.Error == nil:
			// Successful by infermatrix's rule, failed by the
			// semantics' (vLLM: a stream without a chunk with choices).
			a.errs[ErrProtocol]++
			a.goodBase++
		default:
			a.errs[r.Error.Class]++
			a.goodBase++
			if r.Error.Detail == DetailClientFiles {
				a.clientFiles++
			}
			if _, seen := a.errMsgs[r.Error.Class]; !seen {
				a.errMsgs[r.Error.Class] = clipExample(r.Error.Message)
			}
		}
		return
	}
	a.reqs.Completed++
	a.goodBase++
	a.queue.Add(ms(r.QueueNS))
	a.inLen.addAllowing(r.InputTokens, r.TemplateTokens)
	a.outLen.add(r.OutputTokens)
	a.addCache(r)
	if r.Stream {
		for i := 1; i < len(r.Events); i++ {
			a.gaps++
			if r.Events[i] == r.Events[i-1] {
				a.zeroGaps++
			}
		}
	}

	v := measure(a.sem, a.opts.API, r)
	if v.fallback {
		a.fallback++
	}
	if v.hasIn {
		a.inSum += int64(v.in)
		a.in.Add(float64(v.in))
	} else {
		a.noIn++
	}
	if r.Inputs > 0 {
		// A pooling request generates nothing: its output length is
		// absent, not a zero that would pull a mixed row's mean down.
		a.pooled++
		a.inputs += int64(r.Inputs)
	} else if v.noOut {
		a.noOut++
	} else {
		a.outSum += int64(v.out)
		a.out.Add(float64(v.out))
	}
	e2e := ms(v.e2e)
	a.e2e.Add(e2e)
	if a.reqs.Completed == 1 {
		a.okFirst, a.okLast = r.StartNS, r.StartNS+v.e2e
	}
	a.okFirst, a.okLast = min(a.okFirst, r.StartNS), max(a.okLast, r.StartNS+v.e2e)
	if r.Stream {
		a.streamed++
		if len(r.Events) == 0 {
			a.noText++
		}
	}
	if v.ttft > 0 {
		a.ttft.Add(ms(v.ttft))
	}
	if r.Stream && r.FirstOutputNS > 0 {
		a.ttfo.Add(ms(r.FirstOutputNS))
	}
	if len(r.Events) >= 2 {
		a.ttst.Add(ms(r.Events[1] - r.Events[0]))
	}
	switch a.sem {
	case SemVLLM:
		vllmGaps(r, a.addITL)
	case SemAIPerf:
		if v.hasTPOT {
			a.itl.Add(v.tpot)
		}
	default:
		eventGaps(r.Events, a.addITL)
	}
	if v.hasTPOT {
		a.tpot.Add(v.tpot)
		if v.tpot > 0 {
			a.perUser.Add(1000 / v.tpot)
		}
	}
	if a.meetsSLO(r, v) {
		a.good++
	}
	a.turns.add(r, v)
}

func (a *Aggregator) addITL(ns int64) { a.itl.Add(ms(ns)) }

// addCache folds in a request's cached tokens, when the server said.
// Requests it said nothing of are counted aside: a server that reports
// cached tokens only when there are some (SGLang) means none by its
// silence, which Summary takes into account once the row shows that the
// server reports at all.
func (a *Aggregator) addCache(r *Record) {
	if r.CachedTokens == nil {
		a.uncounted++
		a.uncountedPrompt += int64(r.InputTokens.Count())
		return
	}
	c := &a.cache
	cached := int64(*r.CachedTokens)
	prompt := int64(r.InputTokens.Count())
	c.Requests++
	c.PromptTokens += prompt
	c.CachedTokens += cached
	allowed := int64(r.SharedTokens)
	if r.InputTokens.Server != nil && *r.InputTokens.Server > r.InputTokens.Client {
		allowed += int64(*r.InputTokens.Server - r.InputTokens.Client)
	}
	if extra := cached - allowed; extra > 0 {
		c.UnexpectedTokens += extra
		c.UnexpectedRequests++
	}
}

// inFlight is the time-weighted mean and the peak of requests in flight
// over [from, to]: a sweep over every request's start and end in time
// order, ends before starts at the same instant (a user's next request
// starting as its last ends is one in flight, not two), merged from the
// spilled runs where the row spilled (samples.Spans.Walk).
func (a *Aggregator) inFlight(from, to int64) InFlight {
	if to <= from || a.spans.Len() == 0 {
		return InFlight{}
	}
	var out InFlight
	var area float64
	n, prev := 0, from
	err := a.spans.Walk(func(at int64, d int) {
		if at > from {
			t := min(at, to)
			if t > prev {
				area += float64(n) * float64(t-prev)
				prev = t
			}
		}
		n += d
		if at >= from && at < to {
			out.Max = max(out.Max, n)
		}
	})
	if err != nil {
		a.spillFailed("in_flight", err)
		return InFlight{}
	}
	if to > prev {
		area += float64(n) * float64(to-prev)
	}
	out.Mean = round6(area / float64(to-from))
	return out
}

// meetsSLO applies every set objective as the semantics defines goodput.
//
// Infermatrix's: a non-streamed response has no separate first token, so
// its TTFT objective is judged on end-to-end latency (that is when its
// reader sees the first word); a request with fewer than two tokens has no
// TPOT and meets that objective; the ITL objective bounds the request's
// largest gap. vLLM's is the same but for ITL, which its --goodput does not
// take. AIPerf's counts a metric the request lacks as a miss, and judges
// both TPOT and ITL objectives on its inter_token_latency.
func (a *Aggregator) meetsSLO(r *Record, v measured) bool {
	s := a.opts.SLO
	e2e := ms(v.e2e)
	if a.sem == SemAIPerf {
		switch {
		case s.TTFTms > 0 && (v.ttft == 0 || ms(v.ttft) > s.TTFTms):
			return false
		case (s.TPOTms > 0 || s.ITLms > 0) && !v.hasTPOT:
			return false
		case s.TPOTms > 0 && v.tpot > s.TPOTms, s.ITLms > 0 && v.tpot > s.ITLms:
			return false
		}
		return s.E2Ems == 0 || e2e <= s.E2Ems
	}
	if s.TTFTms > 0 {
		ttft := e2e
		if v.ttft > 0 {
			ttft = ms(v.ttft)
		}
		if ttft > s.TTFTms {
			return false
		}
	}
	if s.TPOTms > 0 && v.hasTPOT && v.tpot > s.TPOTms {
		return false
	}
	if s.ITLms > 0 && a.sem == SemInfermatrix && r.MaxGapMS() > s.ITLms {
		return false
	}
	return s.E2Ems == 0 || e2e <= s.E2Ems
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// Window returns the row's measured window so far, in ns from the row's
// start: from the first measured dispatch to the last measured end, the
// window WindowS measures; ok is false before a measured request has ended.
// Telemetry is reduced over the same window.
func (a *Aggregator) Window() (start, end int64, ok bool) {
	return a.first, a.last, a.anyMeas
}

// Summary returns the row's summary. The aggregator must not be used after.
func (a *Aggregator) Summary(id, base, status string) RowSummary {
	x := a.opts.Percentiles
	s := RowSummary{
		ID:       id,
		Base:     base,
		Status:   status,
		Requests: a.reqs,
		Metrics: Metrics{
			TTFT:         a.dist("ttft_ms", &a.ttft, x),
			TTFO:         a.dist("ttfo_ms", &a.ttfo, x),
			TTST:         a.dist("ttst_ms", &a.ttst, x),
			ITL:          a.dist("itl_ms", &a.itl, x),
			TPOT:         a.dist("tpot_ms", &a.tpot, x),
			E2E:          a.dist("e2e_ms", &a.e2e, x),
			Queue:        a.dist("queue_ms", &a.queue, x),
			InputTokens:  a.dist("input_tokens", &a.in, x),
			OutputTokens: a.dist("output_tokens", &a.out, x),
		},
		Semantics: a.sem,
	}
	if a.anyMeas {
		s.WindowS = float64(a.last-a.first) / 1e9
		s.Timeslices = a.slices.summary(a.first, a.last)
		s.InFlight = a.inFlight(a.first, a.last)
	}
	s.Cache = a.cache
	if c := &s.Cache; c.Requests > 0 {
		c.Requests += a.uncounted
		c.PromptTokens += a.uncountedPrompt
	}
	if c := &s.Cache; c.PromptTokens > 0 {
		c.HitRatio = round6(float64(c.CachedTokens) / float64(c.PromptTokens))
		c.UnexpectedRatio = round6(float64(c.UnexpectedTokens) / float64(c.PromptTokens))
	}
	if a.sem == SemAIPerf {
		s.WindowS = 0
		if a.reqs.Completed > 0 {
			s.WindowS = float64(a.okLast-a.okFirst) / 1e9
		}
	}
	if s.WindowS > 0 {
		w := s.WindowS
		s.Throughput = Throughput{
			RequestsPerS:     float64(a.reqs.Completed) / w,
			OutputTokensPerS: float64(a.outSum) / w,
			InputTokensPerS:  float64(a.inSum) / w,
			TotalTokensPerS:  float64(a.inSum+a.outSum) / w,
		}
		if a.pooled > 0 {
			s.Throughput.InputsPerS = float64(a.inputs) / w
		}
		s.Goodput.RequestsPerS = float64(a.good) / w
	}
	if a.perUser.Len() > 0 {
		// The median request's speed: a mean is dominated by the few
		// requests whose tokens came in one read, whose TPOT is near zero.
		// AIPerf's output_token_throughput_per_user is the mean, and its
		// semantics keeps it.
		d := a.dist("output_tokens_per_s_per_user", &a.perUser, nil)
		s.Throughput.OutputTokensPerSU = d.P50
		if a.sem == SemAIPerf {
			s.Throughput.OutputTokensPerSU = d.Mean
		}
	}
	s.Goodput.Good = a.good
	goodBase := a.goodBase
	if a.sem == SemAIPerf {
		goodBase = a.reqs.Sent // good_request_fraction: good ÷ (valid + errors)
	}
	if goodBase > 0 {
		s.Goodput.Ratio = float64(a.good) / float64(goodBase)
	}
	s.Errors.Total = a.reqs.Failed - a.reqs.Canceled
	if n := a.reqs.Sent - a.reqs.Canceled; n > 0 {
		s.Errors.Ratio = float64(s.Errors.Total) / float64(n)
	}
	if len(a.errs) > 0 {
		s.Errors.ByClass = a.errs
	}
	if len(a.errMsgs) > 0 {
		s.Errors.Examples = a.errMsgs
	}
	s.SelfCheck = a.selfCheck()
	s.Tokens = a.tokenCheck()
	s.ByTurn = a.turns.summary(a, x)
	s.SemanticsNotes = append(a.semanticsNotes(), a.spillNotes...)
	Price(&s, a.opts.Pricing)
	if a.ramp != nil && a.anyMeas {
		s.Steps = a.ramp.summaries(id, base, status, a.firstSched, a)
	}
	return s
}

// semanticsNotes says where this row's records did not carry what the
// semantics needs.
func (a *Aggregator) semanticsNotes() []string {
	var notes []string
	if a.fallback > 0 {
		notes = append(notes, fmt.Sprintf(
			"%d of %d successful requests have no choice-chunk stamps (first_choice_ns, last_choice_ns): their vLLM TTFT, ITL and E2E are taken at text events, which equals vLLM's when the server sends its role chunk with the first token and nothing with choices after the last",
			a.fallback, a.reqs.Completed))
	}
	if a.noIn > 0 {
		notes = append(notes, fmt.Sprintf("%d of %d successful requests have no client count of their prompt: left out of input_tokens and the token throughputs", a.noIn, a.reqs.Completed))
	}
	if a.noOut > 0 {
		notes = append(notes, fmt.Sprintf("%d of %d successful requests have no count of their output (no usage from the server, and the client's count of a huge output was abandoned when the request was cancelled): left out of output_tokens, TPOT and the token throughputs", a.noOut, a.reqs.Completed))
	}
	if a.sem == SemAIPerf && a.noText > 0 {
		notes = append(notes, fmt.Sprintf("%d of %d successful streams carried no text: AIPerf would count them as errors; here they stay successes", a.noText, a.streamed))
	}
	return notes
}

// tokenCheck flags a row whose lengths differ from the server's by more
// than TokenMismatchLimit on average, either side.
func (a *Aggregator) tokenCheck() TokenCheck {
	c := TokenCheck{Input: a.inLen.check(), Output: a.outLen.check()}
	for _, side := range []struct {
		name string
		l    LengthCheck
	}{{"input", c.Input}, {"output", c.Output}} {
		switch {
		case side.name == "output" && a.pooled > 0 && a.pooled == int64(a.reqs.Completed):
			// Embeddings and rerank requests ask for no output.
		case a.reqs.Completed > 0 && side.l.Requests == 0:
			c.Notes = append(c.Notes, fmt.Sprintf("no %s lengths checked: the server reported no usage", side.name))
		case side.l.Mismatch:
			c.Mismatch = true
			template := ""
			if side.l.TemplateMean > 0 {
				template = fmt.Sprintf(" (%.1f of them its chat template's, allowed)", side.l.TemplateMean)
			}
			c.Notes = append(c.Notes, fmt.Sprintf("%s: the server counted %.1f tokens on average%s against %.1f requested (%+.1f%%, limit ±%g%%); %d of %d requests differ by more than the limit",
				side.name, side.l.ServerMean, template, side.l.RequestedMean, 100*side.l.Diff, 100*TokenMismatchLimit, side.l.Over, side.l.Requests))
		}
	}
	return c
}

// selfCheck compares what the client dispatched with what it scheduled,
// and reports the client's own load.
//
// The client is flagged as the possible bottleneck when its p99 dispatch
// lag exceeds 1 ms or a tenth of the mean gap between arrivals, whichever
// is larger (below that, lateness is small beside the arrival process
// itself), when it dispatched at a rate short of the schedule's
// (DispatchShortfall), or when its process used CPUSaturation of its
// cores or more.
func (a *Aggregator) selfCheck() SelfCheck {
	c := SelfCheck{DispatchLag: a.dist("dispatch_lag_ms", &a.lag, a.opts.Percentiles)}
	a.clientLoad(&c)
	c.Gaps, c.ZeroGaps = a.gaps, a.zeroGaps
	c.ClientFileErrors = a.clientFiles
	if a.clientFiles > 0 {
		c.ClientBound = true
		c.Notes = append(c.Notes, fmt.Sprintf(
			"the client ran out of file descriptors: %d measured requests could not leave it", a.clientFiles))
	}
	if a.gaps > 0 {
		c.ZeroGapShare = round6(float64(a.zeroGaps) / float64(a.gaps))
	}
	c.Users = a.opts.Users
	if !a.opts.OpenLoop && a.opts.RequestedRate <= 0 {
		return c
	}
	c.RequestedRate = a.opts.RequestedRate
	n := float64(a.reqs.Sent - 1)
	if span := a.lastSched - a.firstSched; n > 0 && span > 0 {
		c.ScheduledRate = n / (float64(span) / 1e9)
	}
	if span := a.lastDispatchNS - a.first; n > 0 && span > 0 {
		c.AchievedRate = n / (float64(span) / 1e9)
	}
	rate := a.opts.RequestedRate
	if rate <= 0 {
		rate = c.ScheduledRate // a trace's own rate
	}
	limit := DispatchLagLimitMS(rate)
	if c.DispatchLag.Count > 0 && c.DispatchLag.P99 > limit {
		c.ClientBound = true
		c.Notes = append(c.Notes, fmt.Sprintf(
			"the client fell behind its dispatch schedule: p99 dispatch lag %.1f ms (limit %.1f ms); dispatched at %.3g req/s against %.3g scheduled",
			c.DispatchLag.P99, limit, c.AchievedRate, c.ScheduledRate))
	} else if short, behind := c.DispatchShortfall(); behind {
		c.ClientBound = true
		c.Notes = append(c.Notes, fmt.Sprintf(
			"the client could not carry the schedule's rate: it dispatched at %.4g req/s against %.4g scheduled (%.1f%% short, limit %g%%)",
			c.AchievedRate, c.ScheduledRate, 100*short, 100*DispatchRateShortfall))
	}
	return c
}

// DispatchRateShortfall is how far below its schedule's rate an open-loop
// row may dispatch before the client is said to fall behind it. Sampling
// error plays no part here (both rates are of the same drawn schedule), so
// what remains is the client's own pace: a client that cannot carry the
// rate lags further with every request, and its dispatched rate falls
// short of the schedule's while its p99 lag may still look modest (the
// requests late by a second are under a percent of a long row's).
const DispatchRateShortfall = 0.01

// DispatchShortfall is the fraction by which the dispatched rate fell
// short of the schedule's (0 when it did not), and whether it counts as
// falling behind: more than DispatchRateShortfall short, and by more time
// over the row than the lag limit, so that on a short row one request
// late by less than the p99 limit allows cannot fail it on its own.
func (c SelfCheck) DispatchShortfall() (short float64, behind bool) {
	n := float64(c.DispatchLag.Count - 1)
	if n <= 0 || c.ScheduledRate <= 0 || c.AchievedRate <= 0 || c.AchievedRate >= c.ScheduledRate {
		return 0, false
	}
	short = 1 - c.AchievedRate/c.ScheduledRate
	rate := c.RequestedRate
	if rate <= 0 {
		rate = c.ScheduledRate
	}
	// The dispatch span's excess over the schedule's, in ms.
	lateMS := 1000 * n * (1/c.AchievedRate - 1/c.ScheduledRate)
	return short, short > DispatchRateShortfall && lateMS > DispatchLagLimitMS(rate)
}

// DispatchLagLimitMS is the p99 dispatch lag, in ms, beyond which an
// open-loop client fell behind its schedule at rate requests a second:
// 1 ms, or a tenth of the mean gap between arrivals, whichever is larger.
// Below it, lateness is small beside the arrival process itself.
func DispatchLagLimitMS(rate float64) float64 {
	if rate <= 0 {
		return 1
	}
	return max(1, 100/rate)
}

// clientLoad fills in the CPU use and the measurement error estimate.
func (a *Aggregator) clientLoad(c *SelfCheck) {
	l := a.load
	if l == nil {
		return
	}
	c.ClockResolutionMS = round6(l.ClockResolutionNS / 1e6)
	c.SchedDelayP99MS = round6(l.SchedDelayP99NS / 1e6)
	c.MeasurementErrorMS = round6((l.ClockResolutionNS + l.SchedDelayP99NS) / 1e6)
	if l.Cores > 0 && l.WallSeconds > 0 {
		c.Cores = l.Cores
		c.CPUSeconds = round6(l.CPUSeconds)
		c.ClientCPU = round6(l.CPUSeconds / (l.WallSeconds * float64(l.Cores)))
	}
	if c.ClientCPU >= CPUSaturation {
		c.ClientBound = true
		c.Notes = append(c.Notes, fmt.Sprintf(
			"the client's process used %.0f%% of its %d cores (limit %.0f%%): goroutines queued for a core, and the operating system's own scheduling delay, which the measurement error does not include, grows too",
			100*c.ClientCPU, l.Cores, 100*CPUSaturation))
	}
	c.SharedWithServer = l.SharedWithServer
	c.HostCPU = round6(l.HostCPU)
	c.TimerLatenessP99MS = round6(l.TimerLatenessP99NS / 1e6)
	c.SimLatenessP99MS, c.SimFlushes = round6(l.SimLatenessP99NS/1e6), l.SimFlushes
	c.StampErrorP99MS, c.StampErrors = round6(l.StampErrorP99NS/1e6), l.StampErrors
	if c.HostCPU >= CPUSaturation && !c.ClientBound {
		c.Notes = append(c.Notes, fmt.Sprintf(
			"the machine's CPUs were %.0f%% busy during the row, this process included: where other processes compete for the cores, the client's stamps are delayed in ways the measurement error does not show",
			100*c.HostCPU))
	}
}

// clipExample cuts an error message to MaxErrorExample bytes, at a rune
// boundary.
func clipExample(msg string) string {
	if len(msg) <= MaxErrorExample {
		return msg
	}
	cut := MaxErrorExample
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}
