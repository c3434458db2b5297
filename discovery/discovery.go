// Package discovery reads what an inference server says about itself (its
// engine and version, its context limit, its batch limits, the GPUs its
// exporter names) and sets it beside what the experiment file declared, so
// that a decision record signed off for "vLLM 0.11 with max-model-len 8192
// on 8 × H100" says so only when the server agrees.
//
// It owns the meaning of each engine's self-description endpoint: vLLM's
// /version and /v1/models, SGLang's /get_server_info, TGI's /info and
// llama.cpp's /props. It sends nothing itself: the runner does the GETs with
// the run's client, headers and redirect policy, and hands the bodies here.
package discovery

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The properties an engine may report, by the names the record uses. Each
// engine's own key is mapped to one of these, so that a reader compares
// like with like whichever engine answered.
const (
	// MaxModelLen is the longest sequence, prompt plus output, one request
	// may have: vLLM's max_model_len, SGLang's context_length, TGI's
	// max_total_tokens, llama.cpp's n_ctx (per slot).
	MaxModelLen = "max_model_len"
	// MaxInputTokens is TGI's max_input_tokens: the longest prompt.
	MaxInputTokens = "max_input_tokens"
	// MaxRunning is how many requests the engine runs at once: SGLang's
	// max_running_requests, TGI's max_concurrent_requests (its router's
	// limit), llama.cpp's total_slots.
	MaxRunning = "max_running"
	// TensorParallel is the tensor-parallel degree: SGLang's tp_size.
	TensorParallel = "tensor_parallel"
	// DataParallel is the data-parallel degree: SGLang's dp_size.
	DataParallel = "data_parallel"
	// MaxBatchTokens is the most tokens one step computes: SGLang's
	// chunked_prefill_size, TGI's max_batch_total_tokens.
	MaxBatchTokens = "max_batch_tokens"
	// KVCacheTokens is the KV cache's capacity in tokens: SGLang's
	// max_total_num_tokens.
	KVCacheTokens = "kv_cache_tokens"
	// ModelPath is the weights the engine loaded.
	ModelPath = "model_path"
	// DType is the weights' data type or quantization.
	DType = "dtype"
	// KVCacheDType is the KV cache's data type.
	KVCacheDType = "kv_cache_dtype"
)

// Probe is one self-description endpoint: a GET on the server's root (its
// base URL without /v1), and how to read the answer.
type Probe struct {
	Engine string
	Path   string
	// Read returns the engine's version and properties, and false when the
	// body is not this engine's answer (another engine may serve the same
	// path with another shape).
	Read func(body []byte) (version string, props map[string]string, ok bool)
}

// Probes are tried in this order unless a hint says which engine to ask
// first (Order).
var Probes = []Probe{
	{"vllm", "/version", readVLLM},
	{"tgi", "/info", readTGI},
	{"sglang", "/get_server_info", readSGLang},
	{"llama.cpp", "/props", readLlamaCpp},
}

// Order returns the probes with the one for engine first.
func Order(engine string) []Probe {
	out := slices.Clone(Probes)
	slices.SortStableFunc(out, func(a, b Probe) int {
		ra, rb := 1, 1
		if Same(a.Engine, engine) {
			ra = 0
		}
		if Same(b.Engine, engine) {
			rb = 0
		}
		return ra - rb
	})
	return out
}

// Same reports whether two engine names mean the same engine, ignoring
// case and punctuation: "llama.cpp" and "llamacpp", "vLLM" and "vllm".
func Same(a, b string) bool { return normName(a) == normName(b) }

func normName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func readVLLM(b []byte) (string, map[string]string, bool) {
	var v struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(b, &v) != nil || v.Version == "" {
		return "", nil, false
	}
	return v.Version, nil, true
}

// readTGI reads TGI's /info (text-generation-inference's router Info):
// model_id is always there; the limits are the launcher's.
func readTGI(b []byte) (string, map[string]string, bool) {
	var raw map[string]any
	if json.Unmarshal(b, &raw) != nil || str(raw["model_id"]) == "" {
		return "", nil, false
	}
	props := map[string]string{ModelPath: str(raw["model_id"])}
	put(props, MaxModelLen, raw["max_total_tokens"])
	put(props, MaxInputTokens, firstOf(raw, "max_input_tokens", "max_input_length"))
	put(props, MaxRunning, raw["max_concurrent_requests"])
	put(props, MaxBatchTokens, raw["max_batch_total_tokens"])
	put(props, DType, raw["model_dtype"])
	return str(raw["version"]), props, true
}

// readSGLang reads SGLang's /get_server_info: its server arguments,
// flattened, with the scheduler's figures (max_total_num_tokens) at the top
// level in older versions and under internal_states in newer ones.
func readSGLang(b []byte) (string, map[string]string, bool) {
	var raw map[string]any
	if json.Unmarshal(b, &raw) != nil {
		return "", nil, false
	}
	// model_path with SGLang's server arguments (tp_size,
	// mem_fraction_static): version alone is vLLM's /version shape, and
	// model_path alone llama.cpp's /props.
	version := str(raw["version"])
	_, tp := raw["tp_size"]
	_, mem := raw["mem_fraction_static"]
	if str(raw["model_path"]) == "" || !tp && !mem {
		return "", nil, false
	}
	props := map[string]string{}
	put(props, ModelPath, raw["model_path"])
	put(props, MaxModelLen, raw["context_length"])
	put(props, MaxRunning, raw["max_running_requests"])
	put(props, TensorParallel, raw["tp_size"])
	put(props, DataParallel, raw["dp_size"])
	put(props, MaxBatchTokens, raw["chunked_prefill_size"])
	put(props, KVCacheDType, raw["kv_cache_dtype"])
	put(props, DType, firstOf(raw, "quantization", "dtype"))
	kv := raw["max_total_num_tokens"]
	if states, ok := raw["internal_states"].([]any); ok && kv == nil && len(states) > 0 {
		if st, ok := states[0].(map[string]any); ok {
			kv = st["max_total_num_tokens"]
		}
	}
	put(props, KVCacheTokens, kv)
	return version, props, true
}

// readLlamaCpp reads llama.cpp's /props: build_info names the build
// ("b<build number>-<commit>"), default_generation_settings.n_ctx is each
// slot's context (--ctx-size over --parallel), total_slots is --parallel,
// and model_ftype, in newer builds, the weights' type.
func readLlamaCpp(b []byte) (string, map[string]string, bool) {
	var raw map[string]any
	if json.Unmarshal(b, &raw) != nil {
		return "", nil, false
	}
	// build_info and default_generation_settings are llama.cpp's own;
	// model_path alone is SGLang's too.
	build := str(raw["build_info"])
	if _, gen := raw["default_generation_settings"]; build == "" && !gen {
		return "", nil, false
	}
	props := map[string]string{}
	put(props, ModelPath, raw["model_path"])
	put(props, MaxRunning, raw["total_slots"])
	if gen, ok := raw["default_generation_settings"].(map[string]any); ok {
		put(props, MaxModelLen, gen["n_ctx"])
	}
	put(props, MaxModelLen, raw["n_ctx"]) // where a build reports it at the top
	put(props, DType, raw["model_ftype"]) // "all F32", "Q8_0": the weights' type, where a build reports it
	return build, props, true
}

// firstOf returns the first of keys raw has.
func firstOf(raw map[string]any, keys ...string) any {
	for _, k := range keys {
		if v, ok := raw[k]; ok && v != nil {
			return v
		}
	}
	return nil
}

// put sets props[key] to v as text, unless v is absent, empty, or key is
// already set.
func put(props map[string]string, key string, v any) {
	if _, set := props[key]; set {
		return
	}
	if s := str(v); s != "" {
		props[key] = s
	}
}

// str renders a JSON value as text: integers without a decimal point.
func str(v any) string {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x)
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return ""
	default:
		return fmt.Sprint(x)
	}
}
