package tokenizer

import (
	"fmt"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// o200k is OpenAI's current encoding (GPT-4o and later). It is the default
// because its vocabulary is close in size and behaviour to the Llama 3 and
// Qwen tokenizers most served models use.
const o200k = "o200k_base"

// builtin counts with tiktoken-go. It encodes with EncodeOrdinary, so text
// such as "<|endoftext|>" in a prompt is counted as the ordinary text it is:
// OpenAI's API never turns prompt text into special tokens. (Hugging Face
// tokenizers, by contrast, do recognize their added tokens in text; see
// LoadHuggingFace.) tiktoken-go's Tiktoken is safe for concurrent use.
type builtin struct{ enc *tiktoken.Tiktoken }

func newBuiltin() (Tokenizer, error) {
	// The offline loader reads the BPE ranks from files embedded in the
	// binary; without it tiktoken-go would download them at first use.
	tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
	enc, err := tiktoken.GetEncoding(o200k)
	if err != nil {
		return nil, fmt.Errorf("load builtin tokenizer %s: %w", o200k, err)
	}
	return builtin{enc: enc}, nil
}

func (b builtin) Name() string             { return Builtin + ":" + o200k }
func (b builtin) Encode(text string) []int { return b.enc.EncodeOrdinary(text) }
func (b builtin) Decode(ids []int) string  { return b.enc.Decode(ids) }
func (b builtin) Count(text string) int    { return len(b.enc.EncodeOrdinary(text)) }
