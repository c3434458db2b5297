// Package tokenizer counts tokens the way real models do, with no network.
//
// Token counts are half of every throughput figure infermatrix reports, so the
// client must count with a real tokenizer, not a words-times-1.3 estimate. The
// built-in tokenizer is OpenAI's o200k_base, loaded from files compiled into
// the binary; any Hugging Face tokenizer.json with a byte-level BPE model
// (GPT-2, Llama 3, Qwen) can be named by path instead, and is then encoded
// exactly as the Hugging Face tokenizers library encodes it, which is what a
// vLLM or TGI server counts.
//
// Both the load generator and the simulated server count with this package, so
// that the server's usage.prompt_tokens agrees with what the client meant to
// send.
//
// The Hugging Face support is a small byte-level BPE engine of its own
// (hf.go and the files it names) rather than a binding, so that the binary
// stays pure Go. Its tests compare it id for id with the Hugging Face library
// on real tokenizers (see testdata/groundtruth), because a count that is
// merely close would make every throughput figure quietly wrong. The builtin
// o200k_base runs on the same engine, with its own pre-tokenizer, because
// counting through tiktoken-go took twenty to thirty times as long
// (builtin.go); its tests compare it id for id with tiktoken-go.
package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Tokenizer turns text into token ids and back.
//
// Implementations are safe for concurrent use: one instance serves every
// worker of a run.
type Tokenizer interface {
	// Name identifies the tokenizer in manifests ("builtin:o200k_base",
	// or the path a tokenizer was loaded from).
	Name() string
	// Encode returns the ids of text as the model's server would count
	// them as prompt content. For the builtin o200k_base, special-token
	// text such as "<|endoftext|>" is ordinary text (tiktoken's
	// encode_ordinary), since OpenAI's API never lets prompt text become
	// a special token. For a Hugging Face tokenizer, added tokens in the
	// text ("<|im_end|>" for Qwen) are recognized as single tokens, as the
	// tokenizers library's encode(text, add_special_tokens=False) does and
	// so as a vLLM server counts them; no BOS or other template tokens are
	// added.
	Encode(text string) []int
	// Decode returns the text of ids, special tokens included. For valid
	// UTF-8 s, Decode(Encode(s)) == s, except that a Hugging Face
	// tokenizer with a normalizer returns the normalized text (NFC for
	// Qwen), which is what the model saw.
	Decode(ids []int) string
	// Count is len(Encode(text)), possibly without building the slice.
	Count(text string) int
}

// Builtin is the name experiment files use for the compiled-in tokenizer.
const Builtin = "builtin"

var (
	cacheMu sync.Mutex
	cache   = map[string]Tokenizer{}
)

// New returns the tokenizer an experiment names:
//
//   - "builtin" (or "") for o200k_base;
//   - the path of a Hugging Face tokenizer.json (byte-level BPE models:
//     GPT-2, Llama 3, Qwen, ...);
//   - a directory holding a tokenizer.json, as a model downloaded from the
//     Hugging Face hub is laid out, or else OpenAI's original GPT-2 files
//     encoder.json and vocab.bpe.
//
// The tokenizer's Name is spec as given. Tokenizers are cached by spec,
// because loading one costs tens to hundreds of milliseconds and hundreds of
// rows may name the same one.
func New(spec string) (Tokenizer, error) {
	if spec == "" {
		spec = Builtin
	}
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if t, ok := cache[spec]; ok {
		return t, nil
	}
	var (
		t   Tokenizer
		err error
	)
	switch {
	case spec == Builtin:
		t, err = newBuiltin()
	case strings.HasSuffix(spec, ".json"):
		t, err = LoadHuggingFace(spec)
	default:
		t, err = loadDir(spec)
	}
	if err != nil {
		return nil, err
	}
	cache[spec] = t
	return t, nil
}

// loadDir loads the tokenizer files in dir, preferring tokenizer.json.
func loadDir(dir string) (Tokenizer, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %q: want %q, a tokenizer.json or a directory holding one: %w", dir, Builtin, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("tokenizer %q: want %q, a tokenizer.json or a directory holding one", dir, Builtin)
	}
	if exists(filepath.Join(dir, "tokenizer.json")) {
		return loadHuggingFace(filepath.Join(dir, "tokenizer.json"), dir)
	}
	if exists(filepath.Join(dir, "encoder.json")) && exists(filepath.Join(dir, "vocab.bpe")) {
		return loadGPT2(dir, dir)
	}
	return nil, fmt.Errorf("tokenizer %q: directory has neither tokenizer.json nor encoder.json and vocab.bpe", dir)
}

func exists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir()
}
