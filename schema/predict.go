package schema

import (
	"errors"
	"fmt"
	"strings"

	"github.com/infermatrix/infermatrix/roofline"
)

// Defaults of the predict section besides the efficiencies. Memory
// utilization and reserve are sim/engine's presets', which are vLLM's
// defaults and our estimate of its reserve, so that a prediction and the
// built-in server describe the same deployment unless told otherwise.
const (
	DefaultPrecision            = "bf16"
	DefaultKVPrecision          = "bf16"
	DefaultPredictReplicas      = 1
	DefaultGPUMemoryUtilization = 0.9
	DefaultReserveGB            = 3.0
	// PredictBlockSize is the paged-attention block the KV capacity is
	// counted in, vLLM's default of 16 tokens.
	PredictBlockSize = 16
)

// precisionBytes is the size of one weight or KV element at each precision
// the predict section accepts.
var precisionBytes = map[string]float64{"bf16": 2, "fp16": 2, "fp8": 1}

// Deployment is a predict section in roofline's terms: the catalogued model
// and GPU with their overrides applied, and everything else the formulas of
// docs/predictions.md take. Reports predict from it.
type Deployment struct {
	Model      roofline.Model
	GPU        roofline.GPU
	Precision  roofline.Precision
	Efficiency roofline.Efficiency
	// Replicas is the number of data-parallel copies, one GPU each.
	Replicas int
	// GPUMemoryUtilization, ReserveBytes and BlockSize size each
	// replica's KV cache (roofline.KVCapacity).
	GPUMemoryUtilization float64
	ReserveBytes         float64
	BlockSize            int
}

// Deployment resolves the section: defaults for unset keys (as Load fills
// them), the catalog's model and GPU, then the overrides. It fails on a
// name the catalog lacks or on figures the formulas cannot use, which Load
// has already reported for a loaded plan.
func (p *Predict) Deployment() (Deployment, error) {
	d, modelErr, gpuErr := p.deployment()
	var errs []error
	if modelErr != nil {
		errs = append(errs, fmt.Errorf("model: %w", modelErr))
	}
	if gpuErr != nil {
		errs = append(errs, fmt.Errorf("gpu: %w", gpuErr))
	}
	return d, errors.Join(errs...)
}

// deployment builds the Deployment and returns the model's and the GPU's
// problems apart, so that each is reported where it was written.
func (p *Predict) deployment() (d Deployment, modelErr, gpuErr error) {
	m, ok := roofline.LookupModel(p.Model)
	if !ok {
		modelErr = fmt.Errorf("unknown model preset %q", p.Model)
	} else {
		m = p.ModelOverrides.apply(m)
		modelErr = m.Validate()
	}
	g, ok := roofline.LookupGPU(p.GPU)
	if !ok {
		gpuErr = fmt.Errorf("unknown GPU preset %q", p.GPU)
	} else {
		g = p.GPUOverrides.apply(g)
		gpuErr = g.Validate()
	}
	d = Deployment{
		Model: m, GPU: g,
		Precision: roofline.Precision{
			Weight: orDefault(precisionBytes[p.Precision], precisionBytes[DefaultPrecision]),
			KV:     orDefault(precisionBytes[p.KVPrecision], precisionBytes[DefaultKVPrecision]),
		},
		Efficiency: roofline.Efficiency{
			Bandwidth: orDefault(p.BandwidthEfficiency, DefaultBandwidthEff),
			FLOPs:     orDefault(p.FLOPsEfficiency, DefaultFLOPsEff),
		},
		Replicas:             max(p.Replicas, DefaultPredictReplicas),
		GPUMemoryUtilization: orDefault(p.GPUMemoryUtilization, DefaultGPUMemoryUtilization),
		ReserveBytes:         DefaultReserveGB * 1e9,
		BlockSize:            PredictBlockSize,
	}
	if p.ReserveGB != nil {
		d.ReserveBytes = *p.ReserveGB * 1e9
	}
	return d, modelErr, gpuErr
}

func orDefault(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

// apply returns the GPU with the overridden figures replaced, its source
// saying which.
func (o GPUOverrides) apply(g roofline.GPU) roofline.GPU {
	var set []string
	if o.MemoryGB > 0 {
		g.MemoryBytes, set = o.MemoryGB*1e9, append(set, "memory_gb")
	}
	if o.BandwidthTBs > 0 {
		g.Bandwidth, set = o.BandwidthTBs*1e12, append(set, "bandwidth_tbs")
	}
	if o.BF16TFLOPs > 0 {
		g.BF16FLOPs, set = o.BF16TFLOPs*1e12, append(set, "bf16_tflops")
	}
	if o.FP8TFLOPs != nil {
		g.FP8FLOPs, set = *o.FP8TFLOPs*1e12, append(set, "fp8_tflops")
	}
	g.Source = overridden(g.Source, set)
	return g
}

// apply returns the model with the overridden figures replaced, its source
// saying which.
func (o ModelOverrides) apply(m roofline.Model) roofline.Model {
	var set []string
	if o.ParamsB > 0 {
		m.Params, set = o.ParamsB*1e9, append(set, "params_b")
	}
	for _, f := range []struct {
		key string
		v   int
		dst *int
	}{
		{"layers", o.Layers, &m.Layers}, {"hidden", o.Hidden, &m.Hidden}, {"heads", o.Heads, &m.Heads},
		{"kv_heads", o.KVHeads, &m.KVHeads}, {"head_dim", o.HeadDim, &m.HeadDim}, {"vocab", o.Vocab, &m.Vocab},
		{"max_position", o.MaxPosition, &m.MaxPosition},
	} {
		if f.v > 0 {
			*f.dst, set = f.v, append(set, f.key)
		}
	}
	if o.TiedEmbeddings != nil {
		m.TiedEmbeddings, set = *o.TiedEmbeddings, append(set, "tied_embeddings")
	}
	m.Source = overridden(m.Source, set)
	return m
}

func overridden(source string, keys []string) string {
	if len(keys) == 0 {
		return source
	}
	return source + "; " + strings.Join(keys, ", ") + " overridden in the experiment"
}

// predict fills the section's defaults and checks that the deployment it
// describes can be predicted: figures the formulas can use, and weights that
// leave room for a KV cache on each GPU.
func (r *resolver) predict() {
	p := r.exp.Predict
	if p == nil {
		return
	}
	if p.BandwidthEfficiency == 0 {
		p.BandwidthEfficiency = DefaultBandwidthEff
	}
	if p.FLOPsEfficiency == 0 {
		p.FLOPsEfficiency = DefaultFLOPsEff
	}
	if p.Precision == "" {
		p.Precision = DefaultPrecision
	}
	if p.KVPrecision == "" {
		p.KVPrecision = DefaultKVPrecision
	}
	if p.Replicas == 0 {
		p.Replicas = DefaultPredictReplicas
	}
	if p.GPUMemoryUtilization == 0 {
		p.GPUMemoryUtilization = DefaultGPUMemoryUtilization
	}
	if p.ReserveGB == nil {
		reserve := DefaultReserveGB
		p.ReserveGB = &reserve
	}
	for _, k := range []string{"model", "gpu", "precision", "kv_precision"} {
		if r.d.isBroken("predict." + k) {
			return // the enum check has reported it
		}
	}
	d, modelErr, gpuErr := p.deployment()
	for _, e := range []struct {
		path, what string
		err        error
	}{{"predict.model_overrides", "model " + p.Model, modelErr}, {"predict.gpu_overrides", "GPU " + p.GPU, gpuErr}} {
		if e.err == nil {
			continue
		}
		for _, one := range unjoin(e.err) {
			r.problem(e.path, "the overrides must describe a whole model and GPU; docs/predictions.md lists each preset's figures",
				"%s: %v", e.what, one)
		}
	}
	if modelErr != nil || gpuErr != nil {
		return
	}
	if roofline.KVCapacity(d.Model, d.GPU, d.Precision, d.GPUMemoryUtilization, d.ReserveBytes, d.BlockSize) == 0 {
		r.problem("predict", "each replica holds a whole copy of the model (tensor parallelism is not modelled): choose a GPU with more memory, precision: fp8, or a smaller model",
			"no memory left for the KV cache: %s's %.1f GB of weights and %g GB reserve exceed %.4g%% of %s's %g GB",
			p.Model, d.Model.WeightBytes(d.Precision)/1e9, d.ReserveBytes/1e9, 100*d.GPUMemoryUtilization, p.GPU, d.GPU.MemoryBytes/1e9)
	}
}
