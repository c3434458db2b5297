package runner

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/tokenizer"
	openai "github.com/sashabaranov/go-openai"
)

//go:embed corpus/moby-dick.txt
var corpusText string

// corpus is the prompt corpus encoded with one tokenizer.
type corpus struct {
	tok tokenizer.Tokenizer
	ids []int
}

var corpora sync.Map // tokenizer name → *corpusOnce

type corpusOnce struct {
	once sync.Once
	c    *corpus
}

// corpusFor encodes the corpus with tok, once per tokenizer per process.
func corpusFor(tok tokenizer.Tokenizer) *corpus {
	v, _ := corpora.LoadOrStore(tok.Name(), &corpusOnce{})
	co := v.(*corpusOnce)
	co.once.Do(func() { co.c = &corpus{tok: tok, ids: tok.Encode(corpusText)} })
	return co.c
}

// window returns the ids of k tokens starting at off, wrapping around the
// end of the corpus (repeating it for prompts longer than the corpus).
func (c *corpus) window(off, k int) []int {
	out := make([]int, 0, k)
	n := len(c.ids)
	off %= n
	for len(out) < k {
		take := min(k-len(out), n-off)
		out = append(out, c.ids[off:off+take]...)
		off = 0
	}
	return out
}

// exact returns text that the tokenizer counts as exactly n tokens: prefix
// (of prefixN tokens) followed by a corpus window starting near token offset
// off.
//
// Decoding a window of token ids and re-encoding the text does not always
// give the same count back: merges can form across what were separate
// pieces, at the window's edges and where it meets the prefix, and an edge
// can split a multi-byte character. So the window is widened or narrowed by
// the difference until the count is exact, and moved by one token when an
// edge falls inside a character. If no exact text is found within a few
// tries (in practice it always is), the closest is returned with its true
// count, which the request's record then shows.
func (c *corpus) exact(prefix string, prefixN, off, n int) (string, int) {
	bestText, bestCount := "", -1
	k := n - prefixN
	for attempt := 0; attempt < 12 && k > 0; attempt++ {
		text := c.tok.Decode(c.window(off, k))
		// An edge inside a character decodes to invalid UTF-8 (tiktoken)
		// or to U+FFFD (Hugging Face); the corpus has neither.
		if !utf8.ValidString(text) || strings.ContainsRune(text, utf8.RuneError) {
			off++
			continue
		}
		full := prefix + text
		got := c.tok.Count(full)
		if bestCount < 0 || abs(got-n) < abs(bestCount-n) {
			bestText, bestCount = full, got
		}
		if got == n {
			break
		}
		k += n - got
	}
	return bestText, bestCount
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// workload turns a planned row into request bodies.
//
// Lengths are drawn from a generator seeded by the row's seed and the
// request's sequence number, so the same experiment sends the same lengths
// on every run whatever the scheduling. The text windows, though, are drawn
// afresh on every run (seeded also by the run's nonce): a rerun against the
// same server must not find its prompts in the server's prefix cache.
type workload struct {
	row      *schema.PlannedRow
	api      string
	model    string
	corpus   *corpus
	seed     uint64
	nonce    uint64
	extra    []byte // the row's body fields, as `"k":v,...` ready to splice in
	prefixes []string
	prefixN  int
	// src holds the prompts of a dataset or trace row, read from its file
	// before the row's load starts; blocks builds the text of Mooncake
	// lines from their hash ids.
	src    *source
	blocks *blockBuilder
}

func newWorkload(row *schema.PlannedRow, api, model string, tok tokenizer.Tokenizer, nonce uint64) (*workload, error) {
	w := &workload{row: row, api: api, model: model, corpus: corpusFor(tok), nonce: nonce}
	src, err := loadSource(row, api, tok)
	if err != nil {
		return nil, err // it names the file; the caller names the row
	}
	if src != nil {
		w.src = src
		bs := schema.DefaultBlockSize
		if row.Trace != nil {
			bs = row.Trace.BlockSize
		}
		w.blocks = newBlockBuilder(w.corpus, bs, nonce)
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s", row.Seed, row.ID)
	w.seed = h.Sum64()
	if len(row.Body) > 0 {
		b, err := json.Marshal(row.Body)
		if err != nil {
			return nil, fmt.Errorf("row %s: body: %w", row.ID, err)
		}
		w.extra = b[1 : len(b)-1] // strip the braces
	}
	if p := row.Prefix; p != nil {
		// Warm prefixes are the same on every run of the experiment (the
		// point is a cache that holds them); cold ones are new each run.
		pseed := w.seed ^ 0x9e3779b97f4a7c15
		if !p.Warm {
			pseed ^= nonce
		}
		rng := rand.New(rand.NewPCG(pseed, 1))
		for i := 0; i < p.Distinct; i++ {
			text, got := w.corpus.exact("", 0, rng.IntN(len(w.corpus.ids)), p.Length)
			if got != p.Length {
				return nil, fmt.Errorf("row %s: could not build a prefix of %d tokens (got %d)", row.ID, p.Length, got)
			}
			w.prefixes = append(w.prefixes, text)
		}
		w.prefixN = p.Length
	}
	return w, nil
}

// prompt is one request's input.
type prompt struct {
	text string
	// messages, when set, are sent instead of text as one user message:
	// a dataset line's own chat messages, for the chat API.
	messages  []openai.ChatCompletionMessage
	inTokens  int // client tokenizer's count of what is sent
	requested int // input length asked for
	maxTokens int // output length asked for; 0 sends no max_tokens
}

// goldenStride spreads successive window offsets across the corpus so that
// no two requests of a row start at the same token (a shared first block
// would be a prefix-cache hit the row did not ask for).
const goldenStride = 0.6180339887498949

// rng is the generator of one request's draws, a function of the row's
// seed and the request's sequence number only.
func (w *workload) rng(seq int64) *rand.Rand {
	return rand.New(rand.NewPCG(w.seed, uint64(seq)))
}

func (w *workload) prompt(seq int64) prompt {
	if w.src != nil {
		return w.sourcePrompt(seq)
	}
	rng := w.rng(seq)
	in := sampleLength(rng, w.row.Input)
	out := sampleLength(rng, w.row.Output)
	n := len(w.corpus.ids)
	base := int(w.nonce % uint64(n))
	off := (base + int(math.Mod(float64(seq)*goldenStride*float64(n), float64(n)))) % n
	prefix := ""
	if len(w.prefixes) > 0 {
		prefix = w.prefixes[rng.IntN(len(w.prefixes))]
	}
	text, got := w.corpus.exact(prefix, w.prefixN, off, in)
	return prompt{text: text, inTokens: got, requested: in, maxTokens: out}
}

// sourcePrompt is request seq of a dataset or trace row. A dataset is used
// in order and wraps around when the row sends more requests than it has;
// a trace's requests are its entries, one each.
//
// A dataset prompt asked for no particular length: the input length
// requested is its own count. The output length is the row's output_tokens
// when it has one (drawn as for synthetic prompts), else the file's (a
// JSONL line's max_tokens, a ShareGPT reply's count, a Mooncake
// output_length), else none is sent and the server decides.
func (w *workload) sourcePrompt(seq int64) prompt {
	e := w.src.entries[seq%int64(len(w.src.entries))]
	var p prompt
	switch {
	case e.mooncake:
		text, got := w.blocks.build(e.hashIDs, e.input, uint64(seq))
		p = prompt{text: text, inTokens: got, requested: e.input}
	case e.messages != nil:
		// What a client can count: the server adds its chat template's
		// tokens, which its usage shows.
		n := 0
		for _, m := range e.messages {
			n += w.corpus.tok.Count(m.Content)
		}
		p = prompt{messages: e.messages, inTokens: n, requested: n}
	default:
		n := w.corpus.tok.Count(e.text)
		p = prompt{text: e.text, inTokens: n, requested: n}
	}
	p.maxTokens = e.output
	if out := w.row.Output; out.Mean > 0 || len(out.Values) > 0 {
		p.maxTokens = sampleLength(w.rng(seq), out)
	}
	return p
}

// sampleLength draws a length: from the explicit list, from a normal
// distribution clipped to [min, max], or the fixed mean.
func sampleLength(rng *rand.Rand, l schema.Length) int {
	if len(l.Values) > 0 {
		return l.Values[rng.IntN(len(l.Values))]
	}
	v := l.Mean
	if l.Stddev > 0 {
		v = int(math.Round(float64(l.Mean) + rng.NormFloat64()*l.Stddev))
	}
	v = max(v, max(l.Min, 1))
	if l.Max > 0 {
		v = min(v, l.Max)
	}
	return v
}

// body builds the JSON request body with go-openai's request types, then
// splices in the row's extra fields. Validation has already rejected extra
// fields that collide with the ones set here.
func (w *workload) body(p prompt, stream bool) ([]byte, error) {
	var b []byte
	var err error
	var opts *openai.StreamOptions
	if stream {
		opts = &openai.StreamOptions{IncludeUsage: true}
	}
	if w.api == "completions" {
		b, err = json.Marshal(openai.CompletionRequest{
			Model: w.model, Prompt: p.text, MaxTokens: p.maxTokens, Stream: stream, StreamOptions: opts,
		})
	} else {
		msgs := p.messages
		if msgs == nil {
			msgs = []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: p.text}}
		}
		b, err = json.Marshal(openai.ChatCompletionRequest{
			Model:         w.model,
			Messages:      msgs,
			MaxTokens:     p.maxTokens,
			Stream:        stream,
			StreamOptions: opts,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	if len(w.extra) > 0 {
		out := make([]byte, 0, len(b)+len(w.extra)+1)
		out = append(out, b[:len(b)-1]...)
		out = append(out, ',')
		out = append(out, w.extra...)
		out = append(out, '}')
		b = out
	}
	return b, nil
}

// primeBodies returns one request per prefix, for warm prefixes: sent before
// the row's warmup so the server's prefix cache holds every prefix.
func (w *workload) primeBodies(stream bool) ([][]byte, error) {
	if w.row.Prefix == nil || !w.row.Prefix.Warm {
		return nil, nil
	}
	var out [][]byte
	for _, px := range w.prefixes {
		b, err := w.body(prompt{text: px, maxTokens: 1}, stream)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
