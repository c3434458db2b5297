// Package sim is infermatrix's built-in simulated inference server: an
// OpenAI-compatible HTTP server, shaped like vLLM's, that generates text
// without a model or a GPU.
//
// It exists so that a newcomer without a GPU can run real experiments, and so
// that the project's own tests have a realistic target on loopback. It speaks
// the parts of the protocol a load generator depends on: POST
// /v1/chat/completions and /v1/completions, streaming (server-sent events)
// and not, usage reporting, vLLM-shaped errors, GET /v1/models, /health,
// /ping, /version, POST /tokenize and /detokenize, and a Prometheus /metrics endpoint with vLLM's metric names and,
// for an engine, its simulated GPUs under DCGM exporter's (gpu.go).
//
// # Token accounting
//
// The server counts prompt tokens as vLLM serving the model would, with the
// tokenizer the load generator uses for the text. A chat prompt is rendered
// with the served model's chat template (Config.ChatTemplate,
// chattemplate.go: Llama 3.1 Instruct's or Qwen3's) and its template
// tokens count, in usage, in the context limit and in the prefill; without
// a template (the infermatrix-sim model of the fixed and tiny-fast presets)
// prompt_tokens is the sum of the messages' text counts. A completion's is
// the token count of the prompt (the sum over the parts when the prompt is
// an array of strings, or the number of ids when it is an array of token
// ids), with Llama's BOS before each text part. Config.ChatTemplateTokens
// tells a client what the template adds.
//
// By default every request generates exactly its max_tokens tokens and
// finishes with finish_reason "length", so that a benchmark gets the lengths
// it asked for. With Config.EOSMeanTokens set, a request that does not send
// "ignore_eos": true stops earlier, as a model that samples its
// end-of-sequence token does: its natural length is drawn at parse time from
// a geometric distribution with that mean, keyed by Config.Seed and the
// request's "seed" (or its arrival number), and its output is
// min(max_tokens, max(min_tokens, natural)) tokens, finishing "stop" when
// that is short of max_tokens. The same request with the same seed always
// gets the same length. Usage reports the tokens actually generated.
//
// Usage also reports (except with the tgi personality), as
// usage.prompt_tokens_details.cached_tokens, how many prompt tokens the
// engine found in its prefix cache: whole blocks of the prompt whose token
// ids were computed before, by an earlier request or by this one before a
// preemption, never the block holding the last prompt token. The count is
// the request's first admission's, as vLLM V1 reports it: a request
// preempted and admitted again finds its own blocks, and that is not a hit
// its client's cache check should count. Without an Engine
// (the fixed preset) there is no prefix cache and the count is 0. While no
// request is preempted or abandoned, the counts the responses report sum to
// /metrics' vllm:prefix_cache_hits_total, which counts every admission.
//
// The text is drawn, with a seeded random generator, from a pool of tokens
// that each decode to a space and a short lowercase word and encode back to
// themselves, so that re-tokenizing the generated text gives exactly
// usage.completion_tokens. A client that measures output by tokenizing what
// it received therefore agrees with the server.
//
// # Timing
//
// The protocol layer (server.go, request.go, generate.go) knows requests and
// bytes; when each token is emitted is decided behind a small seam,
// timingModel in timing.go, so that a continuous-batching engine model can
// replace the constant one without touching the protocol. The model here is
// deliberately thin: a constant time to first token and a constant
// inter-token latency per request, independent of load. Token k of a request
// is due at arrival + TTFT + k*ITL, an absolute deadline, so that scheduling
// jitter does not accumulate over a long stream.
//
// # Personalities
//
// Clients meet more servers than vLLM, and each has quirks a client must
// survive. Config.Personality picks the wire format:
//
//   - "vllm" (the default): vLLM 0.11's chunks, a role chunk with
//     "content":"", finish_reason on the last token's chunk, and with
//     include_usage "usage":null on every chunk before a final usage chunk;
//     its error bodies ({"error":{...}}, errors.go), Content-Type check,
//     default max_tokens, refusals of what the simulator cannot honour, and
//     /tokenize, /detokenize and /ping. Every usage object, streamed or
//     not, ends with "prompt_tokens_details":{"cached_tokens":N}, as vLLM's
//     does when started with --enable-prompt-tokens-details. The simulator
//     always sends it, 0 included, where vLLM sends it only with that flag
//     (and some versions leave it out when nothing was cached), so a client
//     must treat a missing field as unknown, not as a miss.
//   - "llama.cpp": llama-server's chunks (Server: llama.cpp, its key order,
//     a role chunk with "content":null and no logprobs, "timings" with the
//     request's actual prefill and decode times, chatcmpl- ids on both
//     endpoints; the request's model field is ignored). As on llama-server,
//     timings.cache_n counts the prompt tokens found in the cache and
//     prompt_n those computed, and usage ends with
//     "prompt_tokens_details":{"cached_tokens":N}, as recent builds send. It closes the TCP
//     connection after every streamed response without announcing it, while
//     advertising Keep-Alive: a keep-alive client that reuses the connection
//     fails unless it retries, which Go's transport does for requests with
//     an Idempotency-Key header.
//   - "tgi": text-generation-inference's chunks, one token per event, the
//     role on every delta and finish_reason on the last token event; the
//     request's model field is ignored, and errors are TGI's
//     {"error","error_type"}, 422 for a request its validation refuses. TGI
//     reports no cached count, and neither does the personality.
//
// Config.TokensPerEvent > 1 stands for a server that sends several tokens a
// step (speculative decoding) under any personality: usage still counts
// tokens, so a client that counts events instead of tokens is caught out.
//
// # Faults
//
// Config.Faults injects failures into a fraction of requests, drawn with a
// generator keyed by Config.Seed and the request's arrival number, and the
// X-Sim-Fault request header (FaultHeader) chooses one for a single request,
// overriding the configuration: a 429 with Retry-After, a 500 or a 503 in
// OpenAI's error shape; a vLLM error event, a clean truncation or a TCP
// reset after some tokens; a stall; or headers held back while generation
// proceeds. Every wait honours the request's context, so that neither a
// client that gives up nor Instance.Close waits on a fault. Injected faults
// are counted in /metrics.
//
// # Measurement
//
// Besides vLLM's gauges and counters, /metrics exposes vLLM's request
// histograms (time to first token, inter-token latency, end-to-end latency)
// measured in the handler when the bytes are flushed, and the simulator's
// own flush lateness: how late each token's write and flush returned against
// the time the model scheduled it. Server.FlushLateness reads its
// percentiles since the start, so that a test can check that the host kept
// up; Server.LatenessSnapshot (or Instance.LatenessSnapshot) and
// LatenessSnapshot.Since read them over an interval, such as one benchmark
// row.
//
// Config.GroundTruth receives one JSON line per request with the server's
// own per-token due, write-start and flush times (documented on
// truthRecord in groundtruth.go), so that a client's measurement error can
// be computed against what the server actually did.
package sim

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/infermatrix/infermatrix/sim/engine"
	"github.com/infermatrix/infermatrix/tokenizer"
)

// Config describes one simulated server. The zero value is usable: every
// zero field takes the default WithDefaults documents.
type Config struct {
	// Model is the served model id, the only value a request's "model"
	// field may name. Default "infermatrix-sim".
	Model string
	// MaxModelLen is the context limit in tokens: a request's prompt
	// tokens plus its max_tokens must not exceed it. Default: the
	// engine's, or 32768 without one.
	MaxModelLen int
	// Engine, when not nil, times tokens with the continuous-batching
	// engine model of package sim/engine, run in real time. When nil the
	// server has fixed latencies, TTFT and ITL, whatever the load.
	Engine *engine.Config
	// TTFT is the constant time from a request's arrival to its first
	// token, without an Engine. Default 20ms. Zero selects the default,
	// so a run that wants effectively no delay sets a nanosecond.
	TTFT time.Duration
	// ITL is the constant gap between consecutive tokens of a request,
	// without an Engine. Default 5ms; zero selects the default, as for
	// TTFT.
	ITL time.Duration
	// DefaultMaxTokens, when positive, is the output length of a request
	// that sets neither max_tokens nor max_completion_tokens, capped so
	// that the request still fits MaxModelLen. Zero, the default, is the
	// mimicked server's own default: 16 for vLLM's completions, and until
	// EOS or a full context for vLLM's chat, llama.cpp and TGI.
	DefaultMaxTokens int
	// Seed seeds the generated text. Two servers with the same Seed give
	// a request with the same "seed" field the same text.
	Seed int64
	// Tokenizer counts prompt tokens and builds output text. Nil means
	// tokenizer.New("builtin"); New resolves it, because loading can fail
	// and WithDefaults cannot.
	Tokenizer tokenizer.Tokenizer
	// ChatTemplate is the chat template a chat prompt is rendered with
	// before it is counted, as vLLM renders the served model's
	// (chattemplate.go): "llama-3.1" (Llama 3.1 Instruct), "qwen3", or
	// "none" for the messages' text alone. Default: the family the
	// served Model's id names ("meta-llama/Llama-3.1-8B-Instruct",
	// "Qwen/Qwen3-0.6B"), else "none", as for infermatrix-sim. It also
	// decides a completion prompt's BOS (Llama's).
	ChatTemplate string

	// Protocol behaviour.

	// Personality is the server whose wire format the simulator
	// mimics: "vllm" (the default), "llama.cpp" or "tgi". See the
	// package documentation for what each changes.
	Personality string
	// TokensPerEvent is how many tokens each streamed event carries.
	// Default 1, as every mimicked server sends; more stands for a
	// server that sends several tokens a step (speculative decoding).
	TokensPerEvent int
	// EOSMeanTokens is the mean of the geometric distribution from
	// which a request's natural output length is drawn, as if the model
	// sampled an end-of-sequence token. Zero, the default, disables
	// EOS: every request runs to its max_tokens, so that a benchmark
	// gets exactly the lengths it asked for.
	EOSMeanTokens int
	// Faults are injected into requests that do not choose their own
	// with the X-Sim-Fault header: each request draws one rule, or
	// none, with the rules' probabilities. Their sum must not exceed 1.
	Faults []FaultRule
	// GroundTruth, when not nil, receives one JSON line per request as
	// it ends, with the server's own token times; the format is
	// documented on truthRecord in groundtruth.go. Each line is one
	// Write, and writes are serialised, so the writer need not be safe
	// for concurrent use. Server.GroundTruthErr reports a failed write.
	GroundTruth io.Writer
}

// The defaults WithDefaults applies. They stay unexported because Config's
// field docs are their reference and callers express intent through Config.
const (
	defaultModel       = "infermatrix-sim"
	defaultMaxModelLen = 32768
	defaultTTFT        = 20 * time.Millisecond
	defaultITL         = 5 * time.Millisecond
)

// WithDefaults returns c with every zero field replaced by its default, so
// that callers (and manifests) can see the configuration a server actually
// runs with. It leaves a nil Tokenizer nil; New resolves it.
func (c Config) WithDefaults() Config {
	if c.Model == "" {
		c.Model = defaultModel
	}
	if c.MaxModelLen == 0 {
		c.MaxModelLen = defaultMaxModelLen
		if c.Engine != nil {
			c.MaxModelLen = c.Engine.MaxModelLen
			if c.MaxModelLen == 0 {
				c.MaxModelLen = c.Engine.Model.MaxPosition
			}
		}
	}
	if c.ChatTemplate == "" {
		c.ChatTemplate = chatTemplateFor(c.Model)
	}
	if c.TTFT == 0 {
		c.TTFT = defaultTTFT
	}
	if c.ITL == 0 {
		c.ITL = defaultITL
	}
	if c.Personality == "" {
		c.Personality = PersonalityVLLM
	}
	if c.TokensPerEvent == 0 {
		c.TokensPerEvent = 1
	}
	if len(c.Faults) > 0 {
		// Copy, so that filling defaults does not write to the
		// caller's slice.
		faults := make([]FaultRule, len(c.Faults))
		for i, f := range c.Faults {
			faults[i] = f.withDefaults()
		}
		c.Faults = faults
	}
	return c
}

// validate reports the first setting that no server could honour. It runs
// after WithDefaults, so zero values have already been replaced.
func (c Config) validate() error {
	var errs []error
	if c.MaxModelLen < 1 {
		errs = append(errs, fmt.Errorf("max model len %d: must be positive", c.MaxModelLen))
	}
	if c.TTFT < 0 {
		errs = append(errs, fmt.Errorf("ttft %v: must not be negative", c.TTFT))
	}
	if c.ITL < 0 {
		errs = append(errs, fmt.Errorf("itl %v: must not be negative", c.ITL))
	}
	if c.DefaultMaxTokens < 0 {
		errs = append(errs, fmt.Errorf("default max tokens %d: must not be negative", c.DefaultMaxTokens))
	}
	if err := checkChatTemplate(c.ChatTemplate); err != nil {
		errs = append(errs, err)
	}
	if _, err := parsePersonality(c.Personality); err != nil {
		errs = append(errs, err)
	}
	if c.TokensPerEvent < 1 {
		errs = append(errs, fmt.Errorf("tokens per event %d: must be positive", c.TokensPerEvent))
	}
	if c.EOSMeanTokens < 0 {
		errs = append(errs, fmt.Errorf("eos mean tokens %d: must not be negative", c.EOSMeanTokens))
	}
	errs = append(errs, checkFaultRules(c.Faults)...)
	return errors.Join(errs...)
}
