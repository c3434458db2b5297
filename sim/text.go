package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/infermatrix/infermatrix/tokenizer"
)

// tokenPool is the set of tokens generated text is drawn from. Each decodes
// to a space followed by 2 to 10 lowercase ASCII letters and encodes back to
// exactly its own id. Byte-level BPE tokenizers split text before every
// space-led word, so a concatenation of such tokens re-tokenizes to the same
// tokens, one per word: the reported completion_tokens is then exactly what a
// client counts in the text it received. The texts also need no JSON
// escaping, which keeps the streaming hot path to plain appends.
type tokenPool struct {
	ids   []int
	texts []string
}

const (
	// poolCap bounds the pool. Variety beyond a few thousand words buys
	// nothing, and each candidate costs an Encode to verify, which adds up
	// over a 200k vocabulary, especially under the race detector.
	poolCap = 4096
	// maxScanID and maxEmptyRun bound the scan of a vocabulary whose size
	// the Tokenizer interface does not expose: ids are tried in order
	// until poolCap tokens are found, a long run of ids decodes to
	// nothing (past the end of the vocabulary), or maxScanID is reached.
	maxScanID   = 1 << 20
	maxEmptyRun = 1 << 16
)

var (
	poolMu    sync.Mutex
	poolCache = map[string]*tokenPool{}
)

// poolFor returns the pool of tok, building it on first use. Pools are cached
// by tokenizer name, because building one costs hundreds of milliseconds and
// tests start many servers with the same tokenizer.
func poolFor(tok tokenizer.Tokenizer) (*tokenPool, error) {
	name := tok.Name()
	poolMu.Lock()
	defer poolMu.Unlock()
	if p, ok := poolCache[name]; ok {
		return p, nil
	}
	p, err := buildPool(tok)
	if err != nil {
		return nil, err
	}
	poolCache[name] = p
	return p, nil
}

var errEmptyPool = errors.New("no token decodes to a space and a short lowercase word")

func buildPool(tok tokenizer.Tokenizer) (*tokenPool, error) {
	p := &tokenPool{}
	empty := 0
	for id := 0; id < maxScanID && len(p.ids) < poolCap && empty < maxEmptyRun; id++ {
		text := safeDecode(tok, id)
		if text == "" {
			empty++
			continue
		}
		empty = 0
		if !isSpaceWord(text) {
			continue
		}
		if ids := tok.Encode(text); len(ids) != 1 || ids[0] != id {
			continue
		}
		p.ids = append(p.ids, id)
		p.texts = append(p.texts, text)
	}
	if len(p.ids) == 0 {
		return nil, fmt.Errorf("tokenizer %s: %w", tok.Name(), errEmptyPool)
	}
	return p, nil
}

// safeDecode decodes a single id, treating a panic as "no such token": the
// scan runs past the end of vocabularies of unknown size, and a Tokenizer
// implementation may index out of range rather than return "".
func safeDecode(tok tokenizer.Tokenizer, id int) (text string) {
	defer func() {
		if recover() != nil {
			text = ""
		}
	}()
	return tok.Decode([]int{id})
}

// isSpaceWord reports whether s is a space followed by 2 to 10 lowercase
// ASCII letters.
func isSpaceWord(s string) bool {
	if len(s) < 3 || len(s) > 11 || s[0] != ' ' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < 'a' || s[i] > 'z' {
			return false
		}
	}
	return true
}

// textSource yields the output tokens of one request.
type textSource struct {
	pool *tokenPool
	rng  *rand.Rand
}

// next returns the text of the next output token.
func (t *textSource) next() string {
	return t.pool.texts[t.rng.IntN(len(t.pool.texts))]
}

// ids returns the ids of the next n tokens. A second source with the same
// seeds gives the engine the ids of the text the first one will write.
func (t *textSource) ids(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = t.pool.ids[t.rng.IntN(len(t.pool.texts))]
	}
	return out
}

// unseededStream separates the random streams of requests without a seed
// (numbered by a counter) from those of requests with one, so that request 3
// and a request with "seed": 3 do not get the same text.
const unseededStream = 0x9e3779b97f4a7c15

// newTextSource returns the text of a request. A request with a seed gets
// text determined by Config.Seed and its seed alone; one without gets text
// determined by Config.Seed and its arrival order.
func newTextSource(pool *tokenPool, cfgSeed int64, reqSeed *int64, counter uint64) *textSource {
	seq := counter ^ unseededStream
	if reqSeed != nil {
		seq = uint64(*reqSeed)
	}
	return &textSource{pool: pool, rng: rand.New(rand.NewPCG(uint64(cfgSeed), seq))}
}
