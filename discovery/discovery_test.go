package discovery

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReadEngines: each engine's self-description, as its documented
// endpoint answers it (testdata), gives its version and its limits under
// the record's common names.
func TestReadEngines(t *testing.T) {
	tests := []struct {
		engine, file, version string
		props                 map[string]string
	}{
		{"vllm", "vllm_version.json", "0.11.0", nil},
		{"sglang", "sglang_server_info.json", "0.4.10", map[string]string{
			MaxModelLen: "8192", MaxRunning: "256", TensorParallel: "2", DataParallel: "1",
			MaxBatchTokens: "8192", KVCacheTokens: "412367", KVCacheDType: "auto",
			ModelPath: "meta-llama/Llama-3.1-8B-Instruct", DType: "auto",
		}},
		{"tgi", "tgi_info.json", "3.3.4", map[string]string{
			MaxModelLen: "4096", MaxInputTokens: "4095", MaxRunning: "128", DType: "torch.bfloat16",
			ModelPath: "meta-llama/Llama-3.1-8B-Instruct",
		}},
		{"llama.cpp", "llamacpp_props.json", "b6123-0c3d5a2f", map[string]string{
			MaxModelLen: "4096", MaxRunning: "4", ModelPath: "models/qwen3-0.6b-q8_0.gguf",
		}},
		// A real llama-server's answer (llama.cpp v0.4.0, started with
		// -c 8192 -np 4): n_ctx is one slot's 8192 / 4, model_ftype the
		// weights' type.
		{"llama.cpp", "llamacpp_props_v0.4.0.json", "b1-80fb11a", map[string]string{
			MaxModelLen: "2048", MaxRunning: "4", ModelPath: "tiny.gguf", DType: "all F32",
		}},
	}
	for _, tt := range tests {
		body, err := os.ReadFile(filepath.Join("testdata", tt.file))
		if err != nil {
			t.Fatal(err)
		}
		var probe *Probe
		for i := range Probes {
			if Probes[i].Engine == tt.engine {
				probe = &Probes[i]
			}
		}
		v, props, ok := probe.Read(body)
		if !ok || v != tt.version {
			t.Errorf("%s: version %q, ok %v; want %q", tt.engine, v, ok, tt.version)
		}
		if len(props) != len(tt.props) {
			t.Errorf("%s: properties %v; want %v", tt.engine, props, tt.props)
		}
		for k, want := range tt.props {
			if props[k] != want {
				t.Errorf("%s: %s = %q; want %q", tt.engine, k, props[k], want)
			}
		}
		// Another engine's probe must not take this answer for its own
		// where the shapes differ (vLLM's /version shape is a subset of
		// SGLang's, which is why SGLang is asked at /get_server_info).
		for _, p := range Probes {
			if p.Engine == tt.engine || p.Path == probe.Path {
				continue
			}
			if _, _, ok := p.Read(body); ok && p.Engine != "vllm" {
				t.Errorf("%s's answer is read as %s's", tt.engine, p.Engine)
			}
		}
	}
}

// TestCompareFlags: a declared flag is set beside the value the engine
// reports, a disagreement is flagged, and spelling (--max_running_requests,
// max-running-requests) does not matter.
func TestCompareFlags(t *testing.T) {
	props := map[string]string{MaxModelLen: "8192", MaxRunning: "256", TensorParallel: "2"}
	got := CompareFlags("sglang", map[string]any{"--context-length": 8192, "max_running_requests": 128, "tp": "2", "schedule-policy": "lpm"}, props)
	want := map[string]Check{
		MaxModelLen:    {Declared: "8192", Discovered: "8192"},
		MaxRunning:     {Declared: "128", Discovered: "256", Mismatch: "the server reports another value"},
		TensorParallel: {Declared: "2", Discovered: "2"},
	}
	if len(got) != len(want) {
		t.Fatalf("checks %+v; want %d", got, len(want))
	}
	for _, c := range got {
		w := want[c.Property]
		if c.Declared != w.Declared || c.Discovered != w.Discovered || c.Mismatch != w.Mismatch {
			t.Errorf("%s: %+v; want %+v", c.Property, c, w)
		}
	}
	// llama.cpp shares --ctx-size among its slots and reports one slot's.
	llama := CompareFlags("llama.cpp", map[string]any{"ctx-size": 16384, "np": 4},
		map[string]string{MaxModelLen: "4096", MaxRunning: "4"})
	for _, c := range llama {
		if c.Mismatch != "" {
			t.Errorf("llama.cpp %s: %+v; 16384 over 4 slots is 4096 each", c.Property, c)
		}
		if c.Property == MaxModelLen && c.Discovered != "4096 per slot (4 slots)" {
			t.Errorf("llama.cpp context shown as %q; want it said per slot", c.Discovered)
		}
	}
	// vLLM's max-model-len against /models' max_model_len.
	if c := CompareFlags("vllm", map[string]any{"max-model-len": 4096}, map[string]string{MaxModelLen: "8192"}); len(c) != 1 || c[0].Mismatch == "" {
		t.Errorf("vllm max-model-len 4096 against 8192: %+v; want a mismatch", c)
	}
}

func TestCompareGPU(t *testing.T) {
	h100 := []string{"NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"}
	for _, tt := range []struct {
		model string
		count int
		found []string
		want  string
	}{
		{"H100-SXM", 2, h100, ""},
		{"h100", 0, h100, ""},
		{"A100-80GB", 2, h100, "the exporter names NVIDIA H100 80GB HBM3, not a A100-80GB"},
		{"H100", 8, h100, "2 GPUs reported, 8 declared"},
		{"H100", 8, nil, ""},
	} {
		if got := CompareGPU(tt.model, tt.count, tt.found); got != tt.want {
			t.Errorf("CompareGPU(%q, %d) = %q; want %q", tt.model, tt.count, got, tt.want)
		}
	}
	if got := GPUs(append(h100, "NVIDIA L4")); got != "2 × NVIDIA H100 80GB HBM3, 1 × NVIDIA L4" {
		t.Errorf("GPUs = %q", got)
	}
}
