package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
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
// about 446,000 merges for o200k_base. Listing them at load took most of
// every run's start-up (a 16 MB table, and more to build it, each fresh
// page a fault on a virtual machine), so bpe asks the token table instead
// (joins): the polynomial hash of a's bytes followed by b's is a's hash
// times hashMul^len(b) plus b's, one multiply-add from the two ids, and the
// pair merges when those bytes are a token. A pre-token that is itself a
// token is emitted as that token without merging, as tiktoken does. (For
// o200k_base that is only a shortcut, since BPE rebuilds every token from
// its bytes; the tests check.)
type builtin struct {
	model *bpe
	// tokens finds a pre-token that is a whole token, joins two parts
	// for model, and holds the bytes of each id, special tokens included
	// (ids with no entry decode to nothing, as in tiktoken-go).
	tokens *tokenTable
}

// o200kSpecial are o200k_base's special tokens. Encode never produces them
// (prompt text is ordinary text), but Decode spells them out, as tiktoken
// does.
var o200kSpecial = map[int]string{
	199999: "<|endoftext|>",
	200018: "<|endofprompt|>",
}

func newBuiltin() (Tokenizer, error) {
	// Read through a buffer rather than ReadFile, which copies the whole
	// 3.6 MB file out of the binary.
	f, err := assets.Assets.Open(o200k + ".tiktoken")
	if err != nil {
		return nil, fmt.Errorf("load builtin tokenizer %s: %w", o200k, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("load builtin tokenizer %s: %w", o200k, err)
	}
	b, err := parseTiktoken(f, int(st.Size()), o200kSpecial)
	if err != nil {
		return nil, fmt.Errorf("load builtin tokenizer %s: %w", o200k, err)
	}
	return b, nil
}

// maxTiktokenRank bounds the ranks parseTiktoken accepts, since the decoding
// table has one entry per id up to the largest (o200k_base's is 200,018).
const maxTiktokenRank = 1 << 21

// parseTiktoken builds a tokenizer from a .tiktoken rank file of about
// size bytes: one line per token, its bytes in base64, a space and its
// rank, which is also its id.
//
// Loading is a one-time cost per process (New caches the tokenizer), but
// every run pays it, so it avoids Go maps and the merge list: the token
// table is a flat open-addressing table whose polynomial hash of two joined
// tokens comes from theirs (see builtin).
func parseTiktoken(r io.Reader, size int, special map[int]string) (*builtin, error) {
	// Every token's bytes go into one string that the table slices,
	// rather than one allocation per token, and nothing is copied twice:
	// a strings.Builder hands over its bytes as they are, and the ids
	// index info directly (a rank file's ids are its line numbers, give
	// or take: o200k_base's lines average 18 bytes). On a virtual machine
	// every fresh page costs a fault.
	var arena strings.Builder
	arena.Grow(size*3/4 + 64)
	ids := size/16 + 1
	for id := range special {
		ids = max(ids, id+1)
	}
	info := make([]tokInfo, 0, ids)
	var scratch []byte
	count, longest := 0, 0
	br := bufio.NewReaderSize(r, 64<<10)
	for line, eof := 1, false; !eof; line++ {
		l, err := br.ReadSlice('\n')
		switch {
		case err == io.EOF:
			eof = true
		case errors.Is(err, bufio.ErrBufferFull):
			return nil, fmt.Errorf("line %d: longer than %d bytes", line, br.Size())
		case err != nil:
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		l = bytes.TrimSuffix(l, []byte{'\n'})
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
		scratch = slices.Grow(scratch[:0], base64.StdEncoding.DecodedLen(sp))
		n, err := base64.StdEncoding.Decode(scratch[:cap(scratch)], l[:sp])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if n == 0 {
			return nil, fmt.Errorf("line %d: empty token", line)
		}
		if id >= len(info) {
			info = slices.Grow(info, id+1-len(info))[:id+1] // zeros past len
		} else if info[id].n != 0 {
			return nil, fmt.Errorf("rank %d appears twice", id)
		}
		info[id] = tokInfo{off: uint32(arena.Len()), n: uint32(n)}
		arena.Write(scratch[:n])
		count++
		longest = max(longest, n)
	}
	if count == 0 {
		return nil, errors.New("no tokens")
	}
	// The special tokens' bytes go into the arena too, only for Decode;
	// they are not put in the table, since Encode never produces them.
	type specialToken struct{ id, off int }
	specials := make([]specialToken, 0, len(special))
	for id, s := range special {
		if id < len(info) && info[id].n != 0 {
			return nil, fmt.Errorf("special token %q has the id %d of an ordinary token", s, id)
		}
		specials = append(specials, specialToken{id, arena.Len()})
		arena.WriteString(s)
	}

	tokens := newTokenTable(count, arena.String(), info, longest)
	for id, ti := range info {
		if ti.n == 0 {
			continue
		}
		if !tokens.put(int32(id), tokenHash(tokens.all[ti.off:ti.off+ti.n])) {
			return nil, fmt.Errorf("token %q appears twice", tokens.token(id))
		}
	}
	for _, sp := range specials {
		if sp.id >= len(tokens.info) {
			tokens.info = slices.Grow(tokens.info, sp.id+1-len(tokens.info))[:sp.id+1]
		}
		tokens.info[sp.id] = tokInfo{off: uint32(sp.off), n: uint32(len(special[sp.id]))}
	}
	m := &bpe{unk: -1, joins: tokens}
	m.cache.init()
	for b := range m.byteID {
		id, ok := tokens.get(string([]byte{byte(b)}))
		if !ok {
			return nil, fmt.Errorf("byte %#02x is not a token", b)
		}
		m.byteID[b] = id
	}
	return &builtin{model: m, tokens: tokens}, nil
}

// tokenTable maps the bytes of tokens to their ids, and joins two parts
// for bpe (see builtin). It is a flat open-addressing table of ids tagged
// with hash bits, probed linearly at a load factor of at most one half;
// a slot's tag almost always tells a miss without reading the token's
// bytes. Slots of 4 bytes and tokInfos of 8 keep o200k_base's table at
// 3.6 MB: every fresh page costs a fault on a virtual machine.
type tokenTable struct {
	slots []uint32 // tag<<slotIDBits | id+1; 0 marks a free slot
	shift uint     // 64 - log2(len(slots))
	// all holds every token's bytes; info[id] says where.
	all  string
	info []tokInfo
	// pow[n] is hashMul^n, up to the longest token's length.
	pow []uint64
}

// tokInfo is where a token's bytes are: all[off:off+n]; n is 0 for an id
// that is no token.
type tokInfo struct{ off, n uint32 }

// A slot holds id+1 in its low slotIDBits bits (ids are at most
// maxTiktokenRank) and hash bits, the tag, above them.
const (
	slotIDBits = 22
	slotIDMask = 1<<slotIDBits - 1
)

// hashMul is the multiplier of tokenHash.
const hashMul = 0x100000001b3

// tokenHash is the polynomial hash sum((s[i]+1) * hashMul^(len(s)-1-i)),
// modulo 2^64: the hash of s joined to t is
// tokenHash(s)*hashMul^len(t) + tokenHash(t), which is what joins uses.
func tokenHash[T string | []byte](s T) uint64 {
	var h uint64
	for i := 0; i < len(s); i++ {
		h = h*hashMul + uint64(s[i]) + 1
	}
	return h
}

// newTokenTable makes a table for n tokens, whose bytes and hashes info
// gives (the longest is longest bytes); put adds them.
func newTokenTable(n int, all string, info []tokInfo, longest int) *tokenTable {
	size, shift := 8, uint(61)
	for size < 2*n {
		size *= 2
		shift--
	}
	pow := make([]uint64, longest+1)
	pow[0] = 1
	for i := 1; i <= longest; i++ {
		pow[i] = pow[i-1] * hashMul
	}
	return &tokenTable{slots: make([]uint32, size), shift: shift, all: all, info: info, pow: pow}
}

// token returns the bytes of id, "" for an id that is no token.
func (t *tokenTable) token(id int) string {
	if id < 0 || id >= len(t.info) {
		return ""
	}
	i := t.info[id]
	return t.all[i.off : i.off+i.n]
}

// mix spreads the hash's bits: the low bits of a polynomial hash modulo
// 2^64 depend only on the low bits of the bytes.
func mix(h uint64) uint64 {
	h ^= h >> 31
	h *= 0x9E3779B97F4A7C15
	return h ^ h>>29
}

// put adds the token id, whose bytes (in info) hash to h, and reports
// whether it did: false when those bytes are another id's already.
func (t *tokenTable) put(id int32, h uint64) bool {
	ti := t.info[id]
	if _, dup := t.find(t.all[ti.off:ti.off+ti.n], h); dup {
		return false
	}
	x := mix(h)
	mask := len(t.slots) - 1
	for i := int(x >> t.shift); ; i = (i + 1) & mask {
		if t.slots[i] == 0 {
			t.slots[i] = uint32(x)<<slotIDBits | uint32(id+1)
			return true
		}
	}
}

// find returns the id of the token s, whose hash is h.
func (t *tokenTable) find(s string, h uint64) (int32, bool) {
	x := mix(h)
	tag := uint32(x) << slotIDBits
	mask := len(t.slots) - 1
	for i := int(x >> t.shift); ; i = (i + 1) & mask {
		v := t.slots[i]
		if v == 0 {
			return 0, false
		}
		if v&^slotIDMask == tag {
			id := int32(v&slotIDMask) - 1
			if ti := t.info[id]; t.all[ti.off:ti.off+ti.n] == s {
				return id, true
			}
		}
	}
}

// join returns the id of the token spelled by two parts: the first na
// bytes of at, whose tokenHash is ha, then the next nb, whose hash is hb.
// Their hash is ha*hashMul^nb + hb (tokenHash), so no byte is hashed.
func (t *tokenTable) join(at string, na uint32, ha uint64, nb uint32, hb uint64) (int32, bool) {
	n := na + nb
	if int(n) >= len(t.pow) {
		return 0, false // longer than any token
	}
	return t.find(at[:n], ha*t.pow[nb]+hb)
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
		buf = append(buf, b.tokens.token(id)...)
	}
	return string(buf)
}
