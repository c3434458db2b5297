package workload

import (
	"math"
	"strings"
	"sync"
	"time"
)

// maxBlockCacheBytes bounds the text cached by hash id. A long trace has
// hundreds of thousands of distinct ids; the cache only saves rebuilding a
// block, which is deterministic, so an evicted block comes back identical.
const maxBlockCacheBytes = 64 << 20

// blockBuilder turns Mooncake lengths and hash ids into prompt text.
//
// In a Mooncake trace, each hash id names one block of block-size tokens
// of the prompt, and requests whose prompts started with the same tokens
// in production have the same leading ids. The builder makes the text of
// hash id h a function of h (and of the run's nonce, so that a rerun
// against the same server does not find last run's blocks in its cache):
// a window of the corpus, at an offset drawn from h and from the row's scope, exactly block-size
// tokens long. Prompts with equal leading ids therefore have byte-identical
// leading text, and a server's prefix cache hits as it did in production.
type blockBuilder struct {
	corpus *corpus
	size   int
	nonce  uint64

	mu     sync.Mutex
	blocks map[int64]string
	bytes  int
}

func newBlockBuilder(c *corpus, size int, nonce uint64) *blockBuilder {
	return &blockBuilder{corpus: c, size: size, nonce: nonce, blocks: map[int64]string{}}
}

// offset is where in the corpus the text of hash id h starts.
func (b *blockBuilder) offset(h int64) int {
	return int(splitmix64(uint64(h)^b.nonce^0x6a09e667f3bcc908) % uint64(len(b.corpus.ids)))
}

// block returns the text of hash id h: exactly size tokens on its own.
func (b *blockBuilder) block(h int64) string {
	b.mu.Lock()
	text, ok := b.blocks[h]
	b.mu.Unlock()
	if ok {
		return text
	}
	text, _ = b.corpus.exact("", 0, b.offset(h), b.size, keepEdges)
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.blocks[h]; !ok {
		for k, v := range b.blocks {
			if b.bytes+len(text) <= maxBlockCacheBytes {
				break
			}
			delete(b.blocks, k)
			b.bytes -= len(v)
		}
		b.blocks[h] = text
		b.bytes += len(text)
	}
	return text
}

// build returns a prompt of exactly input tokens (with its true count, in
// the rare case no exact text is found) for a request with these hash ids,
// and how many of its leading tokens come from hash-id blocks: the part
// the trace says other requests share.
//
// The leading ids become their blocks verbatim. The last piece is cut from
// the corpus so that the whole prompt counts exactly input tokens: from
// the last id's offset when the ids cover the prompt, which makes a
// truncated last block a prefix of that block's full text; from an offset
// unique to the request (unique) when the ids stop short of input, since
// tokens no id names were shared with no other request. Joining blocks can
// merge or split a token at the seam, which the last piece absorbs; should
// the seams alone overshoot, one verbatim block fewer is tried.
func (b *blockBuilder) build(ids []int64, input int, unique uint64) (string, int, int) {
	nblocks := (input + b.size - 1) / b.size
	verbatim := min(len(ids), nblocks-1)
	bestText, bestCount, bestShared := "", -1, 0
	for j := verbatim; j >= 0; j-- {
		var sb strings.Builder
		for _, h := range ids[:j] {
			sb.WriteString(b.block(h))
		}
		off := int(splitmix64(unique^b.nonce^0xbb67ae8584caa73b) % uint64(len(b.corpus.ids)))
		if j < len(ids) {
			off = b.offset(ids[j])
		}
		// The prompt ends the message: no whitespace at its end. A cut
		// of the next block must start where the block does.
		trim := trimEnd
		if j < len(ids) {
			trim |= fixedStart
		}
		text, got := b.corpus.exact(sb.String(), j*b.size, off, input, trim)
		shared := j * b.size
		if j < len(ids) {
			shared = got // the rest is a cut of the next id's block
		}
		if got == input {
			return text, got, shared
		}
		if got >= 0 && (bestCount < 0 || abs(got-input) < abs(bestCount-input)) {
			bestText, bestCount, bestShared = text, got, shared
		}
	}
	return bestText, max(bestCount, 0), bestShared
}

// traceSchedule returns when each request of a trace is due, from the
// row's load start: its timestamp (milliseconds) divided by the speed-up. Times are computed from each timestamp alone,
// never accumulated from gaps, so no rounding drifts over a long trace; an
// open-loop dispatcher sends each request at its time whatever happened
// to earlier ones.
func traceSchedule(timestampsMS []float64, speedup float64) []time.Duration {
	if speedup <= 0 {
		speedup = 1
	}
	out := make([]time.Duration, len(timestampsMS))
	for i, ms := range timestampsMS {
		out[i] = time.Duration(math.Round(ms * float64(time.Millisecond) / speedup))
	}
	return out
}
