// Package roofline is infermatrix's bandwidth math: the published facts about
// GPUs and model architectures, and the lower bounds they put on an
// inference engine's step times.
//
// It is one package, imported by both the simulated server (sim/engine),
// whose step-time model is built on these formulas, and by the decision
// records, which predict a row's TPOT and prefill time with them. Keeping one
// copy means a simulator run with its fixed overheads switched off
// (physics_only) lands exactly on the record's prediction, which is what
// makes the prediction column checkable without a GPU.
//
// # Units
//
// Bytes, FLOPs, seconds and tokens, as float64 because the quantities span
// twelve orders of magnitude and the formulas are ratios. FLOP counts follow
// the usual convention of two FLOPs per multiply-accumulate.
package roofline

import (
	"errors"
	"fmt"
	"math"
)

// GPU is one accelerator's published capability. Figures are datasheet
// peaks: dense (no structured sparsity) tensor throughput, and the memory
// bandwidth of the HBM or GDDR the weights live in.
type GPU struct {
	Name string `json:"name"`
	// MemoryBytes is the device memory (GB as the vendor counts it, 10^9).
	MemoryBytes float64 `json:"memory_bytes"`
	// Bandwidth is the peak memory bandwidth in bytes per second.
	Bandwidth float64 `json:"bandwidth"`
	// BF16FLOPs is the dense BF16 tensor-core peak in FLOP/s.
	BF16FLOPs float64 `json:"bf16_flops"`
	// FP8FLOPs is the dense FP8 tensor-core peak in FLOP/s; zero where the
	// GPU has no FP8 tensor cores.
	FP8FLOPs float64 `json:"fp8_flops"`
	// Source names the datasheet the figures come from.
	Source string `json:"source"`

	// The figures below feed only the simulator's GPU telemetry (the
	// DCGM exporter metrics its /metrics serves), never a bound or a
	// prediction: a GPU without them still predicts, it just serves no
	// GPU metrics when simulated.

	// DeviceName is the product name the driver reports (NVML's, and
	// DCGM exporter's modelName label). Empty for a GPU DCGM does not
	// monitor, as AMD's.
	DeviceName string `json:"device_name,omitempty"`
	// TDPWatts is the board's maximum power draw (the datasheet's TDP or
	// maximum power), the power a saturated GPU draws.
	TDPWatts float64 `json:"tdp_w,omitempty"`
	// IdleWatts is the draw of an idle board that holds a loaded model:
	// a typical reading, not a datasheet figure.
	IdleWatts float64 `json:"idle_w,omitempty"`
	// MaxSMClockMHz is the highest SM clock (nvidia-smi's "Max Clocks"),
	// IdleSMClockMHz the clock an idle board drops to, and MemClockMHz
	// the memory clock, which HBM boards hold fixed.
	MaxSMClockMHz  float64 `json:"max_sm_clock_mhz,omitempty"`
	IdleSMClockMHz float64 `json:"idle_sm_clock_mhz,omitempty"`
	MemClockMHz    float64 `json:"mem_clock_mhz,omitempty"`
}

// HasTelemetry reports whether the GPU has the figures the simulator's GPU
// telemetry needs: a DCGM device name, a TDP above its idle power, and
// clocks.
func (g GPU) HasTelemetry() bool {
	return g.DeviceName != "" && g.TDPWatts > g.IdleWatts && g.IdleWatts > 0 && g.MaxSMClockMHz > 0 && g.MemClockMHz > 0
}

// Model is a decoder-only transformer's architecture, as its config.json
// gives it.
type Model struct {
	Name string `json:"name"`
	// Params is the parameter count, embeddings included once (a model
	// with tied embeddings counts the shared matrix once).
	Params float64 `json:"params"`
	Layers int     `json:"layers"`
	// Hidden is the residual width (hidden_size).
	Hidden int `json:"hidden"`
	// Heads is the number of query heads; KVHeads the number of key-value
	// heads (fewer than Heads under grouped-query attention).
	Heads   int `json:"heads"`
	KVHeads int `json:"kv_heads"`
	HeadDim int `json:"head_dim"`
	Vocab   int `json:"vocab"`
	// TiedEmbeddings says whether the output projection shares the input
	// embedding matrix (tie_word_embeddings).
	TiedEmbeddings bool `json:"tied_embeddings"`
	// MaxPosition is the longest context the model was trained for
	// (max_position_embeddings), the default max_model_len.
	MaxPosition int    `json:"max_position"`
	Source      string `json:"source"`
}

// Precision says how many bytes one weight and one KV-cache element take:
// 2 for BF16 and FP16, 1 for FP8 and INT8.
type Precision struct {
	Weight float64 `json:"weight"`
	KV     float64 `json:"kv"`
}

// BF16 is the precision of an unquantized checkpoint served as is.
var BF16 = Precision{Weight: 2, KV: 2}

// Validate reports the fields a formula would divide by or multiply with
// that are missing, so that an overridden preset fails loudly instead of
// predicting infinity.
func (m Model) Validate() error {
	var errs []error
	if m.Params <= 0 {
		errs = append(errs, errors.New("params must be positive"))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"layers", m.Layers}, {"heads", m.Heads}, {"kv_heads", m.KVHeads}, {"head_dim", m.HeadDim}} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive", f.name))
		}
	}
	if m.KVHeads > 0 && m.Heads > 0 && m.Heads%m.KVHeads != 0 {
		errs = append(errs, fmt.Errorf("heads (%d) must be a multiple of kv_heads (%d)", m.Heads, m.KVHeads))
	}
	return errors.Join(errs...)
}

// Validate reports the GPU figures the formulas need that are missing.
func (g GPU) Validate() error {
	var errs []error
	if g.MemoryBytes <= 0 {
		errs = append(errs, errors.New("memory must be positive"))
	}
	if g.Bandwidth <= 0 {
		errs = append(errs, errors.New("bandwidth must be positive"))
	}
	if g.BF16FLOPs <= 0 {
		errs = append(errs, errors.New("bf16 FLOP/s must be positive"))
	}
	return errors.Join(errs...)
}

// WeightBytes is the size of the weights, which a decode step reads once
// whatever the batch size: the reason small batches are bandwidth-bound.
func (m Model) WeightBytes(p Precision) float64 { return m.Params * p.Weight }

// KVBytesPerToken is the KV cache one token occupies: a key and a value
// vector per layer per KV head, 2 × layers × KV heads × head dim × bytes.
func (m Model) KVBytesPerToken(p Precision) float64 {
	return 2 * float64(m.Layers) * float64(m.KVHeads) * float64(m.HeadDim) * p.KV
}

// EmbeddingParams is the size of one vocabulary matrix, vocab × hidden:
// the input embedding, and the output projection (lm_head) when it is not
// tied to it.
func (m Model) EmbeddingParams() float64 { return float64(m.Vocab) * float64(m.Hidden) }

// NonEmbeddingParams is the parameter count of the transformer body, the
// layers every token passes through: Params without the input embedding
// and, for an untied model, without the output projection.
func (m Model) NonEmbeddingParams() float64 {
	e := m.EmbeddingParams()
	if !m.TiedEmbeddings {
		e *= 2
	}
	return max(m.Params-e, 0)
}

// LinearFLOPsPerToken is the matrix-multiply work of one token through the
// transformer body, 2 × non-embedding parameters. The input embedding is a
// gather, not a multiply, and the output projection runs only for tokens
// that are sampled (LogitsFLOPs): counting 2 × all parameters per prompt
// token, as the usual rule of thumb does, overstates prefill by 15% for
// Llama 3.1 8B and 35% for Qwen3-0.6B.
func (m Model) LinearFLOPsPerToken() float64 { return 2 * m.NonEmbeddingParams() }

// LogitsFLOPs is the output projection's work for one sampled token,
// 2 × vocab × hidden: once per decode token, and once per prefill (for
// its last token), as vLLM computes logits only where it samples.
func (m Model) LogitsFLOPs() float64 { return 2 * m.EmbeddingParams() }

// StreamedWeightBytes is the weight traffic of one forward pass: the body
// and the output projection are read in full, the input embedding only in
// the rows the batch looks up, which is nothing next to the rest. For a
// tied model the one matrix is read as the output projection, so this is
// WeightBytes; for an untied one it is vocab × hidden less.
func (m Model) StreamedWeightBytes(p Precision) float64 {
	if m.TiedEmbeddings {
		return m.WeightBytes(p)
	}
	return max(m.Params-m.EmbeddingParams(), 0) * p.Weight
}

// AttentionFLOPs is the attention work of computing n new tokens of one
// sequence whose first cached tokens are already in the KV cache: each new
// token at position i attends to the cached tokens and the new ones up to
// itself (causal), and each attended position costs QKᵀ and A·V, 2 × 2 ×
// heads × head dim FLOPs per layer.
func (m Model) AttentionFLOPs(cached, n int) float64 {
	if n <= 0 {
		return 0
	}
	perPos := 4 * float64(m.Layers) * float64(m.Heads) * float64(m.HeadDim)
	c, k := float64(cached), float64(n)
	// Σ_{i=1..n} (c + i) = n·c + n(n+1)/2
	return perPos * (k*c + k*(k+1)/2)
}

// Efficiency is the fraction of a GPU's peak an engine achieves: η_bw of
// memory bandwidth in bandwidth-bound steps and η_f of tensor FLOP/s in
// compute-bound ones. Measured engines reach roughly 0.7–0.9 and 0.4–0.7.
type Efficiency struct {
	Bandwidth float64 `json:"bandwidth"`
	FLOPs     float64 `json:"flops"`
	// Attention is the fraction of peak FLOP/s attention kernels reach,
	// apart from the matrix multiplies: paged attention over a batch of
	// ragged contexts runs well below a GEMM's efficiency. Zero means
	// FLOPs.
	Attention float64 `json:"attention,omitempty"`
}

// AttentionOrFLOPs is η for attention: Attention, or FLOPs when unset.
func (e Efficiency) AttentionOrFLOPs() float64 {
	if e.Attention > 0 {
		return e.Attention
	}
	return e.FLOPs
}

// DecodeBytes is the memory traffic of one decode step of one sequence whose
// context (prompt and output so far, the new token included) is context
// tokens: the streamed weights once (StreamedWeightBytes: the untied input
// embedding is gathered, not read), plus that sequence's KV cache.
func (m Model) DecodeBytes(p Precision, context float64) float64 {
	return m.StreamedWeightBytes(p) + m.KVBytesPerToken(p)*context
}

// TPOTBound is the time per output token of a single stream decoding at the
// given context when the step is limited only by memory bandwidth:
// (weight bytes + KV bytes × context) ÷ (η_bw × bandwidth). It is a lower
// bound on a real engine's TPOT at batch size one; the decision records'
// prediction and the simulator's physics-only decode are this number.
func TPOTBound(m Model, g GPU, p Precision, e Efficiency, context float64) float64 {
	return m.DecodeBytes(p, context) / (e.Bandwidth * g.Bandwidth)
}

// DecodeTokensPerSecond is the bandwidth-bound decode rate of one stream,
// the reciprocal of TPOTBound.
func DecodeTokensPerSecond(m Model, g GPU, p Precision, e Efficiency, context float64) float64 {
	return 1 / TPOTBound(m, g, p, e, context)
}

// PeakFLOPs is the tensor throughput used for prefill at precision p: the
// FP8 peak when weights are one byte and the GPU has FP8 tensor cores, the
// BF16 peak otherwise.
func (g GPU) PeakFLOPs(p Precision) float64 {
	if p.Weight <= 1 && g.FP8FLOPs > 0 {
		return g.FP8FLOPs
	}
	return g.BF16FLOPs
}

// PrefillFLOPs is the work of prefilling n prompt tokens after cached tokens
// of the prompt are already in the KV cache (a prefix-cache hit).
// It counts the body's work per token, attention, and one token's logits.
func (m Model) PrefillFLOPs(cached, n int) float64 {
	if n <= 0 {
		return 0
	}
	return m.LinearFLOPsPerToken()*float64(n) + m.AttentionFLOPs(cached, n) + m.LogitsFLOPs()
}

// PrefillBound is the compute-bound lower bound on prefilling n tokens in one
// pass: the matrix multiplies at η_f and attention at its own η (see
// Efficiency.Attention) of the peak FLOP/s. For prompts of more than a few
// hundred tokens prefill is compute-bound on every GPU in the catalog, so
// this bounds time to first token from below, queueing aside.
func PrefillBound(m Model, g GPU, p Precision, e Efficiency, cached, n int) float64 {
	attn := m.AttentionFLOPs(cached, n)
	peak := g.PeakFLOPs(p)
	return (m.PrefillFLOPs(cached, n)-attn)/(e.FLOPs*peak) + attn/(e.AttentionOrFLOPs()*peak)
}

// KVCapacity is the number of tokens whose KV cache fits on one GPU after
// the weights and a reserve (activations, CUDA graphs, the allocator's
// slack): (utilization × memory − weights − reserve) ÷ KV bytes per token,
// rounded down to whole blocks of blockSize tokens as paged attention
// allocates them. It is zero when the weights do not fit.
func KVCapacity(m Model, g GPU, p Precision, utilization, reserveBytes float64, blockSize int) int {
	free := utilization*g.MemoryBytes - m.WeightBytes(p) - reserveBytes
	if free <= 0 || blockSize <= 0 {
		return 0
	}
	blocks := math.Floor(free / (m.KVBytesPerToken(p) * float64(blockSize)))
	return int(blocks) * blockSize
}

// MaxConcurrency is how many sequences of the given total length (prompt
// plus output) fit in a KV capacity at once, each rounded up to whole blocks.
func MaxConcurrency(capacityTokens, seqTokens, blockSize int) int {
	if seqTokens <= 0 || blockSize <= 0 {
		return 0
	}
	blocksPerSeq := (seqTokens + blockSize - 1) / blockSize
	return capacityTokens / blockSize / blocksPerSeq
}
