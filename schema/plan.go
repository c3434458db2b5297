package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
)

// Plan is a validated experiment with defaults applied and sweeps expanded:
// everything the runner needs, and nothing it has to interpret further.
type Plan struct {
	// Experiment is the file as written (after any --target override).
	Experiment *Experiment `json:"-"`
	// File is the path the experiment was read from; Dir is its directory,
	// against which relative paths in the file are resolved.
	File string `json:"file"`
	Dir  string `json:"-"`
	// Source is the file's bytes, copied into the run directory, and
	// SHA256 their hash, which identifies the experiment in the record.
	Source []byte `json:"-"`
	SHA256 string `json:"sha256"`

	Server      ServerPlan  `json:"server"`
	SLO         metrics.SLO `json:"slo"`
	Percentiles []float64   `json:"percentiles"`
	Formats     []string    `json:"formats"`
	// Semantics names whose metric definitions the summaries follow
	// (metrics.SemInfermatrix, SemVLLM, SemAIPerf); Timeslice is the width
	// of each row's timeslices.
	Semantics string   `json:"semantics"`
	Timeslice Duration `json:"timeslice"`
	// Confidence is the level of repeated rows' intervals
	// (report.confidence).
	Confidence float64      `json:"confidence,omitempty"`
	Rows       []PlannedRow `json:"rows"`

	// Validity holds the validity checks' thresholds, defaults applied.
	Validity ValidityPlan `json:"validity"`
	// Telemetry is where and how often each row's telemetry is scraped.
	Telemetry TelemetryPlan `json:"telemetry"`
	// Cost is the server's price per hour and GPU count (Pricing).
	Cost CostPlan `json:"cost"`
	// Skipped lists the rows of the experiment that this plan leaves out
	// (run --rows): rules on them are not judged, so no run of the plan
	// can pass them.
	Skipped []string `json:"skipped,omitempty"`
	// Baseline is the run the rules' baseline.<metric> names read, as
	// given (run --baseline, or the file's baseline key resolved against
	// the file's directory): a run directory or a folder of runs. Empty
	// when there is none, and then no rule reads it (Load refuses one).
	Baseline string `json:"baseline,omitempty"`

	// Acceptance and Hypotheses are compiled, ready to evaluate.
	Acceptance []AcceptanceRule `json:"-"`
	Hypotheses []HypothesisRule `json:"-"`
}

// ValidityPlan is the validity section with defaults applied (see
// Validity for what each threshold means).
type ValidityPlan struct {
	Ignore        []string `json:"ignore,omitempty"`
	ClientCPU     float64  `json:"client_cpu"`
	ClientStallMS float64  `json:"client_stall_ms"`
	ZeroGapShare  float64  `json:"zero_gap_share"`
	StampErrorMS  float64  `json:"stamp_error_ms"`
	SimLatenessMS float64  `json:"sim_lateness_ms"`
	LoadTolerance float64  `json:"load_tolerance"`
	MinWindowE2E  float64  `json:"min_window_e2e"`
	ErrorRatio    float64  `json:"error_ratio"`
	CacheRatio    float64  `json:"cache_ratio"`
}

// Ignores reports whether the check is switched off.
func (v ValidityPlan) Ignores(check string) bool {
	for _, c := range v.Ignore {
		if c == check {
			return true
		}
	}
	return false
}

// DefaultValidity is the validity section of a file that has none.
var DefaultValidity = ValidityPlan{
	ClientCPU: 0.9, ClientStallMS: 5, ZeroGapShare: 0.05, StampErrorMS: 1, SimLatenessMS: 5,
	LoadTolerance: 0.1, MinWindowE2E: 5, ErrorRatio: 0.01, CacheRatio: 0.05,
}

// How an acceptance rule judges a swept row (Acceptance.Sweep).
const (
	SweepEachPoint      = "each_point"
	SweepOperatingPoint = "operating_point"
)

// CostPlan is the cost section resolved: the whole server's price per hour
// (0 without a cost section) and the GPUs it runs on, which throughput per
// GPU divides by either way.
type CostPlan struct {
	USDPerHour float64 `json:"usd_per_hour,omitempty"`
	GPUs       int     `json:"gpus"`
	// GPUsFrom says where the GPU count came from: server.hardware.count,
	// server.sim.replicas, or default.
	GPUsFrom string `json:"gpus_from"`
}

// Pricing is what the summaries compute cost from.
func (c CostPlan) Pricing() metrics.Pricing {
	return metrics.Pricing{USDPerHour: c.USDPerHour, GPUs: c.GPUs}
}

// TelemetryPlan is the telemetry section with defaults applied.
type TelemetryPlan struct {
	Enabled  bool     `json:"enabled"`
	Interval Duration `json:"interval"`
	// Metrics are the server's endpoints as written; empty means the
	// default, each server URL's root with /metrics, which the runner
	// derives (ServerMetricsURL) once it knows the URLs (the built-in
	// server's port is known only when it starts).
	Metrics []string `json:"metrics,omitempty"`
	GPU     []string `json:"gpu,omitempty"`
}

// ServerMetricsURL is the default metrics endpoint of a server whose API is
// at base: its root (base without a trailing /v1) with /metrics, where vLLM,
// SGLang, TGI, llama.cpp and NIM all serve it.
func ServerMetricsURL(base string) string {
	root := strings.TrimSuffix(strings.TrimRight(base, "/"), "/v1")
	return root + "/metrics"
}

// ServerPlan is the server section with defaults applied.
type ServerPlan struct {
	Builtin   bool              `json:"builtin"`
	URLs      []string          `json:"urls,omitempty"`
	API       string            `json:"api"`
	Model     string            `json:"model,omitempty"`
	APIKeyEnv string            `json:"api_key_env,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	// HeaderEnv maps header names to the environment variables holding
	// their values; the values are read by the runner and never stored.
	HeaderEnv map[string]string `json:"header_env,omitempty"`
	// UnreachableAfter is how long the run tolerates a server that
	// refuses every connection.
	UnreachableAfter Duration    `json:"unreachable_after,omitempty"`
	Engine           Engine      `json:"engine"`
	Hardware         Hardware    `json:"hardware"`
	Sim              SimSettings `json:"sim,omitempty"`
	// Variants are the server's configurations under test, in the order
	// they run; none for an experiment without server.variants.
	Variants []VariantPlan `json:"variants,omitempty"`
}

// PlannedRow is one concrete row: every setting resolved, one load level.
type PlannedRow struct {
	ID   string `json:"id"`   // e.g. saturation/c=16
	Base string `json:"base"` // the id as written, e.g. saturation
	// Variant names the server variant the row runs under
	// (server.variants); its ID and Base then end in @<variant>.
	Variant  string `json:"variant,omitempty"`
	Question string `json:"question,omitempty"`
	// SweepPoint holds this row's sweep values by dimension (concurrency,
	// rate, input_tokens, output_tokens), for plots and tables.
	SweepPoint map[string]float64 `json:"sweep_point,omitempty"`
	// Search is set on a search row as planned: the runner replaces it
	// with its probes (Plan.WithProbes). Probe is set on each probe.
	Search *SearchPlan `json:"search,omitempty"`
	Probe  *ProbeInfo  `json:"probe,omitempty"`

	Requests       int      `json:"requests,omitempty"` // 0: no request limit (duration or trace ends the row)
	Duration       Duration `json:"duration,omitempty"` // 0: no time limit
	Warmup         int      `json:"warmup,omitempty"`
	WarmupDuration Duration `json:"warmup_duration,omitempty"`
	Grace          Duration `json:"grace"`
	Timeout        Duration `json:"timeout"`
	// Repeat is how many trials the row runs (repeat); 0 for one, a row
	// without repeat (Trials). The trials of all rows run in interleaved
	// rounds (Plan.MaxRepeat).
	Repeat int `json:"repeat,omitempty"`

	Load LoadPlan `json:"load"`

	Input   Length   `json:"input_tokens"`
	Output  Length   `json:"output_tokens"`
	Prefix  *Prefix  `json:"prefix,omitempty"`
	Dataset *Dataset `json:"dataset,omitempty"` // File resolved against the experiment's directory
	Trace   *Trace   `json:"trace,omitempty"`   // File resolved against the experiment's directory
	// PrefillConcurrency caps the requests waiting for their first token
	// (prefill_concurrency); 0: no cap.
	PrefillConcurrency int `json:"prefill_concurrency,omitempty"`
	// Conversation makes the row's users hold multi-turn chats; nil for
	// single-turn rows.
	Conversation *ConversationPlan `json:"conversation,omitempty"`

	// API is the endpoint the row calls when it sets its own (api);
	// empty means the server's (Plan.RowAPI). Batch is the inputs per
	// request of an embeddings or rerank row and Query a rerank row's
	// query length; both unset for chat and completions.
	API   string  `json:"api,omitempty"`
	Batch int     `json:"batch,omitempty"`
	Query *Length `json:"query_tokens,omitempty"`

	Streaming bool              `json:"streaming"`
	Tokenizer string            `json:"tokenizer"`
	Body      map[string]any    `json:"body,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	Cancel    *Cancel           `json:"cancel,omitempty"`
	Seed      int64             `json:"seed"`
	// UniquePrompts is one of the UniquePrompts* modes.
	UniquePrompts string `json:"unique_prompts,omitempty"`
}

// How prompts are kept apart (Settings.UniquePrompts).
const (
	UniquePerRun        = "per_run"
	UniquePerExperiment = "per_experiment"
	UniqueOff           = "off"
)

// Load modes.
const (
	ModeConcurrency = "concurrency"
	ModeRate        = "rate"
	ModeTrace       = "trace"
)

// LoadPlan is how a row offers load.
type LoadPlan struct {
	Mode           string  `json:"mode"`
	Concurrency    int     `json:"concurrency,omitempty"`
	Rate           float64 `json:"rate,omitempty"`
	Arrival        string  `json:"arrival,omitempty"`
	Burstiness     float64 `json:"burstiness,omitempty"`
	MaxConcurrency int     `json:"max_concurrency,omitempty"`
	Speedup        float64 `json:"speedup,omitempty"`
	// Ramp, when set, steps the load (schema/ramp.go); Concurrency or
	// Rate is then its last, highest level.
	Ramp *RampPlan `json:"ramp,omitempty"`
}

// AcceptanceRule is a compiled acceptance rule.
type AcceptanceRule struct {
	Name    string
	Rows    []string // expanded row ids it applies to
	Program *metrics.Program
	// Sweep is SweepEachPoint or SweepOperatingPoint.
	Sweep string
}

// HypothesisRule is a compiled hypothesis.
type HypothesisRule struct {
	ID, Statement string
	Program       *metrics.Program
}

// Row returns the planned row with this id, or nil.
func (p *Plan) Row(id string) *PlannedRow {
	for i := range p.Rows {
		if p.Rows[i].ID == id {
			return &p.Rows[i]
		}
	}
	return nil
}

// TotalRequests is the number of requests one trial of the row will send,
// warmup and prefix priming included, or 0 when only a duration or trace
// bounds it. A row with repeat sends this many in each trial.
func (r *PlannedRow) TotalRequests() int {
	if r.Requests == 0 {
		return 0
	}
	return r.Requests + r.Warmup + r.PrimingRequests()
}

// PrimingRequests is the number of requests that fill the server's prefix
// cache before a warm-prefix row: one per distinct prefix.
func (r *PlannedRow) PrimingRequests() int {
	if r.Prefix == nil || !r.Prefix.Warm {
		return 0
	}
	return r.Prefix.Distinct
}

func hashOf(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Estimate is a rough duration of a row, for `infermatrix plan`.
type Estimate struct {
	Duration time.Duration
	// Assumed is set when the estimate rests on an assumed per-request
	// latency rather than on the row's own settings.
	Assumed bool
}

// EstimateRow estimates how long a row takes. perRequest is the expected
// latency of one request of the row, used for closed-loop rows, whose
// duration depends on the server.
func EstimateRow(r *PlannedRow, perRequest time.Duration) Estimate {
	if r.Search != nil {
		return estimateSearch(r, perRequest) // schema/search.go
	}
	var send time.Duration
	assumed := false
	switch r.Load.Mode {
	case ModeRate:
		if r.Requests > 0 {
			send = time.Duration(float64(r.TotalRequests()) / (r.Load.Rate * r.Conversation.requestsPerArrival()) * float64(time.Second))
		}
	case ModeConcurrency:
		if r.Requests > 0 {
			rounds := (r.TotalRequests() + r.Load.Concurrency - 1) / r.Load.Concurrency
			send = time.Duration(rounds) * (perRequest + r.Conversation.thinkPerRequest())
			assumed = true
		}
	}
	if r.Duration > 0 {
		d := r.Duration.D() + r.WarmupDuration.D()
		if send == 0 || d < send {
			send, assumed = d, false
		}
	}
	if r.Load.Mode != ModeConcurrency {
		send += perRequest // the last request still has to finish
	}
	// Each trial sends the row's requests again, warmup included.
	send *= time.Duration(max(1, r.Repeat))
	return Estimate{Duration: send, Assumed: assumed}
}

// String describes the load in words, for logs and decision records.
func (l LoadPlan) String() string {
	if l.Ramp != nil {
		return describeRamp(l)
	}
	switch l.Mode {
	case ModeConcurrency:
		return fmt.Sprintf("concurrency %d", l.Concurrency)
	case ModeRate:
		s := fmt.Sprintf("%s %g req/s", l.Arrival, l.Rate)
		if l.Burstiness > 0 {
			s += fmt.Sprintf(" (burstiness %g)", l.Burstiness)
		}
		if l.MaxConcurrency > 0 {
			s += fmt.Sprintf(", ≤%d in flight", l.MaxConcurrency)
		}
		return s
	case ModeTrace:
		s := fmt.Sprintf("trace at %gx", l.Speedup)
		if l.MaxConcurrency > 0 {
			s += fmt.Sprintf(", ≤%d in flight", l.MaxConcurrency)
		}
		return s
	}
	return l.Mode
}

// String describes a length distribution compactly: "256", "2048±200",
// "one of 128, 512".
func (l Length) String() string {
	switch {
	case len(l.Values) > 0:
		parts := make([]string, len(l.Values))
		for i, v := range l.Values {
			parts[i] = fmt.Sprint(v)
		}
		return "one of " + strings.Join(parts, ", ")
	case l.Mean == 0:
		return "—"
	case l.Stddev > 0:
		return fmt.Sprintf("%d±%g", l.Mean, l.Stddev)
	}
	return fmt.Sprint(l.Mean)
}

// Stop describes how a row ends.
func (r *PlannedRow) Stop() string {
	var s string
	switch {
	case r.Requests > 0 && r.Duration > 0:
		s = fmt.Sprintf("%d requests or %s", r.Requests, r.Duration)
	case r.Requests > 0:
		s = fmt.Sprintf("%d requests", r.Requests)
	case r.Duration > 0:
		s = r.Duration.String()
	case r.Trace != nil:
		s = "end of trace"
	}
	switch {
	case r.Warmup > 0:
		s += fmt.Sprintf(" + %d warmup", r.Warmup)
	case r.WarmupDuration > 0:
		s += " + " + r.WarmupDuration.String() + " warmup"
	}
	if r.Repeat > 1 {
		s += fmt.Sprintf(", × %d trials", r.Repeat)
	}
	return s
}
