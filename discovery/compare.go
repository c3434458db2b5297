package discovery

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Check is one property the file declared (as an engine flag) or the server
// reported, side by side. Mismatch says how they disagree; empty when they
// agree or either is unknown.
type Check struct {
	Property   string
	Label      string
	Declared   string
	Discovered string
	Mismatch   string
}

// flagNames are the engine flags that set each property, normalised
// (no leading dashes, '-' for '_', lower case), per engine: the engines'
// own command-line names. llama.cpp's ctx-size is the whole context, shared
// by its slots; compareLlamaCtx handles it.
var flagNames = []struct {
	prop, label string
	flags       map[string][]string // engine (normalised name) → flags
}{
	{MaxModelLen, "Max model length", map[string][]string{
		"vllm": {"max-model-len"}, "sglang": {"context-length"}, "tgi": {"max-total-tokens"},
		"llamacpp": {"ctx-size", "c"},
	}},
	{MaxInputTokens, "Max input tokens", map[string][]string{"tgi": {"max-input-tokens", "max-input-length"}}},
	{MaxRunning, "Max running requests", map[string][]string{
		"sglang": {"max-running-requests"}, "tgi": {"max-concurrent-requests"}, "llamacpp": {"parallel", "np"},
	}},
	{TensorParallel, "Tensor parallel", map[string][]string{"sglang": {"tp-size", "tp", "tensor-parallel-size"}}},
	{DataParallel, "Data parallel", map[string][]string{"sglang": {"dp-size", "dp", "data-parallel-size"}}},
	{MaxBatchTokens, "Max batched tokens", map[string][]string{
		"sglang": {"chunked-prefill-size"}, "tgi": {"max-batch-total-tokens"},
	}},
	{KVCacheDType, "KV-cache dtype", map[string][]string{"sglang": {"kv-cache-dtype"}}},
	{KVCacheTokens, "KV-cache tokens", nil},
}

// CompareFlags sets the properties the server reported beside the flags
// the file declared for the engine that answered. A property appears when
// either side knows it; a flag the engine does not report is not listed
// (the record shows the flags as written elsewhere). Numbers are compared
// as numbers, words without case.
func CompareFlags(engine string, flags map[string]any, props map[string]string) []Check {
	eng := normName(engine)
	declared := map[string]string{}
	for k, v := range flags {
		declared[normFlag(k)] = flagValue(v)
	}
	var out []Check
	for _, f := range flagNames {
		decl := ""
		for _, name := range f.flags[eng] {
			if v, ok := declared[name]; ok && v != "" {
				decl = v
				break
			}
		}
		disc := props[f.prop]
		if decl == "" && disc == "" {
			continue
		}
		c := Check{Property: f.prop, Label: f.label, Declared: decl, Discovered: disc}
		if decl != "" && disc != "" && !sameValue(decl, disc) {
			c.Mismatch = "the server reports another value"
			if eng == "llamacpp" && f.prop == MaxModelLen && llamaCtxAgrees(decl, disc, declared, props) {
				c.Mismatch = ""
			}
		}
		if eng == "llamacpp" && f.prop == MaxModelLen && disc != "" && props[MaxRunning] != "" {
			// /props reports one slot's context; --ctx-size is all
			// slots' together.
			c.Discovered = fmt.Sprintf("%s per slot (%s slots)", disc, props[MaxRunning])
		}
		out = append(out, c)
	}
	return out
}

// llamaCtxAgrees: llama.cpp splits --ctx-size among its --parallel slots,
// and /props reports one slot's n_ctx; a declared context equal to n_ctx
// times the slots agrees.
func llamaCtxAgrees(decl, disc string, declared, props map[string]string) bool {
	ctx, err1 := strconv.ParseFloat(decl, 64)
	nctx, err2 := strconv.ParseFloat(disc, 64)
	slots, err3 := strconv.ParseFloat(props[MaxRunning], 64)
	if err1 != nil || err2 != nil || err3 != nil || slots < 1 {
		return false
	}
	return ctx == nctx*slots
}

func normFlag(k string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimLeft(strings.TrimSpace(k), "-")), "_", "-")
}

func flagValue(v any) string {
	switch x := v.(type) {
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return str(v)
}

func sameValue(a, b string) bool {
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	if err1 == nil && err2 == nil {
		return x == y
	}
	return strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b))
}

// GPUs describes the GPUs a DCGM exporter named, by model: "8 × NVIDIA H100
// 80GB HBM3", or "1 × NVIDIA A100-SXM4-80GB, 1 × NVIDIA L4" for a mix.
func GPUs(models []string) string {
	count := map[string]int{}
	for _, m := range models {
		count[strings.TrimSpace(m)]++
	}
	names := make([]string, 0, len(count))
	for m := range count {
		names = append(names, m)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, m := range names {
		if m == "" {
			m = "unnamed GPU"
		}
		parts[i] = fmt.Sprintf("%d × %s", count[names[i]], m)
	}
	return strings.Join(parts, ", ")
}

// CompareGPU says how the GPUs an exporter named disagree with the declared
// hardware: another model, or another count. Empty when they agree, or
// when either side is unknown. The declared model is a short name (H100,
// H100-SXM, a100-80gb) and the exporter's a marketing one (NVIDIA H100 80GB
// HBM3): they agree when every alphanumeric token of the declared name that
// names a GPU family appears in the reported one.
func CompareGPU(declaredModel string, declaredCount int, models []string) string {
	if len(models) == 0 {
		return ""
	}
	var problems []string
	if declaredModel != "" {
		fam := family(declaredModel)
		for _, m := range models {
			if fam != "" && !strings.Contains(normName(m), fam) {
				problems = append(problems, fmt.Sprintf("the exporter names %s, not a %s", m, declaredModel))
				break
			}
		}
	}
	if declaredCount > 0 && declaredCount != len(models) {
		problems = append(problems, fmt.Sprintf("%d GPUs reported, %d declared", len(models), declaredCount))
	}
	return strings.Join(problems, "; ")
}

// family is the GPU family in a declared model name: its first token with a
// digit (h100, a100, l40s, b200, mi300x), which every marketing name of the
// family carries.
func family(model string) string {
	for _, tok := range strings.FieldsFunc(strings.ToLower(model), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if strings.IndexFunc(tok, unicode.IsDigit) >= 0 {
			return tok
		}
	}
	return ""
}
