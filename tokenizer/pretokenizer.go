package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// A preTokenizer cuts text into the pre-tokens that BPE runs on separately;
// merges never cross a pre-token boundary. each calls yield with every
// pre-token of s in order (empty ones are never yielded). Pre-tokens are
// substrings of s wherever possible, so cutting allocates nothing.
type preTokenizer interface {
	each(s string, yield func(string))
}

// sequencePre runs each step on every piece the previous step produced, as
// the Hugging Face Sequence pre-tokenizer does.
type sequencePre struct{ steps []preTokenizer }

func (p sequencePre) each(s string, yield func(string)) {
	p.run(0, s, yield)
}

func (p sequencePre) run(i int, s string, yield func(string)) {
	if i == len(p.steps) {
		yield(s)
		return
	}
	p.steps[i].each(s, func(piece string) { p.run(i+1, piece, yield) })
}

// wholePre yields its input unsplit: what is left of a pipeline whose only
// step is ByteLevel without its regex and without a prefix space, as in
// Qwen's and Llama 3's, where the byte mapping itself is implicit here.
type wholePre struct{}

func (wholePre) each(s string, yield func(string)) {
	if s != "" {
		yield(s)
	}
}

// prefixSpacePre is the add_prefix_space half of the ByteLevel
// pre-tokenizer: a piece not starting with a space gets one, so that a word
// at the start of the text is encoded like the same word mid-sentence. Like
// Hugging Face, it applies to every piece an earlier step produced.
type prefixSpacePre struct{}

func (prefixSpacePre) each(s string, yield func(string)) {
	if s == "" {
		return
	}
	if s[0] != ' ' {
		s = " " + s
	}
	yield(s)
}

// Split behaviours, named as in tokenizer.json: what becomes of the text a
// pattern matches, relative to the text between matches.
type splitBehavior int

const (
	behaviorRemoved            splitBehavior = iota // matches are dropped
	behaviorIsolated                                // matches are pieces of their own
	behaviorMergedWithPrevious                      // a match joins the piece before it
	behaviorMergedWithNext                          // a match joins the piece after it
	behaviorContiguous                              // adjacent matches form one piece
)

var splitBehaviors = map[string]splitBehavior{
	"Removed":            behaviorRemoved,
	"Isolated":           behaviorIsolated,
	"MergedWithPrevious": behaviorMergedWithPrevious,
	"MergedWithNext":     behaviorMergedWithNext,
	"Contiguous":         behaviorContiguous,
}

// A matcher reports the matches of a pattern in s, in order and without
// overlap, as byte offsets.
type matcher interface {
	matches(s string, fn func(start, end int))
}

// splitPre is the Hugging Face Split pre-tokenizer (and the regex half of
// ByteLevel, and Digits): the matches of a pattern and the gaps between them
// cover s, and behavior says how they are grouped into pieces.
type splitPre struct {
	m        matcher
	behavior splitBehavior
	invert   bool
}

func (p splitPre) each(s string, yield func(string)) {
	if s == "" {
		return
	}
	// Segments alternate between gaps and matches (two matches can also be
	// adjacent). A piece is built from one or more segments and held in
	// pending until it is known whether the next segment joins it; the
	// rules are those of NormalizedString::split.
	var (
		havePending  bool
		pStart, pEnd int
		pLastMatch   bool
		lastEnd      int
	)
	flush := func() {
		if havePending && pEnd > pStart {
			yield(s[pStart:pEnd])
		}
		havePending = false
	}
	seg := func(start, end int, isMatch bool) {
		if p.invert {
			isMatch = !isMatch
		}
		switch p.behavior {
		case behaviorIsolated:
			if end > start {
				yield(s[start:end])
			}
			return
		case behaviorRemoved:
			if !isMatch && end > start {
				yield(s[start:end])
			}
			return
		case behaviorMergedWithPrevious:
			// A match joins the previous piece unless that ended in a
			// match too.
			if havePending && isMatch && !pLastMatch {
				pEnd, pLastMatch = end, isMatch
				return
			}
		case behaviorMergedWithNext:
			// A match is held and joined by the next segment, unless that
			// is a match too.
			if havePending && pLastMatch && !isMatch {
				pEnd, pLastMatch = end, isMatch
				return
			}
		case behaviorContiguous:
			if havePending && isMatch == pLastMatch {
				pEnd = end
				return
			}
		}
		flush()
		havePending, pStart, pEnd, pLastMatch = true, start, end, isMatch
	}
	p.m.matches(s, func(start, end int) {
		if start > lastEnd {
			seg(lastEnd, start, false)
		}
		seg(start, end, true)
		lastEnd = end
	})
	if lastEnd < len(s) {
		seg(lastEnd, len(s), false)
	}
	flush()
}

// regexMatcher matches a tokenizer.json regex with regexp2, a backtracking
// engine with the lookahead ((?!\S)) and Unicode classes that the Oniguruma
// patterns of Hugging Face need and Go's regexp lacks. regexp2 works on runes,
// so rune offsets are converted back to byte offsets as matches come.
type regexMatcher struct{ re *regexp2.Regexp }

func (r regexMatcher) matches(s string, fn func(start, end int)) {
	m, err := r.re.FindStringMatch(s)
	// Byte offset of rune number runeAt; both only move forward.
	runeAt, byteAt := 0, 0
	ascii := isASCII(s)
	toByte := func(ri int) int {
		if ascii {
			return ri
		}
		for runeAt < ri {
			_, size := utf8.DecodeRuneInString(s[byteAt:])
			byteAt += size
			runeAt++
		}
		return byteAt
	}
	// err is only ever a timeout, and no MatchTimeout is set.
	for err == nil && m != nil {
		start := toByte(m.Index)
		end := toByte(m.Index + m.Length)
		fn(start, end)
		m, err = r.re.FindNextMatch(m)
	}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// literalMatcher matches a fixed string (a Split pattern given as "String").
type literalMatcher struct{ lit string }

func (l literalMatcher) matches(s string, fn func(start, end int)) {
	for off := 0; ; {
		i := strings.Index(s[off:], l.lit)
		if i < 0 {
			return
		}
		fn(off+i, off+i+len(l.lit))
		off += i + len(l.lit)
	}
}

// digitMatcher matches each numeric character on its own, which is how the
// Digits pre-tokenizer sees text (char::is_numeric is Unicode category N).
type digitMatcher struct{}

func (digitMatcher) matches(s string, fn func(start, end int)) {
	for i, r := range s {
		if unicode.IsNumber(r) {
			fn(i, i+utf8.RuneLen(r))
		}
	}
}

// gpt2Pattern is the regex of the ByteLevel pre-tokenizer when use_regex is
// true, and of OpenAI's original GPT-2 encoder.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// compilePattern compiles a tokenizer.json (Oniguruma) pattern. The patterns
// real tokenizers use are written in the common subset of Oniguruma and
// .NET syntax that regexp2 implements; scan.go replaces the best-known ones
// with hand-written scanners.
func compilePattern(pattern string) (matcher, error) {
	if m := knownScanner(pattern); m != nil {
		return m, nil
	}
	re, err := regexp2.Compile(pattern, regexp2.None)
	if err != nil {
		return nil, err
	}
	return regexMatcher{re}, nil
}
