package workload

import (
	"slices"
	"strings"
	"sync"

	"github.com/infermatrix/infermatrix/tokenizer"
)

// corpusPieces is how many pieces encodeCorpus cuts the corpus into. It is
// fixed, not the number of cores, so that the cuts, and with them the ids,
// are the same on every machine.
const corpusPieces = 4

// encodeCorpus is tok.Encode(text), on up to corpusPieces cores. Encoding
// the 330 KB corpus is the last thing a run does before its first request
// (a few tens of milliseconds on a small machine), so the text is cut
// where a BPE tokenizer's pre-tokenizer splits anyway (corpusCuts), and
// the pieces encoded at once. Each cut is checked: the paragraphs on
// either side of it must encode as one text to what they encode to apart.
// A tokenizer for which one does not (one that marks the start of a text,
// say) gets the whole text encoded in one piece instead.
func encodeCorpus(tok tokenizer.Tokenizer, text string) []int {
	cuts := corpusCuts(text, corpusPieces)
	if len(cuts) == 0 {
		return tok.Encode(text)
	}
	bounds := append(append([]int{0}, cuts...), len(text))
	parts := make([][]int, len(bounds)-1)
	seamOK := make([]bool, len(cuts))
	var wg sync.WaitGroup
	for i := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[i] = tok.Encode(text[bounds[i]:bounds[i+1]])
			if i < len(cuts) {
				seamOK[i] = seamHolds(tok, text, cuts[i])
			}
		}()
	}
	wg.Wait()
	if slices.Contains(seamOK, false) {
		return tok.Encode(text)
	}
	return slices.Concat(parts...)
}

// corpusCuts returns up to n-1 offsets that cut text into pieces of about
// equal length, each just before a space between two letters: the space
// goes with the word after it, in every pre-tokenizer here, whether the
// text is cut there or not. (At a paragraph break it would not: o200k's
// takes the break with the punctuation before it, GPT-2's takes it as one
// token at the end of a piece and as two inside the text.)
func corpusCuts(text string, n int) []int {
	var cuts []int
	for k := 1; k < n; k++ {
		for at := len(text) * k / n; ; {
			i := strings.IndexByte(text[at:], ' ')
			if i < 0 {
				break
			}
			c := at + i
			if c > 0 && isLetter(text[c-1]) && c+1 < len(text) && isLetter(text[c+1]) {
				if len(cuts) == 0 || c > cuts[len(cuts)-1] {
					cuts = append(cuts, c)
				}
				break
			}
			at = c + 1
		}
	}
	return cuts
}

func isLetter(c byte) bool { return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }

// seamHolds reports whether the paragraph cut at c encodes whole to what
// its two parts encode to apart.
func seamHolds(tok tokenizer.Tokenizer, text string, c int) bool {
	from := strings.LastIndex(text[:c], "\n\n")
	if from < 0 {
		from = 0
	}
	to := strings.Index(text[c:], "\n\n")
	if to < 0 {
		to = len(text)
	} else {
		to += c
	}
	return slices.Equal(tok.Encode(text[from:to]), append(tok.Encode(text[from:c]), tok.Encode(text[c:to])...))
}
