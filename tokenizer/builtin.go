package tokenizer

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go-loader/assets"
)

// o200k is OpenAI's current encoding (GPT-4o and later). It is the default
// because its vocabulary is close in size and behaviour to the Llama 3 and
// Qwen tokenizers most served models use.
const o200k = "o200k_base"

// The builtin tokenizer is o200k_base run through this package's own BPE
// engine (bpe.go) and a hand-written pre-tokenizer (o200kScanner in
// scan.go), not through tiktoken-go. tiktoken-go splits with regexp2 and
// merges with string-keyed maps, costing about 2 ms and 10,000 allocations
// for a 1,700-token prompt; both the load generator and the built-in server
// count every prompt, so under the race detector on a small CI machine that
// starved the CPU. The ranks still come from the copy of OpenAI's
// o200k_base.tiktoken that tiktoken-go-loader embeds in the binary (nothing
// is ever downloaded), and the tests check the ids against tiktoken-go's
// EncodeOrdinary, which they keep as the oracle.
//
// tiktoken's BPE has no merge list: it repeatedly joins the adjacent pair of
// parts whose concatenated bytes have the lowest rank, the leftmost on a
// tie, and a token's rank is its id. Since every part is always a token
// (parts start as single bytes, all of which are tokens, and only join into
// tokens), that is the Hugging Face algorithm with one merge (a, b) -> ab of
// rank id(ab) for every way of cutting a token ab into two tokens a and b:
// about 446,000 merges for o200k_base. A pre-token that is itself a token is
// emitted as that token without merging, as tiktoken does. (For o200k_base
// that is only a shortcut, since BPE rebuilds every token from its bytes;
// the tests check.)
type builtin struct {
	model *bpe
	// tokens finds a pre-token that is a whole token.
	tokens tokenTable
	// text is the bytes of each id, special tokens included; ids with no
	// entry decode to nothing, as in tiktoken-go.
	text []string
}

// o200kSpecial are o200k_base's special tokens. Encode never produces them
// (prompt text is ordinary text), but Decode spells them out, as tiktoken
// does.
var o200kSpecial = map[int]string{
	199999: "<|endoftext|>",
	200018: "<|endofprompt|>",
}

func newBuiltin() (Tokenizer, error) {
	data, err := assets.Assets.ReadFile(o200k + ".tiktoken")
	if err != nil {
		return nil, fmt.Errorf("load builtin tokenizer %s: %w", o200k, err)
	}
	b, err := parseTiktoken(data, o200kSpecial)
	if err != nil {
		return nil, fmt.Errorf("load builtin tokenizer %s: %w", o200k, err)
	}
	return b, nil
}

// maxTiktokenRank bounds the ranks parseTiktoken accepts, since the decoding
// table has one entry per id up to the largest (o200k_base's is 200,018).
const maxTiktokenRank = 1 << 21

// parseTiktoken builds a tokenizer from a .tiktoken rank file: one line per
// token, its bytes in base64, a space and its rank, which is also its id.
//
// Loading is a one-time cost per process (New caches the tokenizer), but
// every run pays it, so it avoids Go maps: the token table is a flat
// open-addressing table whose polynomial hash gives the hashes of all the
// prefixes and suffixes of a token in one pass, which is what finding the
// ~446,000 merges takes.
func parseTiktoken(data []byte, special map[int]string) (*builtin, error) {
	// Every token's bytes go into one string that the tables slice,
	// rather than one allocation per token.
	entries := make([]entry, 0, len(data)/16)
	arena := make([]byte, 0, len(data)*3/4)
	maxID := -1
	for line := 1; len(data) > 0; line++ {
		var l []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i], data[i+1:]
		} else {
			l, data = data, nil
		}
		if len(l) == 0 {
			continue
		}
		sp := bytes.IndexByte(l, ' ')
		if sp <= 0 {
			return nil, fmt.Errorf("line %d: want \"base64 rank\"", line)
		}
		if sp+1 == len(l) {
			return nil, fmt.Errorf("line %d: missing rank", line)
		}
		id := 0
		for _, c := range l[sp+1:] {
			if c < '0' || c > '9' {
				return nil, fmt.Errorf("line %d: bad rank %q", line, l[sp+1:])
			}
			if id = id*10 + int(c-'0'); id > maxTiktokenRank {
				return nil, fmt.Errorf("line %d: rank %s is too large", line, l[sp+1:])
			}
		}
		off := len(arena)
		arena = append(arena, make([]byte, base64.StdEncoding.DecodedLen(sp))...)
		n, err := base64.StdEncoding.Decode(arena[off:], l[:sp])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if n == 0 {
			return nil, fmt.Errorf("line %d: empty token", line)
		}
		arena = arena[:off+n]
		entries = append(entries, entry{int32(off), int32(off + n), int32(id)})
		maxID = max(maxID, id)
	}
	if len(entries) == 0 {
		return nil, errors.New("no tokens")
	}
	all := string(arena)
	for id := range special {
		maxID = max(maxID, id)
	}

	m := &bpe{unk: -1}
	m.cache.init()
	t := &builtin{model: m, text: make([]string, maxID+1)}
	t.tokens = newTokenTable(len(entries), t.text)
	for _, e := range entries {
		tok := all[e.off:e.end]
		if t.text[e.id] != "" {
			return nil, fmt.Errorf("rank %d appears twice", e.id)
		}
		h := tokenHash(tok)
		if _, dup := t.tokens.find(tok, h); dup {
			return nil, fmt.Errorf("token %q appears twice", tok)
		}
		t.text[e.id] = tok
		t.tokens.put(h, e.id)
	}
	for b := range m.byteID {
		id, ok := t.tokens.get(string([]byte{byte(b)}))
		if !ok {
			return nil, fmt.Errorf("byte %#02x is not a token", b)
		}
		m.byteID[b] = id
	}
	for id, s := range special {
		if t.text[id] != "" {
			return nil, fmt.Errorf("special token %q has the id %d of an ordinary token", s, id)
		}
		t.text[id] = s
	}

	// One merge per way of cutting a token in two tokens; see builtin.
	// Finding them is most of the load, which every run pays before its
	// first request, so the tokens are shared out among the cores: each
	// worker only reads the token table and keeps its own pairs, and the
	// parts are joined in the tokens' order: the same pairs, in the same
	// order, as one worker would find.
	workers := max(1, min(runtime.GOMAXPROCS(0), 8))
	parts := make([][]pair, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := len(entries)*w/workers, len(entries)*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[w] = t.cutPairs(all, entries[lo:hi], make([]pair, 0, (hi-lo)*5/2))
		}()
	}
	wg.Wait()
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	// Inserted in the order of the slots they hash to, the merges fill the
	// table (16 MB for o200k_base) in one sweep instead of missing the
	// cache on every one: a counting sort on the top bits of the slot,
	// straight from the workers' parts (in the tokens' order), since on a
	// virtual machine every fresh megabyte costs page faults too.
	m.merges = newMergeTable(n)
	drop := max(0, bits.Len(uint(len(m.merges.keys)-1))-16)
	var start [1<<16 + 1]int32
	for _, part := range parts {
		for _, p := range part {
			start[m.merges.slot(p.key)>>drop+1]++
		}
	}
	for i := 1; i < len(start); i++ {
		start[i] += start[i-1]
	}
	sorted := make([]pair, n)
	for _, part := range parts {
		for _, p := range part {
			b := m.merges.slot(p.key) >> drop
			sorted[start[b]] = p
			start[b]++
		}
	}
	for _, p := range sorted {
		m.merges.put(p.key, merge{rank: p.id, id: p.id})
	}
	return t, nil
}

// entry is a token of a rank file being parsed: its bytes are
// all[off:end] of the file's decoded tokens.
type entry struct{ off, end, id int32 }

// pair is one merge found while loading a rank file: the pair of ids
// (pairKey) that join into id.
type pair struct {
	key uint64
	id  int32
}

// cutPairs appends to dst the merges of every token in entries: one for
// each way of cutting the token's bytes (all[off:end]) into two tokens.
// It only reads the token table, so several may run at once.
func (t *builtin) cutPairs(all string, entries []entry, dst []pair) []pair {
	var suffix []uint64
	for _, e := range entries {
		tok := all[e.off:e.end]
		// suffix[i] is the hash of tok[i:], built from the right.
		suffix = slices.Grow(suffix[:0], len(tok)+1)[:len(tok)+1]
		var h, pow uint64 = 0, 1
		for i := len(tok) - 1; i > 0; i-- {
			h += (uint64(tok[i]) + 1) * pow
			pow *= hashMul
			suffix[i] = h
		}
		var prefix uint64
		for i := 1; i < len(tok); i++ {
			prefix = prefix*hashMul + uint64(tok[i-1]) + 1
			a, ok := t.tokens.find(tok[:i], prefix)
			if !ok {
				continue
			}
			if b, ok := t.tokens.find(tok[i:], suffix[i]); ok {
				dst = append(dst, pair{pairKey(a, b), e.id})
			}
		}
	}
	return dst
}

// tokenTable maps the bytes of tokens to their ids. It is a flat
// open-addressing table of ids tagged with hash bits, probed linearly at a
// load factor of at most one half; the bytes of an id are in text.
type tokenTable struct {
	slots []uint64 // tag<<32 | id+1; 0 marks a free slot
	shift uint     // 64 - log2(len(slots))
	text  []string
}

// hashMul is the multiplier of tokenHash.
const hashMul = 0x100000001b3

// tokenHash is the polynomial hash sum((s[i]+1) * hashMul^(len(s)-1-i)),
// modulo 2^64: parseTiktoken computes it for every prefix of a token going
// right and every suffix going left, one multiply-add per byte.
func tokenHash(s string) uint64 {
	var h uint64
	for i := 0; i < len(s); i++ {
		h = h*hashMul + uint64(s[i]) + 1
	}
	return h
}

func newTokenTable(n int, text []string) tokenTable {
	size, shift := 8, uint(61)
	for size < 2*n {
		size *= 2
		shift--
	}
	return tokenTable{slots: make([]uint64, size), shift: shift, text: text}
}

// mix spreads the hash's bits: the low bits of a polynomial hash modulo
// 2^64 depend only on the low bits of the bytes.
func mix(h uint64) uint64 {
	h ^= h >> 31
	h *= 0x9E3779B97F4A7C15
	return h ^ h>>29
}

// put adds id, whose bytes hash to h and are not in the table yet.
func (t *tokenTable) put(h uint64, id int32) {
	x := mix(h)
	mask := len(t.slots) - 1
	for i := int(x >> t.shift); ; i = (i + 1) & mask {
		if t.slots[i] == 0 {
			t.slots[i] = x<<32 | (uint64(id) + 1)
			return
		}
	}
}

// find returns the id of the token s, whose hash is h.
func (t *tokenTable) find(s string, h uint64) (int32, bool) {
	x := mix(h)
	tag := x << 32
	mask := len(t.slots) - 1
	for i := int(x >> t.shift); ; i = (i + 1) & mask {
		v := t.slots[i]
		if v == 0 {
			return 0, false
		}
		if v&^0xFFFFFFFF == tag {
			if id := int32(uint32(v) - 1); t.text[id] == s {
				return id, true
			}
		}
	}
}

func (t *tokenTable) get(s string) (int32, bool) { return t.find(s, tokenHash(s)) }

func (b *builtin) Name() string { return Builtin + ":" + o200k }

func (b *builtin) Encode(text string) []int {
	return b.appendIDs(make([]int, 0, len(text)/4+1), text)
}

// Count encodes into a pooled buffer, since it throws the ids away.
func (b *builtin) Count(text string) int { return countPooled(b.appendIDs, text) }

func (b *builtin) appendIDs(ids []int, text string) []int {
	return b.appendIDsEach(ids, text, nil)
}

// appendIDsEach is appendIDs, handing ids to flush, when it is not nil,
// after each pre-token's ids are appended (see hfTokenizer's).
func (b *builtin) appendIDsEach(ids []int, text string, flush func([]int) ([]int, bool)) []int {
	text = tiktokenValidUTF8(text)
	stop := false
	o200kScanner{}.matches(text, func(start, end int) {
		if stop {
			return
		}
		w := text[start:end]
		// A pre-token that is a token is that token, as in tiktoken.
		var id int32
		ok := false
		if len(w) > 1 {
			id, ok = b.tokens.get(w)
		}
		if ok {
			ids = append(ids, int(id))
		} else {
			ids = b.model.appendWord(ids, w)
		}
		if flush != nil {
			ids, stop = flush(ids)
			stop = !stop
		}
	})
	return ids
}

// tiktokenValidUTF8 replaces each byte of text that is not part of a valid
// UTF-8 character with U+FFFD, as tiktoken-go does (it converts the text to
// runes), so that the builtin counts a Go string holding invalid UTF-8
// exactly as before. (Hugging Face tokenizers here use strings.ToValidUTF8,
// one U+FFFD per run, like the server decoding a request body.)
func tiktokenValidUTF8(text string) string {
	if utf8.ValidString(text) {
		return text
	}
	var sb strings.Builder
	sb.Grow(len(text) + 8)
	for _, r := range text {
		sb.WriteRune(r) // an invalid byte ranges as one utf8.RuneError
	}
	return sb.String()
}

// Decode concatenates the bytes of ids, special tokens included, skipping
// ids that are no token. Like tiktoken-go it returns the bytes as they are:
// ids that cut a character in two give invalid UTF-8, which callers such as
// the prompt builder check for.
func (b *builtin) Decode(ids []int) string {
	var buf []byte
	for _, id := range ids {
		if id >= 0 && id < len(b.text) {
			buf = append(buf, b.text[id]...)
		}
	}
	return string(buf)
}
