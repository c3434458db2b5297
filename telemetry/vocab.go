package telemetry

import (
	"slices"
	"strings"
)

// quantity is one entry of the vocabulary every engine is mapped into.
type quantity int

const (
	qRunning quantity = iota
	qWaiting
	qKVUsage
	qPrefixQueries
	qPrefixHits
	qPreemptions
	qPromptTokens
	qGenerationTokens
	qTTFT
	qTPOT
	qITL
	qE2E
	qQueue
	numQuantities
)

// qKind says how a quantity is read and reduced.
type qKind int

const (
	kindCount   qKind = iota // a gauge of requests: summed over series and targets
	kindRatio                // a gauge of a fraction: averaged over series and targets
	kindCounter              // a cumulative count: its increase is what is reported
	kindHist                 // a latency histogram in seconds
)

// quantityInfo names a quantity as the summary's JSON and the docs do.
var quantityInfo = [numQuantities]struct {
	name string
	kind qKind
}{
	qRunning:          {"num_requests_running", kindCount},
	qWaiting:          {"num_requests_waiting", kindCount},
	qKVUsage:          {"kv_cache_usage", kindRatio},
	qPrefixQueries:    {"prefix_cache_queries", kindCounter},
	qPrefixHits:       {"prefix_cache_hits", kindCounter},
	qPreemptions:      {"preemptions", kindCounter},
	qPromptTokens:     {"prompt_tokens", kindCounter},
	qGenerationTokens: {"generation_tokens", kindCounter},
	qTTFT:             {"ttft_ms", kindHist},
	qTPOT:             {"tpot_ms", kindHist},
	qITL:              {"itl_ms", kindHist},
	qE2E:              {"e2e_ms", kindHist},
	qQueue:            {"queue_time_ms", kindHist},
}

// source is where one engine publishes one quantity.
type source struct {
	// family is the metric family's name as the text format exposes it
	// (a counter's name carries its _total suffix).
	family string
	// match selects series by label (Triton's request_type, for one);
	// nil takes every series of the family.
	match map[string]string
	// sum reads a histogram's or summary's _sum as a counter: TGI has no
	// token counters, but the sums of its per-request token histograms
	// grow by each finished request's tokens.
	sum bool
	// plus are counter families added to family's value, every one of
	// them needed for the source to apply: llama.cpp counts the prompt
	// tokens it evaluates and those a slot reused from its cache apart,
	// and only both together are the prompt tokens a request reports.
	plus []string
	// partial, when set, says what the counter leaves out of the
	// quantity: its figure is given, but not checked against the
	// records' token totals.
	partial string
}

// engine is one engine's vocabulary: for each quantity, where the engine
// publishes it, newest name first (an engine that renamed a metric is read
// under either name), and what differs in its meaning.
type engine struct {
	Name string
	// prefixes recognise the engine from its exposition: any family whose
	// name starts with one of them.
	prefixes []string
	// markers recognise an engine whose names have no prefix (NIM): any
	// family named exactly so.
	markers []string
	sources [numQuantities][]source
	// Caveats are where the engine's figures mean something else than the
	// vocabulary's; they are copied into the record's notes.
	Caveats []string
}

func src(family string) source { return source{family: family} }

func srcSel(family, label, value string) source {
	return source{family: family, match: map[string]string{label: value}}
}

func srcSum(family string) source { return source{family: family, sum: true} }

func srcPlus(family string, plus ...string) source { return source{family: family, plus: plus} }

// name is the source as the notes name it: its families joined by " + ".
func (s source) name() string { return strings.Join(append([]string{s.family}, s.plus...), " + ") }

// vllmSources are vLLM's names: docs https://docs.vllm.ai/en/stable/usage/metrics/
// ("Production Metrics") and the source, vllm/v1/metrics/loggers.py
// (https://github.com/vllm-project/vllm/blob/main/vllm/v1/metrics/loggers.py).
// vLLM 0.9 renamed gpu_cache_usage_perc to kv_cache_usage_perc and
// gpu_prefix_cache_{queries,hits} to prefix_cache_{queries,hits}; 0.11
// renamed time_per_output_token_seconds, which was always observed once
// per output token (an inter-token latency), to inter_token_latency_seconds,
// and request_time_per_output_token_seconds is the per-request TPOT.
var vllmSources = [numQuantities][]source{
	qRunning:          {src("vllm:num_requests_running")},
	qWaiting:          {src("vllm:num_requests_waiting")},
	qKVUsage:          {src("vllm:kv_cache_usage_perc"), src("vllm:gpu_cache_usage_perc")},
	qPrefixQueries:    {src("vllm:prefix_cache_queries_total"), src("vllm:gpu_prefix_cache_queries_total")},
	qPrefixHits:       {src("vllm:prefix_cache_hits_total"), src("vllm:gpu_prefix_cache_hits_total")},
	qPreemptions:      {src("vllm:num_preemptions_total")},
	qPromptTokens:     {src("vllm:prompt_tokens_total")},
	qGenerationTokens: {src("vllm:generation_tokens_total")},
	qTTFT:             {src("vllm:time_to_first_token_seconds")},
	qTPOT:             {src("vllm:request_time_per_output_token_seconds")},
	qITL:              {src("vllm:inter_token_latency_seconds"), src("vllm:time_per_output_token_seconds")},
	qE2E:              {src("vllm:e2e_request_latency_seconds")},
	qQueue:            {src("vllm:request_queue_time_seconds")},
}

// mappings are tried in order: the first whose prefix or marker appears in
// an exposition is the one it is read with. The built-in server speaks
// vLLM's names and adds its own infermatrix_sim: families, so it is told
// apart first; NIM's unprefixed names come last, so that an engine that
// also publishes a bare num_requests_running is still read as itself.
var mappings = []*engine{
	{
		Name:     "infermatrix-sim",
		prefixes: []string{"infermatrix_sim:"},
		sources:  vllmSources,
	},
	{
		Name:     "vllm",
		prefixes: []string{"vllm:"},
		sources:  vllmSources,
	},
	// SGLang: docs https://docs.sglang.io/references/production_metrics.html
	// and python/sglang/srt/metrics/collector.py
	// (https://github.com/sgl-project/sglang/blob/main/python/sglang/srt/metrics/collector.py).
	{
		Name:     "sglang",
		prefixes: []string{"sglang:"},
		sources: [numQuantities][]source{
			qRunning: {src("sglang:num_running_reqs")},
			qWaiting: {src("sglang:num_queue_reqs")},
			qKVUsage: {src("sglang:token_usage")},
			// SGLang counts every prompt token of a finished request
			// and, apart, those it found cached: the queries are the
			// prompt tokens.
			qPrefixQueries:    {src("sglang:prompt_tokens_total")},
			qPrefixHits:       {src("sglang:cached_tokens_total")},
			qPreemptions:      {src("sglang:num_retracted_requests_total")},
			qPromptTokens:     {src("sglang:prompt_tokens_total")},
			qGenerationTokens: {src("sglang:generation_tokens_total")},
			qTTFT:             {src("sglang:time_to_first_token_seconds")},
			qITL:              {src("sglang:inter_token_latency_seconds"), src("sglang:time_per_output_token_seconds")},
			qE2E:              {src("sglang:e2e_request_latency_seconds")},
			qQueue:            {src("sglang:queue_time_seconds")},
		},
		Caveats: []string{
			"sglang: kv_cache_usage is sglang:token_usage, the fraction of the KV token pool in use",
			"sglang: preemptions are retracted requests (sglang:num_retracted_requests_total); prompt, cached and generated tokens are counted when a request finishes",
		},
	},
	// TensorRT-LLM's trtllm-serve: tensorrt_llm/metrics/collector.py
	// (https://github.com/NVIDIA/TensorRT-LLM/blob/main/tensorrt_llm/metrics/collector.py),
	// served on /prometheus/metrics. Older releases publish only the
	// request histograms; iteration gauges need enable_iter_perf_stats.
	{
		Name:     "trtllm",
		prefixes: []string{"trtllm_"},
		sources: [numQuantities][]source{
			qRunning:          {src("trtllm_num_requests_running")},
			qWaiting:          {src("trtllm_num_requests_waiting")},
			qKVUsage:          {src("trtllm_kv_cache_utilization")},
			qPrefixQueries:    {src("trtllm_prompt_tokens_total")},
			qPrefixHits:       {src("trtllm_prompt_cached_tokens_total")},
			qPromptTokens:     {src("trtllm_prompt_tokens_total")},
			qGenerationTokens: {src("trtllm_generation_tokens_total")},
			qTTFT:             {src("trtllm_time_to_first_token_seconds")},
			qTPOT:             {src("trtllm_time_per_output_token_seconds")},
			qE2E:              {src("trtllm_e2e_request_latency_seconds")},
			qQueue:            {src("trtllm_request_queue_time_seconds")},
		},
		Caveats: []string{
			"trtllm: running is the batch manager's active requests; iteration gauges (running, waiting, KV) need enable_iter_perf_stats",
		},
	},
	// TensorRT-LLM behind Triton: the tensorrtllm_backend's batch-manager
	// gauges, README "Triton Metrics"
	// (https://github.com/triton-inference-server/tensorrtllm_backend#triton-metrics).
	{
		Name:     "trtllm-triton",
		prefixes: []string{"nv_trt_llm_"},
		sources: [numQuantities][]source{
			qRunning: {srcSel("nv_trt_llm_request_metrics", "request_type", "active")},
			qWaiting: {srcSel("nv_trt_llm_request_metrics", "request_type", "waiting")},
			qKVUsage: {srcSel("nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", "fraction")},
		},
		Caveats: []string{
			"trtllm-triton: Triton's TensorRT-LLM backend publishes batch-manager gauges only: no token counters, no latency histograms",
		},
	},
	// TGI: docs https://huggingface.co/docs/text-generation-inference/reference/metrics
	// (docs/source/reference/metrics.md in huggingface/text-generation-inference).
	{
		Name:     "tgi",
		prefixes: []string{"tgi_"},
		sources: [numQuantities][]source{
			qRunning:          {src("tgi_batch_current_size")},
			qWaiting:          {src("tgi_queue_size")},
			qPromptTokens:     {srcSum("tgi_request_input_length")},
			qGenerationTokens: {srcSum("tgi_request_generated_tokens")},
			qTPOT:             {src("tgi_request_mean_time_per_token_duration")},
			qE2E:              {src("tgi_request_duration")},
			qQueue:            {src("tgi_request_queue_duration")},
		},
		Caveats: []string{
			"tgi: no KV-cache, prefix-cache, preemption or TTFT metric; running is the current batch size",
			"tgi: token counts are the sums of the per-request histograms tgi_request_input_length (recorded at validation) and tgi_request_generated_tokens (at the end)",
		},
	},
	// llama.cpp's llama-server with --metrics: tools/server/README.md,
	// "GET /metrics" (https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md),
	// and server_task_result_metrics::to_metrics in tools/server/server-task.cpp.
	// llamacpp:prompt_tokens_total counts the prompt tokens a slot
	// evaluated, not those it reused from its cache; builds of 2026 count
	// the reused ones apart in llamacpp:prompt_tokens_cached_total, and the
	// two together are every prompt token, what a request's usage reports.
	// Older builds have no cached counter: their prompt counter is given,
	// not checked. The generation counter grows when a request's slot is
	// released, by all the tokens it generated.
	{
		Name:     "llama.cpp",
		prefixes: []string{"llamacpp:"},
		sources: [numQuantities][]source{
			qRunning:       {src("llamacpp:requests_processing")},
			qWaiting:       {src("llamacpp:requests_deferred")},
			qKVUsage:       {src("llamacpp:kv_cache_usage_ratio")},
			qPrefixQueries: {srcPlus("llamacpp:prompt_tokens_total", "llamacpp:prompt_tokens_cached_total")},
			qPrefixHits:    {src("llamacpp:prompt_tokens_cached_total")},
			qPromptTokens: {
				srcPlus("llamacpp:prompt_tokens_total", "llamacpp:prompt_tokens_cached_total"),
				{family: "llamacpp:prompt_tokens_total",
					partial: "llama.cpp: this build counts only the prompt tokens it evaluates (llamacpp:prompt_tokens_total), not those it reuses from a slot's cache, and publishes no llamacpp:prompt_tokens_cached_total: prompt tokens not checked"},
			},
			qGenerationTokens: {src("llamacpp:tokens_predicted_total")},
		},
		Caveats: []string{
			"llama.cpp: prompt tokens are llamacpp:prompt_tokens_total (evaluated) plus llamacpp:prompt_tokens_cached_total (reused from a slot's cache), the prefix-cache queries that sum and the hits the reused ones; a build without the cached counter gives the evaluated ones only, not checked",
			"llama.cpp: requests_processing counts busy slots and requests_deferred the requests waiting for one; no latency histograms or preemption counter, and kv_cache_usage_ratio only in builds before its removal",
		},
	},
	// NVIDIA NIM for LLMs: https://docs.nvidia.com/nim/large-language-models/latest/observability.html
	// (served on /v1/metrics). NIMs built on a recent vLLM publish vllm:*
	// names instead and are read as vLLM.
	{
		Name:    "nim",
		markers: []string{"num_requests_running", "gpu_cache_usage_perc", "num_request_max"},
		sources: [numQuantities][]source{
			qRunning:          {src("num_requests_running")},
			qWaiting:          {src("num_requests_waiting")},
			qKVUsage:          {src("gpu_cache_usage_perc")},
			qPromptTokens:     {src("prompt_tokens_total")},
			qGenerationTokens: {src("generation_tokens_total")},
			qTTFT:             {src("time_to_first_token_seconds")},
			qITL:              {src("time_per_output_token_seconds")},
			qE2E:              {src("e2e_request_latency_seconds")},
		},
		Caveats: []string{
			"nim: time_per_output_token_seconds is read as an inter-token latency, as in the vLLM it derives from",
		},
	},
}

// mappingByName returns the engine named so, or nil.
func mappingByName(name string) *engine {
	for _, m := range mappings {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// recognise returns the engine whose names an exposition's families are
// read with, or nil when none fits.
func recognise(names []string) *engine {
	for _, m := range mappings {
		for _, n := range names {
			for _, p := range m.prefixes {
				if strings.HasPrefix(n, p) {
					return m
				}
			}
			if slices.Contains(m.markers, n) {
				return m
			}
		}
	}
	return nil
}

// families lists every family the engine's mapping reads, so a scrape
// keeps only those.
func (m *engine) families() map[string]bool {
	out := map[string]bool{}
	for _, ss := range m.sources {
		for _, s := range ss {
			out[s.family] = true
			for _, p := range s.plus {
				out[p] = true
			}
		}
	}
	return out
}

// DCGM exporter fields read for the GPUs, as named in dcgm-exporter's
// default counters (https://github.com/NVIDIA/dcgm-exporter/blob/main/etc/default-counters.csv).
// Every GPU's series carry the labels gpu, UUID, device, modelName and
// Hostname.
const (
	dcgmGPUUtil     = "DCGM_FI_DEV_GPU_UTIL"                 // %
	dcgmMemCopyUtil = "DCGM_FI_DEV_MEM_COPY_UTIL"            // %
	dcgmFBUsed      = "DCGM_FI_DEV_FB_USED"                  // MiB
	dcgmPower       = "DCGM_FI_DEV_POWER_USAGE"              // W
	dcgmEnergy      = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" // mJ since boot, a counter
	dcgmSMClock     = "DCGM_FI_DEV_SM_CLOCK"                 // MHz
	dcgmTemp        = "DCGM_FI_DEV_GPU_TEMP"                 // °C
)

var dcgmFamilies = map[string]bool{
	dcgmGPUUtil: true, dcgmMemCopyUtil: true, dcgmFBUsed: true, dcgmPower: true,
	dcgmEnergy: true, dcgmSMClock: true, dcgmTemp: true,
}
