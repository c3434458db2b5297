// Package sim is infermatrix's built-in simulated inference server: an
// OpenAI-compatible HTTP server, shaped like vLLM's, that generates text
// without a model or a GPU.
//
// It exists so that a newcomer without a GPU can run real experiments, and so
// that the project's own tests have a realistic target on loopback. It speaks
// the parts of the protocol a load generator depends on: POST
// /v1/chat/completions and /v1/completions, streaming (server-sent events)
// and not, usage reporting, vLLM-shaped errors, GET /v1/models, /health, and
// a Prometheus /metrics endpoint with vLLM's metric names.
//
// # Token accounting
//
// The server counts prompt tokens with the same tokenizer package the load
// generator uses, so that usage.prompt_tokens agrees with what the client
// meant to send. For chat, prompt_tokens is the sum over messages of the
// token count of each message's text; no chat template is applied, because a
// template's overhead depends on the model and would make the server and the
// client disagree for no benefit to a benchmark. For completions it is the
// token count of the prompt (the sum over the parts when the prompt is an
// array of strings, or the number of ids when it is an array of token ids).
//
// Every request generates exactly its max_tokens tokens and finishes with
// finish_reason "length". The text is drawn, with a seeded random generator,
// from a pool of tokens that each decode to a space and a short lowercase
// word and encode back to themselves, so that re-tokenizing the generated
// text gives exactly usage.completion_tokens. A client that measures output
// by tokenizing what it received therefore agrees with the server.
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
package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/infermatrix/infermatrix/tokenizer"
)

// Config describes one simulated server. The zero value is usable: every
// zero field takes the default WithDefaults documents.
type Config struct {
	// Model is the served model id, the only value a request's "model"
	// field may name. Default "infermatrix-sim".
	Model string
	// MaxModelLen is the context limit in tokens: a request's prompt
	// tokens plus its max_tokens must not exceed it. Default 32768.
	MaxModelLen int
	// TTFT is the constant time from a request's arrival to its first
	// token. Default 20ms. Zero selects the default, so a run that wants
	// effectively no delay sets a nanosecond.
	TTFT time.Duration
	// ITL is the constant gap between consecutive tokens of a request.
	// Default 5ms; zero selects the default, as for TTFT.
	ITL time.Duration
	// DefaultMaxTokens is the output length of a request that sets
	// neither max_tokens nor max_completion_tokens, capped so that the
	// request still fits MaxModelLen. Default 256.
	DefaultMaxTokens int
	// Seed seeds the generated text. Two servers with the same Seed give
	// a request with the same "seed" field the same text.
	Seed int64
	// Tokenizer counts prompt tokens and builds output text. Nil means
	// tokenizer.New("builtin"); New resolves it, because loading can fail
	// and WithDefaults cannot.
	Tokenizer tokenizer.Tokenizer
}

// The defaults WithDefaults applies. They stay unexported because Config's
// field docs are their reference and callers express intent through Config.
const (
	defaultModel            = "infermatrix-sim"
	defaultMaxModelLen      = 32768
	defaultTTFT             = 20 * time.Millisecond
	defaultITL              = 5 * time.Millisecond
	defaultDefaultMaxTokens = 256
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
	}
	if c.TTFT == 0 {
		c.TTFT = defaultTTFT
	}
	if c.ITL == 0 {
		c.ITL = defaultITL
	}
	if c.DefaultMaxTokens == 0 {
		c.DefaultMaxTokens = defaultDefaultMaxTokens
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
	if c.DefaultMaxTokens < 1 {
		errs = append(errs, fmt.Errorf("default max tokens %d: must be positive", c.DefaultMaxTokens))
	}
	return errors.Join(errs...)
}
