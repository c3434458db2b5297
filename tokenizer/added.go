package tokenizer

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// addedToken is an entry of tokenizer.json's added_tokens: a string (usually
// a special token such as "<|im_end|>") that is cut out of the text before
// normalization and BPE, and encoded as its one id.
type addedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// addedMatcher finds added tokens in text the way Hugging Face's
// AddedVocabulary does: leftmost-longest, non-overlapping, honouring
// single_word, lstrip and rstrip. A model has a few dozen to a few hundred
// added tokens, so candidates are indexed by first byte and tried longest
// first, which is leftmost-longest without an Aho-Corasick automaton.
type addedMatcher struct {
	toks    []addedToken
	byFirst [256][]int32 // indexes into toks, longest content first
}

func newAddedMatcher(toks []addedToken) *addedMatcher {
	if len(toks) == 0 {
		return nil
	}
	m := &addedMatcher{toks: toks}
	for i, t := range toks {
		b := t.Content[0]
		m.byFirst[b] = append(m.byFirst[b], int32(i))
	}
	for b := range m.byFirst {
		l := m.byFirst[b]
		sort.SliceStable(l, func(i, j int) bool { return len(toks[l[i]].Content) > len(toks[l[j]].Content) })
	}
	return m
}

// split calls fn with the pieces of s in order: text between added tokens
// with id -1, and each added token (with any whitespace its lstrip/rstrip
// flags absorb) with its id. Empty text pieces are skipped. A nil matcher
// yields s whole.
func (m *addedMatcher) split(s string, fn func(piece string, id int)) {
	if m == nil {
		if s != "" {
			fn(s, -1)
		}
		return
	}
	done := 0 // end of the last piece yielded
	for i := 0; i < len(s); {
		cands := m.byFirst[s[i]]
		if len(cands) == 0 {
			i++
			continue
		}
		var tok *addedToken
		for _, c := range cands {
			if strings.HasPrefix(s[i:], m.toks[c].Content) {
				tok = &m.toks[c]
				break
			}
		}
		if tok == nil {
			i++
			continue
		}
		start, stop := i, i+len(tok.Content)
		i = stop
		if tok.SingleWord {
			if start > 0 && endsWithWordChar(s[:start]) || stop < len(s) && startsWithWordChar(s[stop:]) {
				continue
			}
		}
		if tok.LStrip {
			start = max(len(strings.TrimRightFunc(s[:start], unicode.IsSpace)), done)
		}
		if tok.RStrip {
			stop = len(s) - len(strings.TrimLeftFunc(s[stop:], unicode.IsSpace))
		}
		start = max(start, done)
		if start > done {
			fn(s[done:start], -1)
		}
		fn(s[start:stop], tok.ID)
		done = stop
		// Resume after any whitespace rstrip absorbed, so pieces never
		// overlap (Hugging Face resumes after the token proper, which only
		// differs for a token that itself starts with whitespace).
		i = max(i, stop)
	}
	if done < len(s) {
		fn(s[done:], -1)
	}
}

// isWordChar is the regex \w of Rust's regex crate, which Hugging Face uses
// for single_word: letters, marks, decimal digits, connector punctuation and
// the joiners.
func isWordChar(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) ||
		unicode.Is(unicode.Pc, r) || r == 0x200C || r == 0x200D
}

func endsWithWordChar(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return isWordChar(r)
}

func startsWithWordChar(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return isWordChar(r)
}
