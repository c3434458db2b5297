package metrics

// What the server and its GPUs said about a row, read from their Prometheus
// endpoints while the row ran (package telemetry scrapes, maps and reduces
// them; this file only holds the shapes the summary keeps). The client's
// figures say what users felt; these say why: a queue that grew, a KV cache
// that filled, a GPU that sat idle.
//
// Every figure is over the row's measured window unless its comment says
// otherwise. A figure the server did not publish is absent (a nil pointer,
// omitted from JSON): rules that read it are then judged as on missing data,
// never as on a zero.

// ServerTelemetry is the inference server's own account of a row, from its
// engine metrics (vllm:*, sglang:*, tgi_*, llamacpp:*, trtllm_*), mapped
// into one vocabulary.
type ServerTelemetry struct {
	// Sources are the endpoints scraped, credentials masked.
	Sources []string `json:"sources,omitempty"`
	// Mapping names the engine vocabulary the metrics were read with
	// ("vllm", "sglang", "tgi", "llama.cpp", "trtllm", "infermatrix-sim"
	// speaks vllm), as recognised from the exposition itself.
	Mapping string `json:"mapping,omitempty"`
	// Scrapes counts the successful scrapes inside the measured window;
	// Failed the scrapes of the whole row that failed.
	Scrapes int `json:"scrapes"`
	Failed  int `json:"failed,omitempty"`
	// IntervalS is the scrape interval asked for.
	IntervalS float64 `json:"interval_s,omitempty"`

	// Gauges, over the scrapes inside the window.
	KVCacheUsage       *Gauge `json:"kv_cache_usage,omitempty"` // fraction of KV blocks in use, 0..1
	NumRequestsRunning *Gauge `json:"num_requests_running,omitempty"`
	NumRequestsWaiting *Gauge `json:"num_requests_waiting,omitempty"`

	// Counters, as increases over the window.
	PrefixCacheQueries *float64 `json:"prefix_cache_queries,omitempty"` // prompt tokens looked up
	PrefixCacheHits    *float64 `json:"prefix_cache_hits,omitempty"`    // of which found cached
	// PrefixCacheHitRate is hits ÷ queries over the window; absent when
	// nothing was queried.
	PrefixCacheHitRate *float64 `json:"prefix_cache_hit_rate,omitempty"`
	Preemptions        *float64 `json:"preemptions,omitempty"`
	PromptTokens       *float64 `json:"prompt_tokens,omitempty"`
	GenerationTokens   *float64 `json:"generation_tokens,omitempty"`

	// The engine's own request-latency histograms over the window, in
	// milliseconds, quantiles interpolated within buckets as Prometheus'
	// histogram_quantile does.
	TTFT      *ServerDist `json:"ttft_ms,omitempty"`
	TPOT      *ServerDist `json:"tpot_ms,omitempty"`
	ITL       *ServerDist `json:"itl_ms,omitempty"`
	E2E       *ServerDist `json:"e2e_ms,omitempty"`
	QueueTime *ServerDist `json:"queue_time_ms,omitempty"`
	// TTFTGap and TPOTGap are the client's figure minus the server's:
	// what the network, the HTTP stack and the client add.
	TTFTGap *Gap `json:"ttft_gap_ms,omitempty"`
	TPOTGap *Gap `json:"tpot_gap_ms,omitempty"`

	// Tokens checks the server's prompt and generation token counters
	// against the records' token totals over the whole row (warmup
	// included): a mismatch catches requests counted twice or lost.
	Tokens *CounterCheck `json:"tokens,omitempty"`

	// Notes say what could not be read and why: an endpoint that failed,
	// a metric the engine does not publish, a counter that reset.
	Notes []string `json:"notes,omitempty"`
}

// GPUTelemetry is the GPUs' account of a row, from NVIDIA DCGM exporter
// endpoints (DCGM_FI_* metrics), each GPU told apart by its labels.
type GPUTelemetry struct {
	Sources []string `json:"sources,omitempty"`
	// GPUs is how many distinct GPUs reported.
	GPUs    int `json:"gpus"`
	Scrapes int `json:"scrapes"`
	Failed  int `json:"failed,omitempty"`

	// GPUGauges are over all GPUs: utilization and memory the mean over
	// GPUs and scrapes (the max the busiest, the fullest GPU), power the
	// draw of all GPUs together at each scrape.
	GPUGauges
	// EnergyJ is the energy the GPUs used over the window, from the
	// DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter where published.
	EnergyJ *float64 `json:"energy_j,omitempty"`

	// PerGPU holds each GPU's figures, in the order of their ids.
	PerGPU []GPUDevice `json:"per_gpu,omitempty"`
	Notes  []string    `json:"notes,omitempty"`
}

// GPUDevice is one GPU's figures over the window.
type GPUDevice struct {
	ID    string `json:"id"` // DCGM's gpu label
	UUID  string `json:"uuid,omitempty"`
	Model string `json:"model,omitempty"`
	// Source is the endpoint that reported it.
	Source string `json:"source,omitempty"`
	GPUGauges
}

// GPUGauges are the DCGM gauges a row keeps, for one GPU or all of them
// (GPUTelemetry says how they are combined). Embedded, they are written
// as the fields of the struct that holds them.
type GPUGauges struct {
	// Utilization is the fraction of time a kernel ran
	// (DCGM_FI_DEV_GPU_UTIL ÷ 100).
	Utilization *Gauge `json:"utilization,omitempty"`
	// MemCopyUtilization is the fraction of time device memory was read
	// or written (DCGM_FI_DEV_MEM_COPY_UTIL ÷ 100).
	MemCopyUtilization *Gauge `json:"mem_copy_utilization,omitempty"`
	// PowerW is the draw in watts.
	PowerW *Gauge `json:"power_w,omitempty"`
	// MemoryUsedGB is framebuffer memory in use, in GB (10⁹ bytes).
	MemoryUsedGB *Gauge `json:"memory_used_gb,omitempty"`
	SMClockMHz   *Gauge `json:"sm_clock_mhz,omitempty"`
	TemperatureC *Gauge `json:"temperature_c,omitempty"`
}

// Gauge summarises a gauge's scrapes: each scrape weighs alike.
type Gauge struct {
	Mean float64 `json:"mean" expr:"mean"`
	Min  float64 `json:"min" expr:"min"`
	Max  float64 `json:"max" expr:"max"`
	// Samples is how many scrapes (times GPUs, for a per-GPU gauge
	// pooled over GPUs) the figures are over.
	Samples int `json:"samples"`
}

// ServerDist is a server-side latency distribution read from a histogram's
// increase over the window.
type ServerDist struct {
	Count float64 `json:"count"`
	Mean  float64 `json:"mean"` // _sum ÷ _count
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	// Buckets are the increases of the cumulative buckets over the window
	// (upper bound in ms, count; +Inf left out), kept so that trials can
	// be pooled and a report can redraw the histogram.
	Buckets []Bucket `json:"buckets,omitempty"`
}

// Bucket is one cumulative histogram bucket: the count of observations at
// most LeMS. The +Inf bucket is not kept (JSON has no +Inf): its count is
// the distribution's Count.
type Bucket struct {
	LeMS  float64 `json:"le_ms"`
	Count float64 `json:"count"`
}

// Gap is a client figure minus the same figure on the server, in ms.
type Gap struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
}

// CounterCheck compares a server's token counters with the records.
type CounterCheck struct {
	Prompt     CounterDiff `json:"prompt"`
	Generation CounterDiff `json:"generation"`
	// Mismatch is set when either differs by more than the tolerance
	// docs/telemetry.md states.
	Mismatch bool     `json:"mismatch,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

// CounterDiff is one counter's increase over the row beside the records'
// total of the same tokens.
type CounterDiff struct {
	Server  float64 `json:"server"`
	Records float64 `json:"records"`
	// Diff is (server − records) ÷ records; 0 when both are 0.
	Diff float64 `json:"diff"`
	// Compared is false when the counter is not published, or when the
	// records cannot give a total (a failed request's prefill tokens are
	// unknown).
	Compared bool `json:"compared"`
}

// TelemetryPoint is one scrape, reduced to what the reports plot over time:
// the row's clock (seconds from its start, as the timeslices count), the
// phase it fell in, and the figures. A figure not reported is NaN in
// memory and absent from JSON.
type TelemetryPoint struct {
	TS    float64 `json:"t_s"`
	Phase string  `json:"phase"`

	Running      *float64 `json:"running,omitempty"`
	Waiting      *float64 `json:"waiting,omitempty"`
	KVCacheUsage *float64 `json:"kv_cache_usage,omitempty"`
	// GPUUtilization is the mean over GPUs (0..1); PowerW their sum.
	GPUUtilization *float64 `json:"gpu_utilization,omitempty"`
	PowerW         *float64 `json:"power_w,omitempty"`
	MemoryUsedGB   *float64 `json:"memory_used_gb,omitempty"`
}

// Telemetry phases: where in the row a scrape fell. The measured window is
// the summary's, known only when the row is over; the phase is what the
// runner knew when it scraped.
const (
	PhasePrime   = "prime"   // warm prefixes being sent, before the load
	PhaseWarmup  = "warmup"  // warmup requests being dispatched
	PhaseLoad    = "load"    // measured requests being dispatched
	PhaseDrain   = "drain"   // dispatching over, requests finishing (grace included)
	PhaseBetween = "between" // before the row's first request or after its last
)
