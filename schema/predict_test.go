package schema

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/roofline"
	"github.com/infermatrix/infermatrix/sim/engine"
)

const predictTestRows = "rows: [{id: a, concurrency: 1, requests: 1, input_tokens: 8, output_tokens: 8}]\n"

// TestPredictEnumsMatchCatalog keeps predict.model and predict.gpu in step
// with roofline's catalog: an entry added to one must appear in the other.
func TestPredictEnumsMatchCatalog(t *testing.T) {
	enums := map[string][]string{}
	eachKey(func(path, _ string, f fieldInfo) {
		if path == "predict.model" || path == "predict.gpu" {
			enums[path] = strings.Split(f.field.Tag.Get("enum"), ",")
		}
	})
	for path, want := range map[string][]string{"predict.model": roofline.ModelNames(), "predict.gpu": roofline.GPUNames()} {
		got := slices.Clone(enums[path])
		want = slices.Clone(want)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s enum %v; the roofline catalog has %v", path, got, want)
		}
	}
}

// TestPredictDefaults checks that Load fills every default the tags
// document, that they describe the deployment sim/engine's Llama preset
// runs, and that Deployment applies the same defaults to a section Load
// never saw.
func TestPredictDefaults(t *testing.T) {
	p := simPlan(t, "server: {target: builtin}\npredict: {model: llama-3.1-8b, gpu: h100-sxm}\n"+predictTestRows)
	got := p.Experiment.Predict
	tags := map[string]string{}
	eachKey(func(path, _ string, f fieldInfo) {
		if strings.HasPrefix(path, "predict.") {
			if d, ok := f.field.Tag.Lookup("default"); ok {
				tags[strings.TrimPrefix(path, "predict.")] = d
			}
		}
	})
	resolved := map[string]string{
		"bandwidth_efficiency":   fmtFloat(got.BandwidthEfficiency),
		"flops_efficiency":       fmtFloat(got.FLOPsEfficiency),
		"precision":              got.Precision,
		"kv_precision":           got.KVPrecision,
		"replicas":               strconv.Itoa(got.Replicas),
		"gpu_memory_utilization": fmtFloat(got.GPUMemoryUtilization),
		"reserve_gb":             fmtFloat(*got.ReserveGB),
	}
	if len(tags) != len(resolved) {
		t.Errorf("default tags %v; the test checks %d", tags, len(resolved))
	}
	for k, v := range resolved {
		if tags[k] != v {
			t.Errorf("predict.%s resolves to %s; its default tag says %q", k, v, tags[k])
		}
	}

	d, err := got.Deployment()
	if err != nil {
		t.Fatal(err)
	}
	bare, err := (&Predict{Model: "llama-3.1-8b", GPU: "h100-sxm"}).Deployment()
	if err != nil {
		t.Fatal(err)
	}
	if d != bare {
		t.Errorf("Deployment of a loaded section %+v differs from an unloaded one %+v", d, bare)
	}
	preset, _ := engine.LookupPreset("llama-3.1-8b-h100")
	c := preset.Config
	if d.Model != c.Model || d.GPU != c.GPU || d.Precision != c.Precision || d.GPUMemoryUtilization != c.GPUMemoryUtilization ||
		d.ReserveBytes != c.ReserveBytes || d.BlockSize != c.BlockSize || d.Replicas != c.Replicas {
		t.Errorf("default deployment %+v differs from the engine preset's %+v", d, c)
	}
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// TestPredictOverrides checks that every override key reaches the
// deployment, in its unit, and that unset keys keep the preset's figures.
func TestPredictOverrides(t *testing.T) {
	p := simPlan(t, `server: {target: builtin}
predict:
  model: llama-3.1-8b
  gpu: h100-sxm
  bandwidth_efficiency: 0.8
  flops_efficiency: 0.55
  precision: fp8
  kv_precision: fp8
  replicas: 4
  gpu_memory_utilization: 0.85
  reserve_gb: 0
  gpu_overrides: {memory_gb: 94, bandwidth_tbs: 3.9, bf16_tflops: 835, fp8_tflops: 0}
  model_overrides: {params_b: 8, layers: 30, hidden: 3072, heads: 24, kv_heads: 6, head_dim: 96, vocab: 1000, max_position: 4096, tied_embeddings: true}
`+predictTestRows)
	d, err := p.Experiment.Predict.Deployment()
	if err != nil {
		t.Fatal(err)
	}
	wantModel := roofline.Model{Name: "llama-3.1-8b", Params: 8 * 1e9, Layers: 30, Hidden: 3072, Heads: 24, KVHeads: 6, HeadDim: 96,
		Vocab: 1000, TiedEmbeddings: true, MaxPosition: 4096}
	gotModel := d.Model
	if !strings.HasSuffix(gotModel.Source, "; params_b, layers, hidden, heads, kv_heads, head_dim, vocab, max_position, tied_embeddings overridden in the experiment") {
		t.Errorf("model source %q does not say what was overridden", gotModel.Source)
	}
	gotModel.Source = ""
	if gotModel != wantModel {
		t.Errorf("model %+v, want %+v", gotModel, wantModel)
	}
	wantGPU := roofline.GPU{Name: "h100-sxm", MemoryBytes: 94 * 1e9, Bandwidth: 3.9 * 1e12, BF16FLOPs: 835 * 1e12, FP8FLOPs: 0}
	gotGPU := d.GPU
	if !strings.HasSuffix(gotGPU.Source, "; memory_gb, bandwidth_tbs, bf16_tflops, fp8_tflops overridden in the experiment") {
		t.Errorf("GPU source %q does not say what was overridden", gotGPU.Source)
	}
	gotGPU.Source = ""
	// The catalogue's power and clock figures (for the simulated GPU's
	// telemetry) are the H100's still: only the roofline was overridden.
	if gotGPU.DeviceName != "NVIDIA H100 80GB HBM3" || gotGPU.TDPWatts != 700 {
		t.Errorf("GPU %+v lost the catalogue's device name or TDP", gotGPU)
	}
	wantGPU.DeviceName, wantGPU.TDPWatts, wantGPU.IdleWatts = gotGPU.DeviceName, gotGPU.TDPWatts, gotGPU.IdleWatts
	wantGPU.MaxSMClockMHz, wantGPU.IdleSMClockMHz, wantGPU.MemClockMHz = gotGPU.MaxSMClockMHz, gotGPU.IdleSMClockMHz, gotGPU.MemClockMHz
	if gotGPU != wantGPU {
		t.Errorf("GPU %+v, want %+v", gotGPU, wantGPU)
	}
	if d.Precision != (roofline.Precision{Weight: 1, KV: 1}) || d.Efficiency != (roofline.Efficiency{Bandwidth: 0.8, FLOPs: 0.55}) ||
		d.Replicas != 4 || d.GPUMemoryUtilization != 0.85 || d.ReserveBytes != 0 || d.BlockSize != 16 {
		t.Errorf("settings %+v", d)
	}

	// An FP8 checkpoint keeps a 16-bit KV cache unless told otherwise.
	fp8 := simPlan(t, "server: {target: builtin}\npredict: {model: qwen3-8b, gpu: l40s, precision: fp8}\n"+predictTestRows)
	d, err = fp8.Experiment.Predict.Deployment()
	if err != nil || d.Precision != (roofline.Precision{Weight: 1, KV: 2}) {
		t.Errorf("precision fp8 alone: %+v, %v; want 1-byte weights and a 2-byte KV cache", d.Precision, err)
	}
	if _, err := (&Predict{Model: "nope", GPU: "h100-sxm"}).Deployment(); err == nil || !strings.Contains(err.Error(), `unknown model preset "nope"`) {
		t.Errorf("unknown model: %v", err)
	}
}
