package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/infermatrix/infermatrix/roofline"
)

// Config describes one simulated deployment: Replicas identical engines
// behind one shared front end, as `vllm serve --data-parallel-size N` runs
// them behind one API server.
type Config struct {
	Model      roofline.Model
	GPU        roofline.GPU
	Precision  roofline.Precision
	Efficiency roofline.Efficiency

	// MaxModelLen is the longest sequence (prompt plus output) a request
	// may have. Zero means Model.MaxPosition.
	MaxModelLen int
	// MaxNumSeqs caps the sequences scheduled in one step (vLLM's
	// max_num_seqs).
	MaxNumSeqs int
	// MaxNumBatchedTokens caps the tokens computed in one step, prefill
	// chunks and decodes together (vLLM's max_num_batched_tokens).
	MaxNumBatchedTokens int
	// GPUMemoryUtilization is the fraction of device memory the engine
	// may use for weights, reserve and KV cache.
	GPUMemoryUtilization float64
	// ReserveBytes is memory that is neither weights nor KV cache:
	// activations at the largest batch, CUDA graphs, allocator slack.
	ReserveBytes float64
	// BlockSize is the paged-attention block in tokens; the prefix cache
	// hits whole blocks only. vLLM's default is 16.
	BlockSize int
	// PrefixCaching enables automatic prefix caching, on by default in
	// vLLM V1.
	PrefixCaching bool

	// StepOverhead (t0) is the fixed cost of one engine step that no
	// roofline explains: scheduling, input preparation, kernel launches,
	// sampling. It dominates small models.
	StepOverhead time.Duration
	// SeqOverhead (t_seq) is the cost per scheduled sequence per step:
	// per-request bookkeeping, sampling and detokenization in the engine.
	SeqOverhead time.Duration
	// Jitter is σ of a mean-one log-normal factor applied to every step
	// time; zero for none.
	Jitter float64
	// Drift is σ of a mean-one log-normal factor on each replica's speed
	// that holds for a while (DriftPeriod on average, exponentially
	// distributed) and is then drawn afresh: the slow phases a real
	// engine goes through (garbage collection, a neighbour's traffic, the
	// batch's mix) that per-step jitter averages away. It is what makes
	// one request's mean inter-token latency differ from another's; zero
	// for none.
	Drift float64
	// DriftPeriod is the mean time a replica's drift factor holds. Zero
	// means one second.
	DriftPeriod time.Duration

	// FrontEnd is host overhead outside the engine: the API server.
	FrontEnd FrontEnd

	// Replicas is the number of data-parallel engines. Zero means one.
	Replicas int
	// StatsInterval is how old the load figures the front end routes on
	// may be: every replica's waiting and running counts are published to
	// it once per interval, and between two publications it sees only
	// those counts plus the requests it sent itself. vLLM 0.11's DP
	// coordinator publishes at most every 100 ms (CoordinatorProc's
	// min_stats_update_interval_ms in vllm/v1/engine/coordinator.py);
	// zero means that. It matters only with several replicas.
	StatsInterval time.Duration
	// Seed seeds the jitter. Runs with equal configs, seeds and inputs
	// are bit-for-bit identical on the virtual clock.
	Seed uint64

	// Instant makes every step and every front-end cost take no time:
	// scheduling, KV accounting and prefix caching still run, but tokens
	// are ready as soon as a request arrives. It measures a client's own
	// capacity, with the server as nearly free as it can be.
	Instant bool
}

// DefaultStatsInterval is vLLM 0.11's period of load statistics for
// data-parallel routing: its DP coordinator publishes the engines' request
// counts to the API server at most every 100 ms while they change.
const DefaultStatsInterval = 100 * time.Millisecond

// FrontEnd is the host-side cost of serving requests over HTTP, modelled on
// vLLM's API server: one process that parses and tokenizes each request,
// then turns every batch of engine outputs into stream chunks. It is host
// overhead, not GPU work; real servers have it, and it is what bends a
// small model's throughput curve down at high concurrency.
type FrontEnd struct {
	// RequestLatency delays each request's arrival at the engine without
	// occupying the front end: the awaits of the request path (handing the
	// request to the engine core over its socket, the first scheduler
	// poll), which overlap with other work.
	RequestLatency time.Duration
	// RequestLatencyPerStream is added to RequestLatency for every stream
	// open at the front end when the request arrives: the API server's
	// event loop goes round every open stream between two steps of one
	// request's path, so its awaits take longer the more streams it
	// serves.
	RequestLatencyPerStream time.Duration
	// RequestCost and RequestCostPerToken are the front end's own work
	// on a request before the engine sees it: parsing, the chat template
	// and tokenization, growing with the prompt's length. It runs on the
	// same single process as the output path (TokenCost), in order of
	// arrival: a request that arrives while the front end is busy
	// turning a large step's tokens into stream chunks waits for it, which
	// is how a busy engine pushes back on new requests.
	RequestCost         time.Duration
	RequestCostPerToken time.Duration
	// LatencySpread is σ of a mean-one log-normal factor drawn per
	// request and applied to its request path (RequestLatency and its
	// RequestCost): the heavy tail of time to first token that a single
	// Python process shows. Zero for none.
	LatencySpread float64
	// TokenCost is the output path's host time per token. The front end
	// handles one engine step's tokens at a time, serially across
	// replicas: when it falls behind, tokens queue.
	TokenCost time.Duration
	// TokenCostPerStream is added to TokenCost for every stream open at
	// the front end: per-token work that grows with the number of
	// concurrent streams (wakeups, scheduling, garbage collection).
	TokenCostPerStream time.Duration
}

// PhysicsOnly returns c without fixed overheads, front end or jitter, so
// that step times are exactly the roofline: single-stream decode then equals
// roofline.TPOTBound.
func (c Config) PhysicsOnly() Config {
	c.StepOverhead, c.SeqOverhead, c.Jitter, c.Drift = 0, 0, 0, 0
	c.FrontEnd = FrontEnd{}
	return c
}

// withDefaults fills zero fields that have a natural default.
func (c Config) withDefaults() Config {
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.BlockSize == 0 {
		c.BlockSize = 16
	}
	if c.MaxModelLen == 0 {
		c.MaxModelLen = c.Model.MaxPosition
	}
	if c.DriftPeriod == 0 {
		c.DriftPeriod = time.Second
	}
	if c.StatsInterval == 0 {
		c.StatsInterval = DefaultStatsInterval
	}
	if c.Precision == (roofline.Precision{}) {
		c.Precision = roofline.BF16
	}
	return c
}

// Validate reports every setting the engine cannot run with.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if err := c.Model.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("model: %w", err))
	}
	if err := c.GPU.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("gpu: %w", err))
	}
	if c.Precision.Weight <= 0 || c.Precision.KV <= 0 {
		errs = append(errs, errors.New("precision: weight and kv bytes must be positive"))
	}
	if !c.Instant && (c.Efficiency.Bandwidth <= 0 || c.Efficiency.Bandwidth > 1 || c.Efficiency.FLOPs <= 0 || c.Efficiency.FLOPs > 1) {
		errs = append(errs, fmt.Errorf("efficiency: η_bw %v and η_f %v must be in (0, 1]", c.Efficiency.Bandwidth, c.Efficiency.FLOPs))
	}
	if c.MaxNumSeqs < 1 {
		errs = append(errs, fmt.Errorf("max_num_seqs %d: must be at least 1", c.MaxNumSeqs))
	}
	if c.MaxNumBatchedTokens < 1 {
		errs = append(errs, fmt.Errorf("max_num_batched_tokens %d: must be at least 1", c.MaxNumBatchedTokens))
	}
	if c.GPUMemoryUtilization <= 0 || c.GPUMemoryUtilization > 1 {
		errs = append(errs, fmt.Errorf("gpu_memory_utilization %v: must be in (0, 1]", c.GPUMemoryUtilization))
	}
	if c.ReserveBytes < 0 {
		errs = append(errs, errors.New("reserve: must not be negative"))
	}
	if c.BlockSize < 1 {
		errs = append(errs, fmt.Errorf("block size %d: must be positive", c.BlockSize))
	}
	fe := c.FrontEnd
	if c.StepOverhead < 0 || c.SeqOverhead < 0 || fe.RequestLatency < 0 || fe.RequestLatencyPerStream < 0 || fe.RequestCost < 0 || fe.RequestCostPerToken < 0 || fe.TokenCost < 0 || fe.TokenCostPerStream < 0 {
		errs = append(errs, errors.New("overheads must not be negative"))
	}
	if c.Jitter < 0 || c.Drift < 0 || fe.LatencySpread < 0 {
		errs = append(errs, fmt.Errorf("jitter %v, drift %v and latency spread %v: must not be negative", c.Jitter, c.Drift, fe.LatencySpread))
	}
	if c.DriftPeriod < 0 {
		errs = append(errs, fmt.Errorf("drift period %v: must not be negative", c.DriftPeriod))
	}
	if c.StatsInterval < 0 {
		errs = append(errs, fmt.Errorf("stats interval %v: must not be negative", c.StatsInterval))
	}
	if e := c.Efficiency.Attention; e < 0 || e > 1 {
		errs = append(errs, fmt.Errorf("efficiency: attention η %v must be in (0, 1], or 0 for η_f", e))
	}
	if c.Replicas < 1 {
		errs = append(errs, fmt.Errorf("replicas %d: must be at least 1", c.Replicas))
	}
	if c.MaxModelLen < 1 {
		errs = append(errs, fmt.Errorf("max_model_len %d: must be positive", c.MaxModelLen))
	}
	if len(errs) == 0 {
		kv := c.KVCapacity()
		if kv == 0 {
			errs = append(errs, fmt.Errorf("no memory left for the KV cache: %.1f GB of weights and %.1f GB reserve exceed %.0f%% of %.0f GB",
				c.Model.WeightBytes(c.Precision)/1e9, c.ReserveBytes/1e9, 100*c.GPUMemoryUtilization, c.GPU.MemoryBytes/1e9))
		} else if kv < c.MaxModelLen {
			// vLLM refuses to start in this case, for the same reason:
			// a maximal request could never be scheduled.
			errs = append(errs, fmt.Errorf("max_model_len %d exceeds the KV cache's %d tokens; lower max_model_len or raise gpu_memory_utilization", c.MaxModelLen, kv))
		}
	}
	return errors.Join(errs...)
}

// KVCapacity is the KV cache of one replica in tokens.
func (c Config) KVCapacity() int {
	c = c.withDefaults()
	return roofline.KVCapacity(c.Model, c.GPU, c.Precision, c.GPUMemoryUtilization, c.ReserveBytes, c.BlockSize)
}
