package workload

import (
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/infermatrix/infermatrix/metrics"
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
	co.once.Do(func() { co.c = &corpus{tok: tok, ids: encodeCorpus(tok, corpusText)} })
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
// edge falls inside a character. Text that starts or ends a message has no
// whitespace there (trim), as a chat template would cut it. If no exact
// text is found within a few tries (in practice it always is), the closest
// is returned with its true count, which the request's record then shows.
func (c *corpus) exact(prefix string, prefixN, off, n int, trim edges) (string, int) {
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
		// Chat templates trim a message (Llama 3's content|trim): a
		// prompt that began or ended in whitespace would reach the
		// model shorter than counted here. Such a window is moved on
		// by a token, as one cut inside a character is; its trimmed
		// text stays a candidate in case no other fits.
		full := prefix + text
		trimmed := full
		if trim&trimEnd != 0 {
			trimmed = strings.TrimRightFunc(trimmed, unicode.IsSpace)
		}
		if trim&trimStart != 0 && prefix == "" {
			trimmed = strings.TrimLeftFunc(trimmed, unicode.IsSpace)
		}
		if trimmed != full && trim&fixedStart == 0 {
			if got := c.tok.Count(trimmed); bestCount < 0 || abs(got-n) < abs(bestCount-n) {
				bestText, bestCount = trimmed, got
			}
			off++
			continue
		}
		// A window whose start may not move is trimmed where it stands,
		// and widened past the whitespace if that leaves it short.
		full = trimmed
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

// edges says which ends of a corpus cut must not be whitespace: those
// that start or end a message, which chat templates trim (Llama 3's
// content|trim), so that the model would get a token fewer than counted.
// A block of a Mooncake prompt, or a cut of one, keeps its edges: blocks
// are joined, and a cut must stay a prefix of its block.
type edges uint8

const (
	trimStart edges = 1 << iota
	trimEnd
	// fixedStart says the window must start at the offset given (a cut
	// of a block): whitespace is trimmed off it in place, not avoided by
	// moving the window on.
	fixedStart
	keepEdges edges = 0
	message         = trimStart | trimEnd
)

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Row is a planned row's workload: it turns the row into request bodies.
//
// Lengths are drawn from a generator seeded by the row's seed and the
// request's sequence number, so the same experiment sends the same lengths
// on every run whatever the scheduling.
//
// Text is another matter: a prompt the server has seen before is served
// from its prefix cache, and a row that finds its prompts there measures
// the cache, not the server. So, unless the row says otherwise
// (unique_prompts), every prompt starts with a tag unique to the request,
// its row and the run (see tag): no two prompts of a run share a cacheable
// prefix beyond what the row shares on purpose (a declared prefix, a
// trace's hash-id blocks), whatever the order rows run in, and no run
// shares one with another. The corpus window that fills the rest of the
// prompt is drawn from the same per-row, per-run seed.
type Row struct {
	row   *schema.PlannedRow
	api   string
	model string
	// corpus is the text prompts are cut from, encoded with the row's
	// tokenizer.
	corpus *corpus
	// seed draws lengths, arrivals and cancellations: the row's seed and
	// id, the same on every run.
	seed uint64
	// text draws what prompts say: seed mixed with the run's nonce for
	// unique_prompts per_run, seed alone otherwise.
	text  uint64
	extra []byte // the row's body fields, as `"k":v,...` ready to splice in
	// bodies are the row's request bodies cut where the text and
	// max_tokens go, non-streamed and streamed (body.go); nil where a
	// template could not be made.
	bodies   [2]*bodyTemplate
	prefixes []string
	prefixN  int
	// src holds the prompts of a dataset or trace row, read from its file
	// before the row's load starts; blocks builds the text of Mooncake
	// lines from their hash ids.
	src    *source
	blocks *blockBuilder
}

// New is the workload of a row, for the api (chat, completions,
// embeddings or rerank) and model the runner found; tok is the row's
// tokenizer and nonce the run's, which keeps prompts of one run out of
// another's cache. It reads a dataset or trace file, which the runner has
// checked with CheckSources: an error names the file, not the row.
func New(row *schema.PlannedRow, api, model string, tok tokenizer.Tokenizer, nonce uint64) (*Row, error) {
	return NewTrial(row, api, model, tok, nonce, 0)
}

// NewTrial is the workload of trial k of a repeated row (0
// without repeat, and trial 1 is the same as 0). Trials send the same
// lengths, arrivals and cancellations (the seed is the row's), but their
// prompts' text differs, in every unique_prompts mode but off: a trial
// served from the cache an earlier trial filled would measure the cache,
// and its figures would not be another draw of the same row. A warm
// prefix stays the row's, the same in every trial, as it is meant to be
// cached.
func NewTrial(row *schema.PlannedRow, api, model string, tok tokenizer.Tokenizer, nonce uint64, trial int) (*Row, error) {
	w := &Row{row: row, api: api, model: model, corpus: corpusFor(tok)}
	if api == "chat" || api == "completions" {
		w.bodies = bodyTemplates(api, model)
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s", row.Seed, row.ID)
	w.seed = h.Sum64()
	w.text = w.seed
	if row.UniquePrompts == "" || row.UniquePrompts == schema.UniquePerRun {
		w.text = splitmix64(w.seed ^ nonce)
	}
	if trial > 1 && row.UniquePrompts != schema.UniqueOff {
		w.text = splitmix64(w.text ^ uint64(trial)*0xbf58476d1ce4e5b9)
	}
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
		// Blocks are the row's own: two rows replaying one trace must not
		// find each other's blocks in the cache. With unique_prompts off
		// they are the same in every row and every run.
		scope := w.text
		if row.UniquePrompts == schema.UniqueOff {
			scope = 0
		}
		w.blocks = newBlockBuilder(w.corpus, bs, scope)
	}
	if len(row.Body) > 0 {
		b, err := json.Marshal(row.Body)
		if err != nil {
			return nil, fmt.Errorf("row %s: body: %w", row.ID, err)
		}
		w.extra = b[1 : len(b)-1] // strip the braces
	}
	if p := row.Prefix; p != nil {
		// Warm prefixes are the same on every run of the experiment (the
		// point is a cache that holds them); cold ones are new each run
		// unless unique_prompts says otherwise. Either way they are the
		// row's own.
		pseed := w.seed ^ 0x9e3779b97f4a7c15
		if !p.Warm {
			pseed = w.text ^ 0x9e3779b97f4a7c15
		}
		rng := rand.New(rand.NewPCG(pseed, 1))
		for i := 0; i < p.Distinct; i++ {
			// A prefix starts the message; its end is followed by
			// the request's own text.
			text, got := w.corpus.exact("", 0, rng.IntN(len(w.corpus.ids)), p.Length, trimStart)
			if got != p.Length {
				return nil, fmt.Errorf("row %s: could not build a prefix of %d tokens (got %d)", row.ID, p.Length, got)
			}
			w.prefixes = append(w.prefixes, text)
		}
		w.prefixN = p.Length
	}
	return w, nil
}

// Seed is the row's own seed (its seed and id, the same on every run),
// which the runner's arrivals and cancellations draw from, so that a
// rerun sends the same schedule as well as the same lengths.
func (w *Row) Seed() uint64 { return w.seed }

// Schedule is when each request of a trace row is due, from the row's
// load start: request i is entry i. It is nil for other rows, whose
// arrivals the runner draws.
func (w *Row) Schedule() []time.Duration {
	if w.src == nil {
		return nil
	}
	return w.src.schedule
}

// PrimePrompt is priming request i of a row with warm prefixes
// (schema.PlannedRow.PrimingRequests): prefix i alone, generating a
// single token, sent before the row's warmup so that the server's prefix
// cache holds every prefix.
func (w *Row) PrimePrompt(i int) Prompt {
	return Prompt{text: w.prefixes[i], InTokens: w.prefixN, Requested: w.prefixN, MaxTokens: 1, Shared: w.prefixN}
}

// Prompt is one request's input, built by Prompt or TurnPrompt and
// encoded by Body. Its exported fields are the counts a request's record
// carries (metrics.Record's InputTokens, OutputTokens, SharedTokens and
// Inputs), which the runner fills in; the text itself only Body needs.
type Prompt struct {
	text string
	// messages, when set, are sent instead of text as one user message:
	// a dataset line's own chat messages, for the chat API.
	messages  []openai.ChatCompletionMessage
	InTokens  int // client tokenizer's count of what is sent
	Requested int // input length asked for
	MaxTokens int // output length asked for; 0 sends no max_tokens
	// Shared is how many leading tokens the row shares with other
	// requests on purpose (Record.SharedTokens).
	Shared int
	// Inputs are an embeddings request's texts or a rerank request's
	// documents (the record counts them), and query a rerank request's
	// query (pooledPrompt).
	Inputs []string
	query  string
}

// goldenStride spreads successive window offsets across the corpus, so
// that the text after the tags differs too.
const goldenStride = 0.6180339887498949

// rng is the generator of one request's draws, a function of the row's
// seed and the request's sequence number only.
func (w *Row) rng(seq int64) *rand.Rand {
	return rand.New(rand.NewPCG(w.seed, uint64(seq)))
}

// tagDigits is the length of a full tag's hex number: 64 bits, so that
// within a row, where the number is a bijection of the sequence number,
// no two tags are equal, and across rows and runs two are equal with
// probability 2⁻⁶⁴.
const tagDigits = 16

// tag is the text request seq's prompt starts with, so that it shares no
// cacheable prefix with any other prompt: a 64-bit number in hex, drawn
// from the row's text seed and seq, then ": ". A server's cache matches
// prompts from their first token; prompts that differ there share nothing
// (a chat template's own tokens before the message aside, which the cache
// check allows for). The tag is shortened to fit a prompt of room tokens,
// and left out below a few tokens, where no server caches anything
// anyway. With unique_prompts off there is no tag.
func (w *Row) tag(seq int64, room int) string {
	if w.row.UniquePrompts == schema.UniqueOff || room < 4 {
		return ""
	}
	digits := tagDigits
	// Hex digits take roughly one token per two or three; keep the tag
	// to about a third of the room.
	if room < 24 {
		digits = max(2, room/2)
	}
	v := splitmix64(w.text + uint64(seq)*0x9e3779b97f4a7c15)
	// The first digits of v's 16 in hex (%016x), then ": ", in one
	// allocation.
	var raw [8]byte
	var b [16 + 2]byte
	binary.BigEndian.PutUint64(raw[:], v)
	hex.Encode(b[:16], raw[:])
	b[digits], b[digits+1] = ':', ' '
	return string(b[:digits+2])
}

// Prompt is request seq's input: synthetic text of the row's lengths, a
// dataset or trace entry, or an embeddings or rerank request's inputs.
// The same seq gives the same prompt, so the runner may build a request
// ahead of its time.
func (w *Row) Prompt(seq int64) Prompt {
	if metrics.IsPooling(w.api) {
		return w.pooledPrompt(seq)
	}
	if w.src != nil {
		return w.sourcePrompt(seq)
	}
	rng := w.rng(seq)
	in := sampleLength(rng, w.row.Input)
	out := sampleLength(rng, w.row.Output)
	n := len(w.corpus.ids)
	base := int(w.text % uint64(n))
	off := (base + int(math.Mod(float64(seq)*goldenStride*float64(n), float64(n)))) % n
	prefix, prefixN := "", 0
	if len(w.prefixes) > 0 {
		// The prefixes are taken in turn, not drawn at random: with as
		// many prefixes as requests, every request's is its own and the
		// row is truly cold. Random draws of 40 from 40 repeat a third of
		// them, and the server answered those from its cache: a "cold"
		// row measured at a 30% hit rate, which the server's own
		// prefix-cache counters showed.
		prefix, prefixN = w.prefixes[int(seq%int64(len(w.prefixes)))], w.prefixN
	}
	// The tag follows the shared prefix: the prefix is what the row
	// shares, and everything after it is the request's own.
	head, headN := prefix, prefixN
	if t := w.tag(seq, in-prefixN); t != "" {
		head += t
		headN += w.corpus.tok.Count(t)
	}
	text, got := w.corpus.exact(head, headN, off, in, message)
	return Prompt{text: text, InTokens: got, Requested: in, MaxTokens: out, Shared: prefixN}
}

// sourcePrompt is request seq of a dataset or trace row. A dataset is used
// in order and wraps around when the row sends more requests than it has;
// a trace's requests are its entries, one each.
//
// A dataset prompt asked for no particular length: the input length
// requested is its own count, tag included. The output length is the
// row's output_tokens when it has one (drawn as for synthetic prompts),
// else the file's (a JSONL line's max_tokens, a ShareGPT reply's count, a
// Mooncake output_length), else none is sent and the server decides.
//
// A dataset's text gets the request's tag in front (in front of the first
// message's, for a messages line), so that a dataset sent by several rows,
// or wrapped around within one, is not answered from the cache. With
// unique_prompts off it is sent verbatim and counted as shared. A Mooncake
// prompt gets no tag: its hash ids say what it shares, and its blocks are
// the row's own (see New).
func (w *Row) sourcePrompt(seq int64) Prompt {
	e := w.src.entries[seq%int64(len(w.src.entries))]
	var p Prompt
	tag := w.tag(seq, math.MaxInt32) // a dataset prompt's length is its own
	switch {
	case e.mooncake:
		text, got, shared := w.blocks.build(e.hashIDs, e.input, uint64(seq))
		p = Prompt{text: text, InTokens: got, Requested: e.input, Shared: shared}
	case e.messages != nil:
		// What a client can count: the server adds its chat template's
		// tokens, which its usage shows.
		msgs := e.messages
		if tag != "" && len(msgs) > 0 {
			msgs = append([]openai.ChatCompletionMessage(nil), e.messages...)
			msgs[0].Content = tag + msgs[0].Content
		}
		n := 0
		for _, m := range msgs {
			n += w.corpus.tok.Count(m.Content)
		}
		p = Prompt{messages: msgs, InTokens: n, Requested: n}
	default:
		text := tag + e.text
		n := w.corpus.tok.Count(text)
		p = Prompt{text: text, InTokens: n, Requested: n}
	}
	if w.row.UniquePrompts == schema.UniqueOff {
		p.Shared = p.InTokens
	}
	p.MaxTokens = e.output
	if out := w.row.Output; out.Mean > 0 || len(out.Values) > 0 {
		p.MaxTokens = sampleLength(w.rng(seq), out)
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

// Body builds the JSON request body with go-openai's request types, then
// splices in the row's extra fields. Validation has already rejected extra
// fields that collide with the ones set here.
func (w *Row) Body(p Prompt, stream bool) ([]byte, error) {
	if metrics.IsPooling(w.api) {
		return w.pooledBody(p)
	}
	if t := w.bodies[b2i(stream)]; t != nil && p.messages == nil && p.text != "" && p.MaxTokens > 0 {
		return w.spliceInto(t.body(p.text, p.MaxTokens, len(w.extra)+1)), nil // body.go
	}
	var b []byte
	var err error
	var opts *openai.StreamOptions
	if stream {
		opts = &openai.StreamOptions{IncludeUsage: true}
	}
	if w.api == "completions" {
		b, err = json.Marshal(openai.CompletionRequest{
			Model: w.model, Prompt: p.text, MaxTokens: p.MaxTokens, Stream: stream, StreamOptions: opts,
		})
	} else {
		msgs := p.messages
		if msgs == nil {
			msgs = []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: p.text}}
		}
		b, err = json.Marshal(chatRequest(w.model, msgs, p.MaxTokens, stream, opts))
	}
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return w.splice(b), nil
}

// splice appends the row's extra body fields to an encoded request.
func (w *Row) splice(b []byte) []byte {
	if len(w.extra) == 0 {
		return b
	}
	out := make([]byte, 0, len(b)+len(w.extra)+1)
	out = append(out, b[:len(b)-1]...)
	out = append(out, ',')
	out = append(out, w.extra...)
	out = append(out, '}')
	return out
}

// spliceInto appends the row's extra body fields to an encoded request
// that has room for them, in place.
func (w *Row) spliceInto(b []byte) []byte {
	if len(w.extra) == 0 {
		return b
	}
	b = append(b[:len(b)-1], ',')
	b = append(b, w.extra...)
	return append(b, '}')
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

// primeBodies returns one request per prefix, for warm prefixes: sent before
// the row's warmup so the server's prefix cache holds every prefix.
func (w *Row) primeBodies(stream bool) ([][]byte, error) {
	if w.row.Prefix == nil || !w.row.Prefix.Warm {
		return nil, nil
	}
	var out [][]byte
	for _, px := range w.prefixes {
		b, err := w.Body(Prompt{text: px, MaxTokens: 1}, stream)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
