// Package schema defines infermatrix's experiment file format: the types an
// experiment YAML decodes into, loading with positions, defaults, validation
// that reports every problem at once, sweep expansion into a Plan, and the
// JSON Schema editors use.
//
// The pipeline is Load (strict decode, keeping line:col for every key) →
// Resolve (defaults applied once, sweeps expanded) → validation of the
// resolved rows and of every expression. Nothing here sends a request: a file
// that passes Load can still fail at run time only for reasons the file
// cannot know (the server is down, the disk is full).
//
// The struct tags are the single source of truth for the format: `yaml` names
// the key, `doc` explains it (it becomes the JSON Schema description and is
// checked against docs/experiment-format.md by a test), `enum` lists the
// allowed words, `default` documents the value Resolve fills in.
package schema

import (
	"fmt"
	"time"
)

// APIVersion is the only format version this build reads. A file must say so,
// so that a future v2 can change meanings without silently misreading v1
// files checked into someone's repository.
const APIVersion = "infermatrix/v1"

// Experiment is one experiment file as written, before defaults.
//
// Top-level keys starting with "x-" are ignored, so a file can hold YAML
// anchors to reuse ("x-chat: &chat {...}" then "<<: *chat" in rows).
type Experiment struct {
	APIVersion  string         `yaml:"apiVersion" json:"apiVersion,omitempty" doc:"Format version; must be infermatrix/v1." required:"true"`
	Name        string         `yaml:"name" json:"name,omitempty" doc:"Short name, used for the run directory (runs/<name>/...). Letters, digits, '.', '_' and '-'." required:"true"`
	Description string         `yaml:"description" json:"description,omitempty" doc:"One or two sentences: what this experiment is for. Shown at the top of the decision record."`
	Metadata    map[string]any `yaml:"metadata" json:"metadata,omitempty" doc:"Free-form data (ticket, owner, change under test). Recorded untouched in the manifest and the decision record."`
	Hypotheses  []Hypothesis   `yaml:"hypotheses" json:"hypotheses,omitempty" doc:"Claims the experiment tests, each judged supported, refuted or inconclusive from the measurements."`
	Server      Server         `yaml:"server" json:"server,omitempty" doc:"The server under test and what it runs on." required:"true"`
	Predict     *Predict       `yaml:"predict" json:"predict,omitempty" doc:"Bandwidth-math prediction settings: which model and GPU to predict for."`
	Defaults    Settings       `yaml:"defaults" json:"defaults,omitempty" doc:"Settings every row inherits unless it sets them itself."`
	SLO         SLO            `yaml:"slo" json:"slo,omitempty" doc:"Per-request service-level objectives; a request meeting all of them counts toward goodput."`
	Rows        []Row          `yaml:"rows" json:"rows,omitempty" doc:"The workload matrix: one row per configuration to measure." required:"true"`
	Acceptance  []Acceptance   `yaml:"acceptance" json:"acceptance,omitempty" doc:"Pass/fail rules evaluated against each row's summary."`
	Report      Report         `yaml:"report" json:"report,omitempty" doc:"What the decision record contains and which files are written."`
	Baseline    string         `yaml:"baseline" json:"baseline,omitempty" doc:"The run this one is held against: a run directory, or a folder of runs (runs/<name>) meaning its newest complete run by the start time in its manifest. Relative to this file. Rules and hypotheses read its rows as baseline.<metric>, e.g. tpot.p95 < 1.05 * baseline.tpot.p95; run --baseline overrides it."`
	Validity    Validity       `yaml:"validity" json:"validity,omitempty" doc:"Thresholds of the checks that decide whether each row's figures can be trusted; a row that fails one is invalid and never passes (docs/validity.md)."`
	Telemetry   Telemetry      `yaml:"telemetry" json:"telemetry,omitempty" doc:"What the run reads from the server's Prometheus endpoint and the GPUs' DCGM exporters while each row runs (docs/telemetry.md). On by default: the server's <root>/metrics every second."`
	Cost        *Cost          `yaml:"cost" json:"cost,omitempty" doc:"What the server costs, so that every row gets its price per token (cost.*, docs/metrics.md). Give one of usd_per_gpu_hour and usd_per_node_hour."`
}

// Cost is the deployment's price. A benchmark that says "2,400 tok/s" leaves
// the reader to work out what a million tokens cost at that load; with a
// price, every row says so, and the record ranks the accepted rows by it.
type Cost struct {
	USDPerGPUHour  *float64 `yaml:"usd_per_gpu_hour" json:"usd_per_gpu_hour,omitempty" doc:"Price of one GPU for an hour, in US dollars; the server's price is this times its GPUs (server.hardware.count, or for the built-in server sim.replicas; 1 if neither is set)." exclusiveMinimum:"0"`
	USDPerNodeHour *float64 `yaml:"usd_per_node_hour" json:"usd_per_node_hour,omitempty" doc:"Price of the whole server (all its GPUs) for an hour, in US dollars." exclusiveMinimum:"0"`
}

// Telemetry says where the run reads the server's own account of each row:
// its engine metrics (queue, KV cache, prefix cache, preemptions, its own
// latency histograms) and its GPUs' (utilization, power, memory, clocks).
// The client's figures say what users felt; these say why. A scrape that
// fails is a note in the record, never an error of the run, so telemetry is
// on by default.
type Telemetry struct {
	Enabled  *bool     `yaml:"enabled" json:"enabled,omitempty" doc:"false: scrape nothing. Rules that read server.* or gpu.* are then refused." default:"true"`
	Interval *Duration `yaml:"interval" json:"interval,omitempty" doc:"How often every endpoint is scraped during a row, from 100ms to 1m. Each row is also scraped just before its first request and after its last." default:"1s"`
	Metrics  []string  `yaml:"metrics" json:"metrics,omitempty" doc:"The server's Prometheus endpoints, one per server instance. Default: each server URL's root with /metrics (http://host:8000/v1 is scraped at http://host:8000/metrics); the built-in server's own."`
	GPU      []string  `yaml:"gpu" json:"gpu,omitempty" doc:"NVIDIA DCGM exporter endpoints, e.g. http://gpu-node:9400/metrics, one per node. The built-in server serves its simulated GPUs on its own /metrics, so it needs none."`
}

// Validity tunes the checks that make every row valid or say why not. Each
// threshold has a default chosen and explained in docs/validity.md; a file
// sets one only to make a check stricter or looser for a reason it can
// state in review.
type Validity struct {
	Ignore        []string `yaml:"ignore" json:"ignore,omitempty" doc:"Checks not to apply, by name; the decision record lists them as ignored. Every other check applies." enum:"client_cpu,client_files,dispatch_lag,client_stall,bursts,stamp_error,simulator,load,samples,steady_state,errors,cache"`
	ClientCPU     *float64 `yaml:"client_cpu" json:"client_cpu,omitempty" doc:"client_cpu: the client process's CPU use, as a share of its cores, from which a row is invalid." default:"0.9" exclusiveMinimum:"0" maximum:"1"`
	ClientStallMS *float64 `yaml:"client_stall_ms" json:"client_stall_ms,omitempty" doc:"client_stall: how late (p99, ms) the client's probe timers may fire, at least; the limit is this or a tenth of the row's median token gap, whichever is larger. An idle virtual machine's timers already fire 1 to 3 ms late at p99." default:"5" exclusiveMinimum:"0"`
	ZeroGapShare  *float64 `yaml:"zero_gap_share" json:"zero_gap_share,omitempty" doc:"bursts: the share of token events read together with the one before, from which a row is invalid." default:"0.05" exclusiveMinimum:"0" maximum:"1"`
	StampErrorMS  *float64 `yaml:"stamp_error_ms" json:"stamp_error_ms,omitempty" doc:"stamp_error: with the built-in server's ground truth, how far (p99, ms) the client's token stamps may fall outside the server's writes, at least; the limit is this or a tenth of the median token gap." default:"1" exclusiveMinimum:"0"`
	SimLatenessMS *float64 `yaml:"sim_lateness_ms" json:"sim_lateness_ms,omitempty" doc:"simulator: how late (p99, ms) the built-in server may flush tokens against its own schedule, at least; the limit is this or a tenth of the median token gap (the server measures its lateness in buckets: 1, 2.5, 5, 10 ms...). Its timers have the same noise as the client's (see client_stall_ms)." default:"5" exclusiveMinimum:"0"`
	LoadTolerance *float64 `yaml:"load_tolerance" json:"load_tolerance,omitempty" doc:"load: how far the load the server saw may fall short of the row's: a closed loop's mean requests in flight below (1 − this) × concurrency, or an open loop's dispatched rate more than this fraction off the rate asked for, makes the row invalid." default:"0.1" exclusiveMinimum:"0" maximum:"1"`
	MinWindowE2E  *float64 `yaml:"min_window_e2e" json:"min_window_e2e,omitempty" doc:"steady_state: the measured window must last at least this many median end-to-end latencies." default:"5" minimum:"0"`
	ErrorRatio    *float64 `yaml:"error_ratio" json:"error_ratio,omitempty" doc:"errors: the share of failed requests above which latency figures are invalid, unless the row's rules judge errors themselves (errors.*, goodput.*, requests.failed)." default:"0.01" minimum:"0" maximum:"1"`
	CacheRatio    *float64 `yaml:"cache_ratio" json:"cache_ratio,omitempty" doc:"cache: the share of a row's prompt tokens the server may serve from its cache beyond what the row shares on purpose, before the row is invalid (cache contamination)." default:"0.05" minimum:"0" maximum:"1"`
}

// Hypothesis is a claim across rows, such as "long prompts at least double
// p95 TTFT". It never fails a run: a refuted hypothesis is a finding.
type Hypothesis struct {
	ID        string `yaml:"id" json:"id,omitempty" doc:"Short identifier, e.g. H1." required:"true"`
	Statement string `yaml:"statement" json:"statement,omitempty" doc:"The claim in words." required:"true"`
	Expect    string `yaml:"expect" json:"expect,omitempty" doc:"An expression over rows.<row id>.<metric>, true when the claim holds, e.g. rows.long.ttft.p95 > 2 * rows.short.ttft.p95." required:"true"`
}

// Server describes the server under test. Everything but target, urls, api,
// model, api_key_env, headers, header_env and sim is metadata: recorded, not acted on.
type Server struct {
	Target    string            `yaml:"target" json:"target,omitempty" doc:"builtin runs the simulated server in-process. Give either target or urls." enum:"builtin"`
	URLs      []string          `yaml:"urls" json:"urls,omitempty" doc:"Base URLs of the OpenAI-compatible API, ending in /v1. Several URLs are used round-robin."`
	API       string            `yaml:"api" json:"api,omitempty" doc:"Which endpoint every row calls unless it sets its own api: chat (/chat/completions), completions (/completions), embeddings (/embeddings) or rerank (/rerank, vLLM's Jina- and Cohere-compatible shape)." enum:"chat,completions,embeddings,rerank" default:"chat"`
	Model     string            `yaml:"model" json:"model,omitempty" doc:"Model name sent in each request. If empty, the single model listed by GET /models is used."`
	APIKeyEnv string            `yaml:"api_key_env" json:"api_key_env,omitempty" doc:"Name of the environment variable holding the API key, sent as a Bearer token. The key itself never appears in any artifact."`
	Headers   map[string]string `yaml:"headers" json:"headers,omitempty" doc:"Extra HTTP headers sent with every request. Credential headers (Authorization, Cookie, or a name containing key, token, secret, auth, password, signature, session or credential) are refused here: use header_env."`
	// HeaderEnv keeps credentials other than a Bearer key (Azure's api-key,
	// Google's X-Goog-Api-Key, GitLab's Private-Token) out of the file.
	HeaderEnv map[string]string `yaml:"header_env" json:"header_env,omitempty" doc:"Headers whose values are read from the environment, as header name: variable name, e.g. {X-Goog-Api-Key: GOOGLE_API_KEY}. The values never appear in any artifact or message."`
	// UnreachableAfter bounds an outage: see runner's gate.
	UnreachableAfter *Duration   `yaml:"unreachable_after" json:"unreachable_after,omitempty" doc:"When the server refuses connections, requests back off (exponentially, with jitter, one at a time); when no connection has succeeded for this long, the run stops with a runtime error (exit 1) and the decision record says since when the server was unreachable." default:"30s"`
	Engine           Engine      `yaml:"engine" json:"engine,omitempty" doc:"The inference engine, recorded in the manifest and decision record."`
	Hardware         Hardware    `yaml:"hardware" json:"hardware,omitempty" doc:"The hardware, recorded in the manifest and decision record."`
	Sim              SimSettings `yaml:"sim" json:"sim,omitempty" doc:"Settings of the built-in simulated server, used when target is builtin."`
	// Variants turn one experiment into a side-by-side comparison of
	// server configurations (schema/variants.go).
	Variants []Variant `yaml:"variants" json:"variants,omitempty" doc:"Configurations of the server under test; every row runs once per variant, as <row id>@<variant name>, variant by variant, and the decision record puts them side by side (docs/variants.md)."`
}

// Engine is metadata about the inference engine. Flags are kept as written
// so that a rerun after an upgrade shows exactly what changed.
type Engine struct {
	Name    string         `yaml:"name" json:"name,omitempty" doc:"Engine name, e.g. vllm, sglang, tgi, nim, llama.cpp."`
	Version string         `yaml:"version" json:"version,omitempty" doc:"Engine version, e.g. 0.11.0. Quote it if YAML would read it as a number."`
	Image   string         `yaml:"image" json:"image,omitempty" doc:"Container image, if any."`
	Flags   map[string]any `yaml:"flags" json:"flags,omitempty" doc:"Engine flags as passed on its command line, e.g. {max-num-seqs: 64}."`
}

// Hardware is metadata about where the server runs.
type Hardware struct {
	GPU    string `yaml:"gpu" json:"gpu,omitempty" doc:"GPU model, e.g. H100-SXM."`
	Count  int    `yaml:"count" json:"count,omitempty" doc:"Number of GPUs serving the model." minimum:"1"`
	Driver string `yaml:"driver" json:"driver,omitempty" doc:"GPU driver version. Quote it: 580.95 unquoted is a number to YAML."`
	CUDA   string `yaml:"cuda" json:"cuda,omitempty" doc:"CUDA (or ROCm) version."`
	Host   string `yaml:"host" json:"host,omitempty" doc:"Host or instance type."`
	Notes  string `yaml:"notes" json:"notes,omitempty" doc:"Anything else a reviewer should know (power cap, MIG, interconnect)."`
}

// SimSettings configure the built-in server when server.target is builtin.
// A preset names a model on a GPU with a fitted continuous-batching engine
// (docs/simulator.md); the other keys override it. Preset fixed is the
// exception: a constant TTFT and ITL per request, no engine, for testing
// clients against known latencies.
type SimSettings struct {
	Preset         string      `yaml:"preset" json:"preset,omitempty" doc:"Engine model: a preset from docs/simulator.md, or fixed for a constant ttft and itl with no batching." enum:"llama-3.1-8b-h100,qwen3-0.6b-h200,qwen3-0.6b-8xh200,tiny-fast,fixed" default:"llama-3.1-8b-h100"`
	Model          string      `yaml:"model" json:"model,omitempty" doc:"Model name the simulated server serves. Default: the preset's Hugging Face id (infermatrix-sim for fixed and tiny-fast)."`
	MaxModelLen    int         `yaml:"max_model_len" json:"max_model_len,omitempty" doc:"Context limit in tokens; longer requests get vLLM's 400 error. Default: the preset model's (32768 for fixed)." minimum:"1"`
	Replicas       int         `yaml:"replicas" json:"replicas,omitempty" doc:"Data-parallel engine replicas behind one port and one front end, as vllm serve --data-parallel-size. Default: the preset's (1; 8 for qwen3-0.6b-8xh200)." minimum:"1" maximum:"1024"`
	PhysicsOnly    bool        `yaml:"physics_only" json:"physics_only,omitempty" doc:"Drop the fixed overheads, the front end and jitter, so that step times are exactly the roofline and single-stream decode equals the bandwidth-math prediction."`
	TTFT           Duration    `yaml:"ttft" json:"ttft,omitempty" doc:"Preset fixed only: time to first token." default:"20ms"`
	ITL            Duration    `yaml:"itl" json:"itl,omitempty" doc:"Preset fixed only: gap between tokens." default:"5ms"`
	Seed           int64       `yaml:"seed" json:"seed,omitempty" doc:"Seed of the generated text, the EOS draws, the faults and the step jitter."`
	Engine         SimEngine   `yaml:"engine" json:"engine,omitempty" doc:"Overrides of the preset's engine parameters."`
	FrontEnd       SimFrontEnd `yaml:"front_end" json:"front_end,omitempty" doc:"Overrides of the preset's host overhead (the API server)."`
	Personality    string      `yaml:"personality" json:"personality,omitempty" doc:"Whose wire format to mimic: vllm, llama.cpp (closes the connection after each stream, adds timings) or tgi (its chunks and errors; the model field ignored)." enum:"vllm,llama.cpp,tgi" default:"vllm"`
	TokensPerEvent int         `yaml:"tokens_per_event" json:"tokens_per_event,omitempty" doc:"Tokens carried by each streamed event, as a server that sends several tokens a step (speculative decoding) does. Default 1, as vLLM, llama.cpp and TGI send." minimum:"1" maximum:"1000"`
	EOSMeanTokens  int         `yaml:"eos_mean_tokens" json:"eos_mean_tokens,omitempty" doc:"Mean natural output length: a request without ignore_eos stops early at a seeded EOS drawn with this mean. 0 disables EOS." minimum:"0"`
	Faults         []SimFault  `yaml:"faults" json:"faults,omitempty" doc:"Faults injected into requests at random (seeded); a request can also ask for one with the X-Sim-Fault header."`
	GroundTruth    bool        `yaml:"ground_truth" json:"ground_truth,omitempty" doc:"Write sim-ground-truth.jsonl into the run directory: the server's own arrival and flush time of every token, to compute the client's measurement error."`

	// PresetFile names a fitted preset (schema/preset.go); Calibration is
	// what its calibration block says, filled at load time for the record.
	PresetFile  string       `yaml:"preset_file" json:"preset_file,omitempty" doc:"A preset file, relative to the experiment: a base preset plus engine and front_end overrides, as infermatrix calibrate writes it (docs/calibrate.md). The experiment's own engine and front_end keys override the file's."`
	Calibration *Calibration `yaml:"-" json:"calibration,omitempty"`
}

// SimEngine overrides a preset's engine parameters. Unset keys keep the
// preset's values; docs/simulator.md lists them.
type SimEngine struct {
	MaxNumSeqs           int       `yaml:"max_num_seqs" json:"max_num_seqs,omitempty" doc:"Most sequences in one step, as vLLM's --max-num-seqs." minimum:"1"`
	MaxNumBatchedTokens  int       `yaml:"max_num_batched_tokens" json:"max_num_batched_tokens,omitempty" doc:"Most tokens computed in one step, prefill chunks and decodes together, as vLLM's --max-num-batched-tokens." minimum:"1"`
	GPUMemoryUtilization float64   `yaml:"gpu_memory_utilization" json:"gpu_memory_utilization,omitempty" doc:"Fraction of GPU memory for weights, reserve and KV cache, as vLLM's --gpu-memory-utilization." exclusiveMinimum:"0" maximum:"1"`
	PrefixCaching        *bool     `yaml:"prefix_caching" json:"prefix_caching,omitempty" doc:"Automatic prefix caching (whole 16-token blocks)."`
	StepOverhead         *Duration `yaml:"step_overhead" json:"step_overhead,omitempty" doc:"Fixed cost of every engine step (t0)."`
	SeqOverhead          *Duration `yaml:"seq_overhead" json:"seq_overhead,omitempty" doc:"Cost per scheduled sequence per step (t_seq)."`
	BandwidthEfficiency  float64   `yaml:"bandwidth_efficiency" json:"bandwidth_efficiency,omitempty" doc:"Fraction of peak memory bandwidth a step achieves (η_bw)." exclusiveMinimum:"0" maximum:"1"`
	FLOPsEfficiency      float64   `yaml:"flops_efficiency" json:"flops_efficiency,omitempty" doc:"Fraction of peak FLOP/s a step achieves (η_f)." exclusiveMinimum:"0" maximum:"1"`
	AttentionEfficiency  float64   `yaml:"attention_efficiency" json:"attention_efficiency,omitempty" doc:"Fraction of peak FLOP/s attention achieves (η_attn); unset, η_f." exclusiveMinimum:"0" maximum:"1"`
	Jitter               *float64  `yaml:"jitter" json:"jitter,omitempty" doc:"σ of the mean-one log-normal noise on every step time; 0 for none." minimum:"0" maximum:"2"`
	Drift                *float64  `yaml:"drift" json:"drift,omitempty" doc:"σ of a replica's mean-one log-normal speed phase, redrawn every drift_period on average; 0 for none." minimum:"0" maximum:"2"`
	DriftPeriod          *Duration `yaml:"drift_period" json:"drift_period,omitempty" doc:"Mean time a replica's drift phase holds (default 1s)."`
}

// SimFrontEnd overrides a preset's host overhead.
type SimFrontEnd struct {
	RequestLatency          *Duration `yaml:"request_latency" json:"request_latency,omitempty" doc:"Time before a request reaches the engine that does not occupy the front end."`
	RequestLatencyPerStream *Duration `yaml:"request_latency_per_stream" json:"request_latency_per_stream,omitempty" doc:"Added to request_latency for every open stream."`
	RequestCost             *Duration `yaml:"request_cost" json:"request_cost,omitempty" doc:"Front-end time per request (parsing, chat template), on the queue it shares with output tokens."`
	RequestCostPerToken     *Duration `yaml:"request_cost_per_token" json:"request_cost_per_token,omitempty" doc:"Front-end time per prompt token (tokenization), on the same queue."`
	LatencySpread           *float64  `yaml:"latency_spread" json:"latency_spread,omitempty" doc:"σ of a per-request mean-one log-normal factor on the request path; 0 for none." minimum:"0" maximum:"2"`
	TokenCost               *Duration `yaml:"token_cost" json:"token_cost,omitempty" doc:"Host time per output token, served one at a time across replicas."`
	TokenCostPerStream      *Duration `yaml:"token_cost_per_stream" json:"token_cost_per_stream,omitempty" doc:"Added to token_cost for every open stream."`
}

// SimFault injects one kind of failure into a fraction of requests.
type SimFault struct {
	Kind        string   `yaml:"kind" json:"kind,omitempty" doc:"429, 500 or 503 (an HTTP error with an OpenAI error body), error_event (an error event mid-stream), truncate (the stream ends without [DONE]), reset (a TCP reset), stall (the stream pauses), slow_headers (headers are delayed)." enum:"429,500,503,error_event,truncate,reset,stall,slow_headers" required:"true"`
	Probability float64  `yaml:"probability" json:"probability,omitempty" doc:"Fraction of requests that get this fault; the faults' probabilities must sum to at most 1." exclusiveMinimum:"0" maximum:"1" required:"true"`
	After       int      `yaml:"after" json:"after,omitempty" doc:"For error_event, truncate, reset and stall: tokens sent before the fault." minimum:"0"`
	For         Duration `yaml:"for" json:"for,omitempty" doc:"For stall and slow_headers: how long. A stall without it lasts until the client gives up."`
	RetryAfter  Duration `yaml:"retry_after" json:"retry_after,omitempty" doc:"For 429: the Retry-After the server sends (whole seconds)." default:"1s"`
}

// Predict describes the deployment a bandwidth-math prediction is made for
// (docs/predictions.md): a catalogued model on a catalogued GPU, the
// efficiencies the engine reaches, the precision it serves at, and how many
// data-parallel replicas share the load. Any catalogued figure can be
// overridden, so an unlisted model or GPU is described from its nearest
// preset. The enums list roofline's catalog; a test keeps them in step.
type Predict struct {
	Model                string         `yaml:"model" json:"model,omitempty" doc:"Model preset from the roofline catalog (docs/predictions.md), e.g. llama-3.1-8b." enum:"llama-3.1-8b,llama-3.1-70b,qwen3-0.6b,qwen3-8b,qwen3-32b,mistral-7b" required:"true"`
	GPU                  string         `yaml:"gpu" json:"gpu,omitempty" doc:"GPU preset from the roofline catalog (docs/predictions.md), e.g. h100-sxm." enum:"h100-sxm,h100-pcie,h200,b200,a100-40gb,a100-80gb,l40s,l4,a10g,mi300x" required:"true"`
	BandwidthEfficiency  float64        `yaml:"bandwidth_efficiency" json:"bandwidth_efficiency,omitempty" doc:"Fraction of peak memory bandwidth decode achieves (η_bw), (0, 1]." default:"0.7" exclusiveMinimum:"0" maximum:"1"`
	FLOPsEfficiency      float64        `yaml:"flops_efficiency" json:"flops_efficiency,omitempty" doc:"Fraction of peak tensor FLOP/s prefill achieves (η_f), (0, 1]." default:"0.5" exclusiveMinimum:"0" maximum:"1"`
	Precision            string         `yaml:"precision" json:"precision,omitempty" doc:"Weight precision: bf16 or fp16 (2 bytes per parameter) or fp8 (1 byte, and the GPU's FP8 tensor peak for prefill where it has one)." enum:"bf16,fp16,fp8" default:"bf16"`
	KVPrecision          string         `yaml:"kv_precision" json:"kv_precision,omitempty" doc:"KV-cache precision, as vLLM's --kv-cache-dtype: bf16 or fp16 (2 bytes per element) or fp8 (1 byte). Independent of precision: an FP8 checkpoint keeps a 16-bit KV cache unless told otherwise." enum:"bf16,fp16,fp8" default:"bf16"`
	Replicas             int            `yaml:"replicas" json:"replicas,omitempty" doc:"Data-parallel replicas, one GPU each with a whole copy of the model; the deployment's KV capacity and concurrency scale with them." default:"1" minimum:"1" maximum:"1024"`
	GPUMemoryUtilization float64        `yaml:"gpu_memory_utilization" json:"gpu_memory_utilization,omitempty" doc:"Fraction of GPU memory for weights, reserve and KV cache, as vLLM's --gpu-memory-utilization." default:"0.9" exclusiveMinimum:"0" maximum:"1"`
	ReserveGB            *float64       `yaml:"reserve_gb" json:"reserve_gb,omitempty" doc:"Memory per GPU that is neither weights nor KV cache (activations, CUDA graphs, allocator slack), in GB (10^9 bytes)." default:"3" minimum:"0"`
	GPUOverrides         GPUOverrides   `yaml:"gpu_overrides" json:"gpu_overrides,omitempty" doc:"Replace figures of the GPU preset, e.g. {bandwidth_tbs: 3.0} for a power-capped card."`
	ModelOverrides       ModelOverrides `yaml:"model_overrides" json:"model_overrides,omitempty" doc:"Replace figures of the model preset, e.g. to describe a fine-tune or an unlisted model of the same family."`
}

// GPUOverrides replace a GPU preset's datasheet figures. Unset keys keep the
// preset's; units are the datasheets' (GB = 10^9 bytes, TB/s = 10^12 bytes
// per second, TFLOP/s = 10^12 FLOP/s, dense).
type GPUOverrides struct {
	MemoryGB     float64  `yaml:"memory_gb" json:"memory_gb,omitempty" doc:"Device memory in GB (10^9 bytes)." exclusiveMinimum:"0"`
	BandwidthTBs float64  `yaml:"bandwidth_tbs" json:"bandwidth_tbs,omitempty" doc:"Peak memory bandwidth in TB/s (10^12 bytes per second)." exclusiveMinimum:"0"`
	BF16TFLOPs   float64  `yaml:"bf16_tflops" json:"bf16_tflops,omitempty" doc:"Dense BF16 tensor peak in TFLOP/s (no 2:4 sparsity)." exclusiveMinimum:"0"`
	FP8TFLOPs    *float64 `yaml:"fp8_tflops" json:"fp8_tflops,omitempty" doc:"Dense FP8 tensor peak in TFLOP/s; 0 for a GPU without FP8 tensor cores (fp8 prefill then uses the BF16 peak)." minimum:"0"`
}

// ModelOverrides replace a model preset's architecture, as its config.json
// gives it. Unset keys keep the preset's.
type ModelOverrides struct {
	ParamsB        float64 `yaml:"params_b" json:"params_b,omitempty" doc:"Parameter count in billions, embeddings counted once." exclusiveMinimum:"0"`
	Layers         int     `yaml:"layers" json:"layers,omitempty" doc:"Decoder layers (num_hidden_layers)." minimum:"1"`
	Hidden         int     `yaml:"hidden" json:"hidden,omitempty" doc:"Residual width (hidden_size). No formula uses it." minimum:"1"`
	Heads          int     `yaml:"heads" json:"heads,omitempty" doc:"Query heads (num_attention_heads)." minimum:"1"`
	KVHeads        int     `yaml:"kv_heads" json:"kv_heads,omitempty" doc:"Key-value heads (num_key_value_heads); heads must be a multiple of it." minimum:"1"`
	HeadDim        int     `yaml:"head_dim" json:"head_dim,omitempty" doc:"Dimension of one attention head (head_dim)." minimum:"1"`
	Vocab          int     `yaml:"vocab" json:"vocab,omitempty" doc:"Vocabulary size (vocab_size). No formula uses it." minimum:"1"`
	MaxPosition    int     `yaml:"max_position" json:"max_position,omitempty" doc:"Longest trained context (max_position_embeddings). No formula uses it." minimum:"1"`
	TiedEmbeddings *bool   `yaml:"tied_embeddings" json:"tied_embeddings,omitempty" doc:"Whether the output projection shares the embedding matrix (tie_word_embeddings). No formula uses it: params_b already counts a shared matrix once."`
}

// SLO holds per-request objectives in milliseconds. Zero means not set.
type SLO struct {
	TTFTms float64 `yaml:"ttft_ms" json:"ttft_ms,omitempty" doc:"Time to first token must be at most this many ms." exclusiveMinimum:"0"`
	TPOTms float64 `yaml:"tpot_ms" json:"tpot_ms,omitempty" doc:"Time per output token must be at most this many ms." exclusiveMinimum:"0"`
	ITLms  float64 `yaml:"itl_ms" json:"itl_ms,omitempty" doc:"The request's largest gap between tokens must be at most this many ms." exclusiveMinimum:"0"`
	E2Ems  float64 `yaml:"e2e_ms" json:"e2e_ms,omitempty" doc:"End-to-end latency must be at most this many ms." exclusiveMinimum:"0"`
}

// Row is one workload configuration. A row with a sweep expands into one
// concrete row per combination of sweep values.
type Row struct {
	ID       string `yaml:"id" json:"id,omitempty" doc:"Unique row id. Letters, digits, '.', '_' and '-'." required:"true"`
	Question string `yaml:"question" json:"question,omitempty" doc:"What this row answers, in words. Shown in the decision record."`
	Sweep    *Sweep `yaml:"sweep" json:"sweep,omitempty" doc:"Values to sweep; the row expands into one row per combination, with ids such as saturation/c=16."`
	// Search finds a limit rather than measuring given loads (schema/search.go).
	Search   *Search `yaml:"search" json:"search,omitempty" doc:"Find the highest load at which the row passes its acceptance rules and is valid: probe rows (ids such as saturation/c=24) run one after another, doubling from min, then bisecting (docs/search.md). Give concurrency or rate."`
	Settings `yaml:",inline"`
}

// Settings are the keys a row can set and the defaults section can supply.
//
// Keys fall into groups that only make sense together: how a row stops
// (requests, duration), how load is offered (concurrency, rate, trace), and
// where prompts come from (input_tokens, dataset, trace). A row that sets any
// key of a group replaces the whole group from defaults, so a row saying
// "duration: 60s" is not silently also capped by the defaults' request count.
// Maps (body, headers) merge key by key; a null (or, for headers, empty)
// value removes a key set in defaults.
type Settings struct {
	Requests       *int      `yaml:"requests" json:"requests,omitempty" doc:"Stop after this many measured requests (warmup not included)." minimum:"1" maximum:"1000000000" group:"stop"`
	Duration       *Duration `yaml:"duration" json:"duration,omitempty" doc:"Stop dispatching after this long (measured window, warmup not included)." group:"stop"`
	Warmup         *int      `yaml:"warmup" json:"warmup,omitempty" doc:"Requests sent first, under the same load, and left out of every statistic." minimum:"0" maximum:"1000000000" default:"0"`
	WarmupDuration *Duration `yaml:"warmup_duration" json:"warmup_duration,omitempty" doc:"Alternatively, everything dispatched in this first stretch is warmup."`
	Grace          *Duration `yaml:"grace" json:"grace,omitempty" doc:"When a row stops on duration or is interrupted, how long requests still in flight may finish before they are cancelled. A row that stops on requests waits for every request (each bounded by timeout)." default:"30s"`
	Timeout        *Duration `yaml:"timeout" json:"timeout,omitempty" doc:"Per-request time limit; a request over it is recorded as a timeout error." default:"5m"`
	Repeat         *int      `yaml:"repeat" json:"repeat,omitempty" doc:"Run the row this many times (trials), each with its own warmup, records and prompts; the summary pools them and gives each headline figure's confidence interval over the trials (report.confidence, 0.95 by default; upper.ttft.p95 and lower.ttft.p95 in rules). Trials run in interleaved rounds: round k runs trial k of every repeated row, in file order." minimum:"1" maximum:"100" default:"1"`

	Concurrency *int   `yaml:"concurrency" json:"concurrency,omitempty" doc:"Closed loop: this many simulated users, each sending its next request when the previous one ends." minimum:"1" maximum:"100000" group:"load"`
	Rate        *Rate  `yaml:"rate" json:"rate,omitempty" doc:"Open loop: requests arrive at this rate whether or not earlier ones finished." group:"load"`
	Trace       *Trace `yaml:"trace" json:"trace,omitempty" doc:"Replay a trace file: its timestamps set when each request is sent, and its lengths what is sent." group:"load,source"`
	// Ramp and PrefillConcurrency: schema/ramp.go.
	Ramp               *Ramp `yaml:"ramp" json:"ramp,omitempty" doc:"Raise the load in steps within the row, without draining between them: {concurrency: {from, to, step}, step_duration} or {rate: {from, to, step}, step_duration}; every step is summarised and judged like a sweep point. The row stops after its last step." group:"load,stop"`
	PrefillConcurrency *int  `yaml:"prefill_concurrency" json:"prefill_concurrency,omitempty" doc:"At most this many requests waiting for their first token at once (AIPerf's --prefill-concurrency): a request is sent only when fewer are in prefill; the wait is recorded as queue time." minimum:"1" maximum:"100000"`

	InputTokens  *Length  `yaml:"input_tokens" json:"input_tokens,omitempty" doc:"Prompt length in tokens: a number, or {mean, stddev, min, max} or {values}." group:"source"`
	OutputTokens *Length  `yaml:"output_tokens" json:"output_tokens,omitempty" doc:"Output length in tokens, sent as max_tokens: a number, or {mean, stddev, min, max} or {values}."`
	Prefix       *Prefix  `yaml:"prefix" json:"prefix,omitempty" doc:"A shared prompt prefix, to exercise prefix caching."`
	Dataset      *Dataset `yaml:"dataset" json:"dataset,omitempty" doc:"Take prompts from a file instead of synthesizing them." group:"source"`
	// Conversation turns each user's requests into one chat whose later
	// turns carry the earlier ones (schema/conversation.go).
	Conversation *Conversation `yaml:"conversation" json:"conversation,omitempty" doc:"Each user holds a multi-turn chat: turn k's prompt is the conversation so far (the first prompt, earlier user messages and the server's actual replies) and a new user message. Chat API only; with rate, per_second counts conversations."`

	// API, Batch and QueryTokens let one experiment measure a chat row
	// and an embeddings or rerank row against the same server.
	API         *string `yaml:"api" json:"api,omitempty" doc:"The endpoint this row calls, instead of server.api: chat, completions, embeddings or rerank." enum:"chat,completions,embeddings,rerank"`
	Batch       *int    `yaml:"batch" json:"batch,omitempty" doc:"embeddings and rerank: inputs per request (documents per rerank query), each input_tokens long." minimum:"1" maximum:"10000" default:"1"`
	QueryTokens *Length `yaml:"query_tokens" json:"query_tokens,omitempty" doc:"rerank: the query's length in tokens, scored against every document: a number, or {mean, stddev, min, max} or {values}."`

	Streaming *bool             `yaml:"streaming" json:"streaming,omitempty" doc:"Stream the response (needed for TTFT, ITL and TPOT)." default:"true"`
	Tokenizer *string           `yaml:"tokenizer" json:"tokenizer,omitempty" doc:"Tokenizer used to build prompts and count tokens: builtin (o200k), or the path of a Hugging Face tokenizer.json or of its directory." default:"builtin"`
	Body      map[string]any    `yaml:"body" json:"body,omitempty" doc:"Extra JSON fields merged into every request body, e.g. {ignore_eos: true, temperature: 0}."`
	Headers   map[string]string `yaml:"headers" json:"headers,omitempty" doc:"Extra HTTP headers merged into every request."`
	Cancel    *Cancel           `yaml:"cancel" json:"cancel,omitempty" doc:"Cancel a fraction of requests after a delay, as impatient users do."`
	Seed      *int64            `yaml:"seed" json:"seed,omitempty" doc:"Seed of lengths, arrival times and cancellations, which repeat exactly from run to run. Prompt text is drawn afresh each run (see unique_prompts), so no server cache can hold it from an earlier run." default:"1"`
	// UniquePrompts keeps rows from measuring each other's cache.
	UniquePrompts *string `yaml:"unique_prompts" json:"unique_prompts,omitempty" doc:"How prompts are kept apart: per_run starts every prompt with a tag unique to the request, the row and the run, so no prompt shares a cacheable prefix with another except what the row shares on purpose (prefix, a trace's hash ids); per_experiment makes the tag unique within the run but the same on every run of the file (byte-identical prompts across runs: a server that served an earlier run may still hold them in its prefix cache, which the cache check then reports); off sends dataset text exactly as written and synthetic text without a tag, and counts every cache hit as intended." enum:"per_run,per_experiment,off" default:"per_run"`
}

// Length is a token-length distribution. Written as a bare number it is a
// fixed length.
type Length struct {
	Mean   int     `yaml:"mean" json:"mean,omitempty" doc:"Mean length in tokens." minimum:"1" maximum:"10000000"`
	Stddev float64 `yaml:"stddev" json:"stddev,omitempty" doc:"Standard deviation; lengths follow a normal distribution clipped to [min, max]." minimum:"0"`
	Min    int     `yaml:"min" json:"min,omitempty" doc:"Smallest length drawn." minimum:"1"`
	Max    int     `yaml:"max" json:"max,omitempty" doc:"Largest length drawn." minimum:"1"`
	Values []int   `yaml:"values" json:"values,omitempty" doc:"An explicit list of lengths, drawn uniformly at random (seeded)." minimum:"1"`
}

// Rate is an open-loop arrival process.
type Rate struct {
	PerSecond      float64 `yaml:"per_second" json:"per_second,omitempty" doc:"Mean arrivals per second. Required unless the row sweeps rate." minimum:"0.0001" maximum:"1000000"`
	Arrival        string  `yaml:"arrival" json:"arrival,omitempty" doc:"Inter-arrival distribution: constant, poisson, or gamma (with burstiness)." enum:"constant,poisson,gamma" default:"poisson"`
	Burstiness     float64 `yaml:"burstiness" json:"burstiness,omitempty" doc:"Gamma shape: 1 is Poisson, below 1 burstier, above 1 smoother. Only with arrival: gamma." exclusiveMinimum:"0"`
	MaxConcurrency int     `yaml:"max_concurrency" json:"max_concurrency,omitempty" doc:"Cap on requests in flight; arrivals beyond it wait, and the wait is reported as queue time." minimum:"1" maximum:"100000"`
}

// Trace replays a recorded request log.
type Trace struct {
	File           string  `yaml:"file" json:"file,omitempty" doc:"Path of the trace, relative to the experiment file." required:"true"`
	Format         string  `yaml:"format" json:"format,omitempty" doc:"mooncake: JSONL with timestamp (ms), input_length, output_length, hash_ids." enum:"mooncake" default:"mooncake"`
	Speedup        float64 `yaml:"speedup" json:"speedup,omitempty" doc:"Replay this many times faster than recorded." exclusiveMinimum:"0" default:"1"`
	BlockSize      int     `yaml:"block_size" json:"block_size,omitempty" doc:"Tokens per hash id; equal hash ids become byte-identical prompt blocks." minimum:"1" default:"512"`
	MaxConcurrency int     `yaml:"max_concurrency" json:"max_concurrency,omitempty" doc:"Cap on requests in flight; late requests queue and the wait is reported." minimum:"1"`
}

// Dataset is a file of prompts.
type Dataset struct {
	File    string `yaml:"file" json:"file,omitempty" doc:"Path of the file, relative to the experiment file." required:"true"`
	Format  string `yaml:"format" json:"format,omitempty" doc:"jsonl: one {prompt} or {messages} per line; sharegpt: ShareGPT JSON; mooncake: a Mooncake trace's prompts (input_length and hash_ids), without its timestamps." enum:"jsonl,sharegpt,mooncake" required:"true"`
	Shuffle bool   `yaml:"shuffle" json:"shuffle,omitempty" doc:"Draw prompts in a seeded random order instead of file order."`
}

// Prefix describes a shared prompt prefix.
type Prefix struct {
	Length   int  `yaml:"length" json:"length,omitempty" doc:"Tokens of shared prefix at the start of each prompt (counted within input_tokens)." minimum:"1" required:"true"`
	Distinct int  `yaml:"distinct" json:"distinct,omitempty" doc:"How many different prefixes the row's requests take in turn (request i the (i mod distinct)-th); with at least as many as the row sends, every request's prefix is its own." minimum:"1" maximum:"100000" default:"1"`
	Warm     bool `yaml:"warm" json:"warm,omitempty" doc:"Send each prefix once before measuring, so the server's prefix cache holds it."`
}

// Cancel makes some requests end early, from the client side.
type Cancel struct {
	Fraction float64  `yaml:"fraction" json:"fraction,omitempty" doc:"Fraction of requests to cancel, (0, 1]." exclusiveMinimum:"0" maximum:"1" required:"true"`
	After    Duration `yaml:"after" json:"after,omitempty" doc:"How long after sending to cancel." required:"true"`
}

// Sweep lists values to sweep. Several keys make a grid: every combination
// becomes a row.
type Sweep struct {
	Concurrency  []int     `yaml:"concurrency" json:"concurrency,omitempty" doc:"Closed-loop concurrencies; each value becomes a row id suffix c=N." minimum:"1" maximum:"100000"`
	Rate         []float64 `yaml:"rate" json:"rate,omitempty" doc:"Arrival rates per second (the row's rate settings apply); suffix r=N." minimum:"0.0001" maximum:"1000000"`
	InputTokens  []int     `yaml:"input_tokens" json:"input_tokens,omitempty" doc:"Mean input lengths; suffix in=N." minimum:"1" maximum:"10000000"`
	OutputTokens []int     `yaml:"output_tokens" json:"output_tokens,omitempty" doc:"Mean output lengths; suffix out=N." minimum:"1" maximum:"10000000"`
	Batch        []int     `yaml:"batch" json:"batch,omitempty" doc:"Embeddings and rerank rows: inputs per request; suffix batch=N." minimum:"1" maximum:"10000"`
}

// Acceptance is a pass/fail rule for rows.
type Acceptance struct {
	Name   string   `yaml:"name" json:"name,omitempty" doc:"Name of the rule, shown with each verdict." required:"true"`
	Rows   []string `yaml:"rows" json:"rows,omitempty" doc:"Row ids the rule applies to (a swept row's id covers all its expansions). Default: every row."`
	Expect string   `yaml:"expect" json:"expect,omitempty" doc:"Expression that must be true, e.g. ttft.p95 < 1000 && tpot.p95 < 40." required:"true"`
	Sweep  string   `yaml:"sweep" json:"sweep,omitempty" doc:"How the rule judges a swept row: each_point fails the run if any point fails; operating_point asks only that the sweep yields an operating point, the highest-throughput valid point that passes, and shows the points that fail as rejected (beyond capacity) without failing the run." enum:"each_point,operating_point" default:"each_point"`
}

// Report controls the decision record and exports.
type Report struct {
	Percentiles []float64 `yaml:"percentiles" json:"percentiles,omitempty" doc:"Percentiles to report for every metric, each in (0, 100); p50, p90, p95 and p99 are always reported." default:"[50, 90, 95, 99]"`
	Formats     []string  `yaml:"formats" json:"formats,omitempty" doc:"Files to write besides the run records: markdown (decision.md), json (summary.json), csv (summary.csv), html (report.html), xlsx (results.xlsx), aiperf (profile_export.jsonl, AIPerf's per-request shape)." default:"[markdown, json, csv, html, xlsx]"`
	Semantics   string    `yaml:"semantics" json:"semantics,omitempty" doc:"Whose metric definitions the summaries follow: infermatrix (docs/metrics.md), vllm (vllm bench serve) or aiperf (NVIDIA AIPerf), to compare numbers with those tools side by side." enum:"infermatrix,vllm,aiperf" default:"infermatrix"`
	Timeslice   *Duration `yaml:"timeslice" json:"timeslice,omitempty" doc:"Width of the timeslices in each row's summary: completions, output tokens/s, TTFT and errors over the measured window, slice by slice." default:"1s"`
	Confidence  *float64  `yaml:"confidence" json:"confidence,omitempty" doc:"Level of the confidence intervals a repeated row (repeat) gives for its headline figures over its trials." default:"0.95" minimum:"0.5" maximum:"0.999"`
}

// Duration is a time.Duration written as a Go duration string ("500ms",
// "1m30s"). A bare number is rejected: "30" could mean seconds or
// milliseconds, and a wrong guess corrupts a benchmark silently.
type Duration time.Duration

// D returns the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration as a string such as "1m30s", as in YAML.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Duration(d).String() + `"`), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return fmt.Errorf("duration: want a string such as \"30s\", got %s", s)
	}
	x, err := time.ParseDuration(s[1 : len(s)-1])
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(x)
	return nil
}
