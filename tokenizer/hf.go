package tokenizer

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// hfTokenizer is a byte-level BPE tokenizer loaded from a Hugging Face
// tokenizer.json (or GPT-2's encoder.json and vocab.bpe). Encode follows the
// same pipeline as the tokenizers library's encode(text,
// add_special_tokens=False), which is how a vLLM server counts the prompt of
// a completion request:
//
//  1. added tokens with normalized=false ("<|im_end|>" and the like) are cut
//     out of the raw text and become their ids;
//  2. the text between them is normalized (Qwen: NFC);
//  3. added tokens with normalized=true are cut out of the normalized text;
//  4. what is left is cut into pre-tokens (a regex split), and
//  5. each pre-token's UTF-8 bytes are merged by BPE into ids.
//
// All fields are read-only after loading except the BPE word cache, which
// locks, so one instance serves any number of goroutines.
type hfTokenizer struct {
	name      string
	rawAdded  *addedMatcher       // added tokens matched on the input text
	normAdded *addedMatcher       // added tokens matched after normalizing
	normalize func(string) string // nil when the tokenizer has none
	pre       preTokenizer
	model     *bpe
	// text is the decoded bytes of each id; an id with no entry is skipped
	// by Decode, as Hugging Face skips ids it does not know.
	text []string
}

func (t *hfTokenizer) Name() string { return t.name }

func (t *hfTokenizer) Encode(text string) []int {
	return t.appendIDs(make([]int, 0, len(text)/3+1), text)
}

// idsPool recycles the buffers Count encodes into, since it throws the ids
// away.
var idsPool = sync.Pool{New: func() any { s := make([]int, 0, 1024); return &s }}

func (t *hfTokenizer) Count(text string) int { return countPooled(t.appendIDs, text) }

// countPooled counts the ids appendIDs produces for text, encoding into a
// pooled buffer, since a count throws the ids away. Oversized buffers are
// not kept, so one huge prompt does not pin its memory.
func countPooled(appendIDs func([]int, string) []int, text string) int {
	p := idsPool.Get().(*[]int)
	ids := appendIDs((*p)[:0], text)
	n := len(ids)
	if cap(ids) <= 1<<16 {
		*p = ids
		idsPool.Put(p)
	}
	return n
}

func (t *hfTokenizer) appendIDs(ids []int, text string) []int {
	return t.appendIDsEach(ids, text, nil)
}

// appendIDsEach is appendIDs, handing ids to flush, when it is not nil,
// after each pre-token's ids are appended: flush returns the slice to go
// on appending to (CountPaced tallies and empties it, and pauses), and
// whether to go on; once it says no, the rest of the text is only
// scanned, not encoded.
func (t *hfTokenizer) appendIDsEach(ids []int, text string, flush func([]int) ([]int, bool)) []int {
	// Text from a Go string may hold invalid UTF-8, which cannot reach the
	// Hugging Face library (Python and JSON strings are always valid); it
	// is encoded as U+FFFD, which is what a server decoding the request
	// body would see.
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	stop := false
	word := func(w string) {
		if stop {
			return
		}
		ids = t.model.appendWord(ids, w)
		if flush != nil {
			ids, stop = flush(ids)
			stop = !stop
		}
	}
	normPiece := func(piece string, id int) {
		if id >= 0 {
			ids = append(ids, id)
			return
		}
		t.pre.each(piece, word)
	}
	t.rawAdded.split(text, func(piece string, id int) {
		if id >= 0 {
			ids = append(ids, id)
			return
		}
		if t.normalize != nil {
			piece = t.normalize(piece)
		}
		t.normAdded.split(piece, normPiece)
	})
	return ids
}

// Decode concatenates the bytes of ids, special tokens included (the
// tokenizers library's skip_special_tokens=False), and returns them as
// UTF-8, with U+FFFD where the ids cut a character in two.
func (t *hfTokenizer) Decode(ids []int) string {
	var buf []byte
	for _, id := range ids {
		if id >= 0 && id < len(t.text) {
			buf = append(buf, t.text[id]...)
		}
	}
	if utf8.Valid(buf) {
		return string(buf)
	}
	return string(appendLossyUTF8(nil, buf))
}
