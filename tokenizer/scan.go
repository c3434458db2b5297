package tokenizer

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Nearly every byte-level tokenizer in use splits text with one of three
// regexes: GPT-2's, the one Llama 3 introduced and Qwen 2 and 3 reuse
// (differing only in how many digits make a number), or OpenAI's o200k_base
// (the builtin tokenizer). Run through regexp2 they cost most of the encoding
// time (a backtracking engine allocates and tries every alternative at each
// position), so this file implements those patterns by hand: one pass over
// the string, no allocation. Any other pattern goes to regexp2. scan_test.go
// checks that both agree on random text.

// The two pattern families, as they appear in tokenizer.json. A Llama 3 style
// pattern has a number part of \p{N} (Qwen), \p{N}+ or \p{N}{1,k} (Llama 3:
// k = 3) in its third alternative.
const (
	llama3Prefix = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|`
	llama3Suffix = `| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// knownScanner returns a hand-written matcher equivalent to pattern, or nil
// if pattern is not one of the known ones.
func knownScanner(pattern string) matcher {
	switch pattern {
	case gpt2Pattern:
		return gpt2Scanner{}
	case o200kPattern:
		return o200kScanner{}
	}
	num, ok := strings.CutPrefix(pattern, llama3Prefix)
	if !ok {
		return nil
	}
	num, ok = strings.CutSuffix(num, llama3Suffix)
	if !ok {
		return nil
	}
	switch num {
	case `\p{N}`:
		return llama3Scanner{maxDigits: 1}
	case `\p{N}+`:
		return llama3Scanner{}
	}
	if k, ok := strings.CutPrefix(num, `\p{N}{1,`); ok {
		if k, ok := strings.CutSuffix(k, `}`); ok {
			if n, err := strconv.Atoi(k); err == nil && n >= 1 {
				return llama3Scanner{maxDigits: n}
			}
		}
	}
	return nil
}

// Character classes of the patterns: \p{L}, \p{N}, \s, and everything else.
// \s is unicode.IsSpace, as in regexp2 and in Oniguruma's Unicode mode.
const (
	clsOther uint8 = iota
	clsLetter
	clsNumber
	clsSpace
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for b := range t {
		switch r := rune(b); {
		case unicode.IsLetter(r):
			t[b] = clsLetter
		case unicode.IsNumber(r):
			t[b] = clsNumber
		case unicode.IsSpace(r):
			t[b] = clsSpace
		}
	}
	return t
}()

// classAt returns the class of the character at s[i], the character and its
// length in bytes. i must be < len(s).
func classAt(s string, i int) (uint8, rune, int) {
	if b := s[i]; b < utf8.RuneSelf {
		return asciiClass[b], rune(b), 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	switch {
	case unicode.IsLetter(r):
		return clsLetter, r, n
	case unicode.IsNumber(r):
		return clsNumber, r, n
	case unicode.IsSpace(r):
		return clsSpace, r, n
	}
	return clsOther, r, n
}

// classRun returns the end of the run of characters of class cls starting at
// i, taking at most max characters (0: no limit).
func classRun(s string, i int, cls uint8, max int) int {
	for n := 0; i < len(s) && (max == 0 || n < max); n++ {
		c, _, size := classAt(s, i)
		if c != cls {
			break
		}
		i += size
	}
	return i
}

// spaceRun scans the run of whitespace starting at i. It returns the run's
// end, the start of its last character, and the end of its last '\r' or
// '\n' (-1 if it has none).
func spaceRun(s string, i int) (end, last, nlEnd int) {
	last, nlEnd = i, -1
	for i < len(s) {
		c, r, size := classAt(s, i)
		if c != clsSpace {
			break
		}
		if r == '\r' || r == '\n' {
			nlEnd = i + 1
		}
		last = i
		i += size
	}
	return i, last, nlEnd
}

// contraction returns the end of the English contraction suffix ('s, 't,
// 're, 've, 'm, 'll, 'd) starting with the apostrophe at s[i], or -1. fold
// makes the letters case-insensitive, as (?i:...) does: only ASCII letters
// fold to these.
func contraction(s string, i int, fold bool) int {
	lower := func(j int) byte {
		if j >= len(s) {
			return 0
		}
		b := s[j]
		if fold && b >= 'A' && b <= 'Z' {
			b += 'a' - 'A'
		}
		return b
	}
	switch lower(i + 1) {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r', 'v':
		if lower(i+2) == 'e' {
			return i + 3
		}
	case 'l':
		if lower(i+2) == 'l' {
			return i + 3
		}
	}
	return -1
}

// trailingSpace applies \s+(?!\S) and then \s+ to the whitespace run
// [i, end) whose last character starts at last: the run up to the end of
// the text, or all but its last character when a non-space follows (that
// last character then leads the next match, e.g. " world"), or a lone
// whitespace character.
func trailingSpace(s string, i, end, last int) int {
	if end == len(s) || last == i {
		return end
	}
	return last
}

// splitEach calls fn for each piece of s, where next(s, i) returns the end
// of the piece starting at i. The scanners differ only in next.
func splitEach(s string, next func(string, int) int, fn func(start, end int)) {
	for i := 0; i < len(s); {
		end := next(s, i)
		fn(i, end)
		i = end
	}
}

// gpt2Scanner implements
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
type gpt2Scanner struct{}

func (gpt2Scanner) matches(s string, fn func(start, end int)) {
	splitEach(s, gpt2Next, fn)
}

func gpt2Next(s string, i int) int {
	_, r, _ := classAt(s, i)
	if r == '\'' {
		if e := contraction(s, i, false); e > 0 {
			return e
		}
	}
	// " ?" then a run of letters, numbers or other characters.
	j := i
	if r == ' ' {
		j = i + 1
	}
	if j < len(s) {
		if cj, _, _ := classAt(s, j); cj != clsSpace {
			return classRun(s, j, cj, 0)
		}
	}
	// Only whitespace is left.
	end, last, _ := spaceRun(s, i)
	return trailingSpace(s, i, end, last)
}

// llama3Scanner implements, for maxDigits k (0: \p{N}+),
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,k}|
//	 ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
type llama3Scanner struct{ maxDigits int }

func (l llama3Scanner) matches(s string, fn func(start, end int)) {
	splitEach(s, l.next, fn)
}

func (l llama3Scanner) next(s string, i int) int {
	c, r, n := classAt(s, i)
	if r == '\'' {
		if e := contraction(s, i, true); e > 0 {
			return e
		}
	}
	switch c {
	case clsLetter:
		return classRun(s, i, clsLetter, 0)
	case clsNumber:
		return classRun(s, i, clsNumber, l.maxDigits)
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+: one leading character (punctuation or
	// whitespace other than a line break) glued to a word.
	if r != '\r' && r != '\n' && i+n < len(s) {
		if cn, _, _ := classAt(s, i+n); cn == clsLetter {
			return classRun(s, i+n, clsLetter, 0)
		}
	}
	// " ?[^\s\p{L}\p{N}]+[\r\n]*": punctuation with any line breaks after.
	j := i
	if r == ' ' {
		j = i + n
	}
	if e := classRun(s, j, clsOther, 0); e > j {
		for e < len(s) && (s[e] == '\r' || s[e] == '\n') {
			e++
		}
		return e
	}
	// Only whitespace is left.
	return lineBreakOrSpaceEnd(s, i)
}

// o200kPattern is the pre-tokenizer regex of OpenAI's o200k_base, as
// tiktoken (and tiktoken-go's o200k_base) writes it: the alternatives joined
// with "|". Words are cut where the case changes ("camelCase" is "camel" and
// "Case"), an all-caps run keeps a lowercase tail ("HTTPServer" is one
// piece), contractions stay on their word, numbers come in threes, and
// punctuation takes any line breaks and slashes after it.
const o200kPattern = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?` +
	`|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?` +
	`|\p{N}{1,3}` +
	`| ?[^\s\p{L}\p{N}]+[\r\n/]*` +
	`|\s*[\r\n]+` +
	`|\s+(?!\S)` +
	`|\s+`

// Character classes of o200kPattern. Its two word classes overlap:
// "upper" [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and "lower"
// [\p{Ll}\p{Lm}\p{Lo}\p{M}] share Lm, Lo and the marks, so a character is in
// the upper class only (Lu, Lt), the lower class only (Ll), or both (Lm and
// Lo, which are letters, and marks, which are not \p{L} and so can also lead
// a word as [^\r\n\p{L}\p{N}] or be punctuation in [^\s\p{L}\p{N}]).
const (
	o2Other  uint8 = iota // none of the below: punctuation, symbols, controls
	o2Upper               // Lu, Lt
	o2Lower               // Ll
	o2Letter              // Lm, Lo: letters in both word classes
	o2Mark                // M: in both word classes, but not a letter
	o2Number              // \p{N}
	o2Space               // \s (unicode.IsSpace)
)

var o2ASCII = func() (t [utf8.RuneSelf]uint8) {
	for b := range t {
		t[b] = o2Class(rune(b))
	}
	return t
}()

// o2Class returns the o200k class of r. Letters are tested first and, among
// them, Lo (CJK and most caseless scripts) first, because that is where
// non-ASCII text spends its lookups.
func o2Class(r rune) uint8 {
	if unicode.IsLetter(r) {
		switch {
		case unicode.Is(unicode.Lo, r), unicode.Is(unicode.Lm, r):
			return o2Letter
		case unicode.IsLower(r): // Ll
			return o2Lower
		}
		return o2Upper // Lu or Lt, the rest of \p{L}
	}
	switch {
	case unicode.IsMark(r):
		return o2Mark
	case unicode.IsNumber(r):
		return o2Number
	case unicode.IsSpace(r):
		return o2Space
	}
	return o2Other
}

// o2ClassAt returns the o200k class of the character at s[i], the character
// and its length in bytes. i must be < len(s).
func o2ClassAt(s string, i int) (uint8, rune, int) {
	if b := s[i]; b < utf8.RuneSelf {
		return o2ASCII[b], rune(b), 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return o2Class(r), r, n
}

// o200kScanner implements o200kPattern:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//	\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// A backtracking engine tries the alternatives in order and, within the
// first two, every way of sharing characters between the overlapping upper
// and lower runs, first with the optional leading character and then
// without it. o200kLowered and o200kCapitalized work out directly where those
// searches end; the comments there say how.
type o200kScanner struct{}

func (o200kScanner) matches(s string, fn func(start, end int)) {
	splitEach(s, o200kNext, fn)
}

func o200kNext(s string, i int) int {
	c, r, n := o2ClassAt(s, i)
	switch c {
	case o2Upper, o2Lower, o2Letter:
		// A letter cannot be the optional leading character, so the
		// word starts here; one of the two word alternatives matches.
		if e := o200kLowered(s, i); e >= 0 {
			return e
		}
		return o200kCapitalized(s, i)
	case o2Number:
		// \p{N}{1,3}. (A number cannot lead a word either.)
		e := i + n
		for k := 1; k < 3 && e < len(s); k++ {
			cn, _, size := o2ClassAt(s, e)
			if cn != o2Number {
				break
			}
			e += size
		}
		return e
	}
	// [^\r\n\p{L}\p{N}]? leading a word: c is punctuation, a mark or
	// whitespace other than a line break. The first alternative is tried
	// with that character taken and then, for a mark, which is itself in
	// both word classes, without it (which always matches: the mark is
	// the word); only then the second alternative.
	if r != '\r' && r != '\n' {
		if e := o200kLowered(s, i+n); e >= 0 {
			return e
		}
		if c == o2Mark {
			return o200kLowered(s, i)
		}
		if e := o200kCapitalized(s, i+n); e >= 0 {
			return e
		}
	}
	// " ?[^\s\p{L}\p{N}]+[\r\n/]*": punctuation (marks included), with a
	// space before and line breaks or slashes after.
	j := i
	if r == ' ' {
		j = i + 1
	}
	e := j
	for e < len(s) {
		ce, _, size := o2ClassAt(s, e)
		if ce != o2Other && ce != o2Mark {
			break
		}
		e += size
	}
	if e > j {
		for e < len(s) && (s[e] == '\r' || s[e] == '\n' || s[e] == '/') {
			e++
		}
		return e
	}
	// Only whitespace is left (a lone ' ' before a non-punctuation
	// character, or a longer run).
	return lineBreakOrSpaceEnd(s, i)
}

// lineBreakOrSpaceEnd ends a whitespace piece starting at i the way
// \s*[\r\n]+|\s+(?!\S)|\s+ does: up to the run's last line break if it
// has one, else as trailingSpace decides.
func lineBreakOrSpaceEnd(s string, i int) int {
	end, last, nlEnd := spaceRun(s, i)
	if nlEnd > 0 {
		return nlEnd
	}
	return trailingSpace(s, i, end, last)
}

// o200kLowered matches [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+
// and an optional contraction at s[j:], returning the end of the match or
// -1. The greedy upper run takes every upper-or-both character; if a
// lowercase-only letter follows, the lower run takes it and all the
// lower-or-both characters after. Otherwise the engine backs the upper run
// off one character at a time until the lower run can start, which it can
// only at a character in both classes, and the lower run then stops at once
// (the next character is upper-only or ends the run): so the match ends just
// after the last both-class character of the upper run, and fails if there
// is none ("ABC." has no lowercase word; "ABCǅ" neither, ǅ being Lt).
func o200kLowered(s string, j int) int {
	k, afterBoth := j, -1
	for k < len(s) {
		c, _, n := o2ClassAt(s, k)
		if c == o2Lower {
			return o200kContraction(s, o200kLowerRun(s, k+n))
		}
		if c != o2Upper && c != o2Letter && c != o2Mark {
			break
		}
		k += n
		if c != o2Upper {
			afterBoth = k
		}
	}
	if afterBoth < 0 {
		return -1
	}
	return o200kContraction(s, afterBoth)
}

// o200kCapitalized matches [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*
// and an optional contraction at s[j:], returning the end of the match or
// -1. Both runs are greedy and the second may be empty, so no backtracking
// is needed.
func o200kCapitalized(s string, j int) int {
	k := j
	for k < len(s) {
		c, _, n := o2ClassAt(s, k)
		if c != o2Upper && c != o2Letter && c != o2Mark {
			break
		}
		k += n
	}
	if k == j {
		return -1
	}
	return o200kContraction(s, o200kLowerRun(s, k))
}

// o200kLowerRun returns the end of the run of lower-or-both characters
// starting at k.
func o200kLowerRun(s string, k int) int {
	for k < len(s) {
		c, _, n := o2ClassAt(s, k)
		if c != o2Lower && c != o2Letter && c != o2Mark {
			break
		}
		k += n
	}
	return k
}

// o200kContraction extends a word ending at e by the optional
// (?i:'s|'t|'re|'ve|'m|'ll|'d) after it.
func o200kContraction(s string, e int) int {
	if e < len(s) && s[e] == '\'' {
		if c := contraction(s, e, true); c > 0 {
			return c
		}
	}
	return e
}
