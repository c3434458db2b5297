package roofline

import (
	"slices"
	"strings"
)

// Catalogued GPUs and models. The figures are data, not fitted: each comes
// from the vendor datasheet or the model's config.json named in Source, and
// docs/simulator.md and docs/predictions.md cite the same sources. Dense
// FLOP/s are the datasheets' figures without structured sparsity (half the
// headline number where the headline assumes 2:4 sparsity).

const (
	giga = 1e9
	tera = 1e12
)

// Power and clock figures (the GPU fields after Source) feed only the
// simulator's GPU telemetry. Their sources:
//
//   - TDPWatts: the vendor datasheet named in Source (H100 SXM "up to 700W",
//     H100 PCIe 350 W, H200 SXM "up to 700W", DGX B200 1,000 W per GPU,
//     A100 SXM 400 W, L40S 350 W, L4 72 W, MI300X 750 W); A10G 300 W is the
//     power limit nvidia-smi shows on AWS g5 instances (NVIDIA's A10 sheet
//     says 150 W for the PCIe A10).
//   - MaxSMClockMHz and MemClockMHz: the "Max Clocks" section of
//     `nvidia-smi -q` as commonly published for each board (the boost
//     clock of the datasheet where it gives one); B200's are approximate.
//   - IdleWatts and IdleSMClockMHz: typical nvidia-smi readings of an
//     idle board holding a loaded model, in persistence mode. They are
//     estimates (±30%), not datasheet figures.
//   - DeviceName: the product name NVML reports, which DCGM exporter puts
//     in its modelName label. MI300X has none: DCGM does not monitor AMD
//     GPUs, so a simulated MI300X serves no GPU metrics.
var gpus = []GPU{
	{Name: "h100-sxm", MemoryBytes: 80 * giga, Bandwidth: 3.35 * tera, BF16FLOPs: 989.4 * tera, FP8FLOPs: 1978.9 * tera,
		Source:     "NVIDIA H100 Tensor Core GPU datasheet, SXM5 column",
		DeviceName: "NVIDIA H100 80GB HBM3", TDPWatts: 700, IdleWatts: 70, MaxSMClockMHz: 1980, IdleSMClockMHz: 345, MemClockMHz: 2619},
	{Name: "h100-pcie", MemoryBytes: 80 * giga, Bandwidth: 2.0 * tera, BF16FLOPs: 756.5 * tera, FP8FLOPs: 1513 * tera,
		Source:     "NVIDIA H100 Tensor Core GPU datasheet, PCIe column",
		DeviceName: "NVIDIA H100 PCIe", TDPWatts: 350, IdleWatts: 50, MaxSMClockMHz: 1755, IdleSMClockMHz: 345, MemClockMHz: 1593},
	{Name: "h200", MemoryBytes: 141 * giga, Bandwidth: 4.8 * tera, BF16FLOPs: 989.4 * tera, FP8FLOPs: 1978.9 * tera,
		Source:     "NVIDIA H200 Tensor Core GPU datasheet, SXM column",
		DeviceName: "NVIDIA H200", TDPWatts: 700, IdleWatts: 75, MaxSMClockMHz: 1980, IdleSMClockMHz: 345, MemClockMHz: 3201},
	{Name: "b200", MemoryBytes: 180 * giga, Bandwidth: 8.0 * tera, BF16FLOPs: 2250 * tera, FP8FLOPs: 4500 * tera,
		Source:     "NVIDIA DGX B200 datasheet (1,440 GB and 64 TB/s across 8 GPUs; 72 PFLOPS FP8 training, 144 PFLOPS FP4 inference with sparsity)",
		DeviceName: "NVIDIA B200", TDPWatts: 1000, IdleWatts: 140, MaxSMClockMHz: 1965, IdleSMClockMHz: 120, MemClockMHz: 3996},
	{Name: "a100-40gb", MemoryBytes: 40 * giga, Bandwidth: 1.555 * tera, BF16FLOPs: 312 * tera,
		Source:     "NVIDIA A100 Tensor Core GPU datasheet, 40GB SXM column",
		DeviceName: "NVIDIA A100-SXM4-40GB", TDPWatts: 400, IdleWatts: 55, MaxSMClockMHz: 1410, IdleSMClockMHz: 210, MemClockMHz: 1215},
	{Name: "a100-80gb", MemoryBytes: 80 * giga, Bandwidth: 2.039 * tera, BF16FLOPs: 312 * tera,
		Source:     "NVIDIA A100 Tensor Core GPU datasheet, 80GB SXM column",
		DeviceName: "NVIDIA A100-SXM4-80GB", TDPWatts: 400, IdleWatts: 60, MaxSMClockMHz: 1410, IdleSMClockMHz: 210, MemClockMHz: 1593},
	{Name: "l40s", MemoryBytes: 48 * giga, Bandwidth: 0.864 * tera, BF16FLOPs: 362.05 * tera, FP8FLOPs: 733 * tera,
		Source:     "NVIDIA L40S datasheet",
		DeviceName: "NVIDIA L40S", TDPWatts: 350, IdleWatts: 35, MaxSMClockMHz: 2520, IdleSMClockMHz: 210, MemClockMHz: 9001},
	{Name: "l4", MemoryBytes: 24 * giga, Bandwidth: 0.300 * tera, BF16FLOPs: 121 * tera, FP8FLOPs: 242.5 * tera,
		Source:     "NVIDIA L4 Tensor Core GPU datasheet",
		DeviceName: "NVIDIA L4", TDPWatts: 72, IdleWatts: 16, MaxSMClockMHz: 2040, IdleSMClockMHz: 210, MemClockMHz: 6251},
	{Name: "a10g", MemoryBytes: 24 * giga, Bandwidth: 0.600 * tera, BF16FLOPs: 125 * tera,
		Source:     "NVIDIA A10 Tensor Core GPU datasheet (AWS does not publish separate A10G tensor figures; memory and bandwidth match)",
		DeviceName: "NVIDIA A10G", TDPWatts: 300, IdleWatts: 25, MaxSMClockMHz: 1710, IdleSMClockMHz: 210, MemClockMHz: 6251},
	{Name: "mi300x", MemoryBytes: 192 * giga, Bandwidth: 5.3 * tera, BF16FLOPs: 1307.4 * tera, FP8FLOPs: 2614.9 * tera,
		Source:   "AMD Instinct MI300X data sheet",
		TDPWatts: 750, IdleWatts: 140, MaxSMClockMHz: 2100, MemClockMHz: 1300},
}

var models = []Model{
	{Name: "llama-3.1-8b", Params: 8.03e9, Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 128256,
		MaxPosition: 131072, Source: "meta-llama/Llama-3.1-8B-Instruct config.json; 8.03B parameters per the model card"},
	{Name: "llama-3.1-70b", Params: 70.6e9, Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128, Vocab: 128256,
		MaxPosition: 131072, Source: "meta-llama/Llama-3.1-70B-Instruct config.json; 70.6B parameters per the model card"},
	{Name: "qwen3-0.6b", Params: 0.596e9, Layers: 28, Hidden: 1024, Heads: 16, KVHeads: 8, HeadDim: 128, Vocab: 151936,
		TiedEmbeddings: true, MaxPosition: 40960, Source: "Qwen/Qwen3-0.6B config.json; 0.6B parameters (0.44B non-embedding) per the model card"},
	{Name: "qwen3-8b", Params: 8.19e9, Layers: 36, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 151936,
		MaxPosition: 40960, Source: "Qwen/Qwen3-8B config.json; 8.2B parameters (6.95B non-embedding) per the model card"},
	{Name: "qwen3-32b", Params: 32.8e9, Layers: 64, Hidden: 5120, Heads: 64, KVHeads: 8, HeadDim: 128, Vocab: 151936,
		MaxPosition: 40960, Source: "Qwen/Qwen3-32B config.json; 32.8B parameters (31.2B non-embedding) per the model card"},
	{Name: "mistral-7b", Params: 7.25e9, Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 32768,
		MaxPosition: 32768, Source: "mistralai/Mistral-7B-Instruct-v0.3 config.json; 7.25B parameters"},
}

// LookupGPU returns the catalogued GPU of that name (case-insensitive).
func LookupGPU(name string) (GPU, bool) {
	for _, g := range gpus {
		if strings.EqualFold(g.Name, name) {
			return g, true
		}
	}
	return GPU{}, false
}

// LookupModel returns the catalogued model of that name (case-insensitive).
func LookupModel(name string) (Model, bool) {
	for _, m := range models {
		if strings.EqualFold(m.Name, name) {
			return m, true
		}
	}
	return Model{}, false
}

// GPUs returns every catalogued GPU, in catalog order.
func GPUs() []GPU { return slices.Clone(gpus) }

// Models returns every catalogued model, in catalog order.
func Models() []Model { return slices.Clone(models) }

// GPUNames and ModelNames list the catalog's names, for enums and hints.
func GPUNames() []string {
	out := make([]string, len(gpus))
	for i, g := range gpus {
		out[i] = g.Name
	}
	return out
}

// ModelNames lists the catalogued models' names.
func ModelNames() []string {
	out := make([]string, len(models))
	for i, m := range models {
		out[i] = m.Name
	}
	return out
}
