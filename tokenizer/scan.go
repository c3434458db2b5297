package tokenizer

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Nearly every byte-level tokenizer in use splits text with one of two
// regexes: GPT-2's, or the one Llama 3 introduced and Qwen 2 and 3 reuse
// (differing only in how many digits make a number). Run through regexp2
// they cost most of the encoding time (a backtracking engine allocates and
// tries every alternative at each position), so this file implements those
// two patterns by hand: one pass over the string, no allocation. Any other
// pattern goes to regexp2. scan_test.go checks that both agree on random text.

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
	if pattern == gpt2Pattern {
		return gpt2Scanner{}
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

// gpt2Scanner implements
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
type gpt2Scanner struct{}

func (gpt2Scanner) matches(s string, fn func(start, end int)) {
	for i := 0; i < len(s); {
		end := gpt2Next(s, i)
		fn(i, end)
		i = end
	}
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
	for i := 0; i < len(s); {
		end := l.next(s, i)
		fn(i, end)
		i = end
	}
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
	// Only whitespace is left. \s*[\r\n]+ takes the run up to its last
	// line break, if it has one.
	end, last, nlEnd := spaceRun(s, i)
	if nlEnd > 0 {
		return nlEnd
	}
	return trailingSpace(s, i, end, last)
}
