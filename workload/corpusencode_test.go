package workload

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/tokenizer"
)

// TestCorpusEncodedInPiecesIsEncodedWhole: the corpus, encoded in pieces
// on several cores, has exactly the ids of its encoding in one piece, with
// every tokenizer the tests have, and the pieces are really used.
func TestCorpusEncodedInPiecesIsEncodedWhole(t *testing.T) {
	if cuts := corpusCuts(corpusText, corpusPieces); len(cuts) != corpusPieces-1 {
		t.Fatalf("the corpus is cut at %v, want %d cuts", cuts, corpusPieces-1)
	}
	toks := map[string]func(*testing.T) tokenizer.Tokenizer{
		"builtin": func(t *testing.T) tokenizer.Tokenizer { return builtinTok(t) },
		"qwen3":   qwen3Tok,
		"gpt2": func(t *testing.T) tokenizer.Tokenizer {
			dir := filepath.Join("..", "..", "shared", "tokenizers", "gpt2")
			if _, err := os.Stat(dir); err != nil {
				t.Skip("GPT-2 tokenizer not found at " + dir)
			}
			tok, err := tokenizer.New(dir)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		},
	}
	for name, load := range toks {
		t.Run(name, func(t *testing.T) {
			tok := load(t)
			for _, c := range corpusCuts(corpusText, corpusPieces) {
				if !seamHolds(tok, corpusText, c) {
					t.Errorf("the cut at %d does not hold", c)
				}
			}
			if got, want := encodeCorpus(tok, corpusText), tok.Encode(corpusText); !slices.Equal(got, want) {
				t.Errorf("in pieces: %d ids, whole: %d; they differ", len(got), len(want))
			}
		})
	}
}

// startMarker is a tokenizer that marks the start of every text it
// encodes, as SentencePiece's prefix space does: cutting a text changes
// its ids, and encodeCorpus must notice.
type startMarker struct{ tokenizer.Tokenizer }

func (s startMarker) Encode(text string) []int {
	return append([]int{-1}, s.Tokenizer.Encode(text)...)
}

func TestCorpusCutThatDoesNotHoldIsEncodedWhole(t *testing.T) {
	tok := startMarker{builtinTok(t)}
	text := strings.Repeat("Call me Ishmael.\n\nSome years ago, never mind how long.\n\n", 40)
	if len(corpusCuts(text, corpusPieces)) == 0 {
		t.Fatal("no cut")
	}
	if got, want := encodeCorpus(tok, text), tok.Encode(text); !slices.Equal(got, want) {
		t.Errorf("a tokenizer that marks each text's start: %d ids, want the %d of the whole text", len(got), len(want))
	}
}

func TestCorpusCuts(t *testing.T) {
	for _, c := range []struct {
		text string
		n    int
		want []int
	}{
		{"", 4, nil},
		{"no-spaces-at-all", 4, nil},
		{"aaaa bbbb cccc dddd", 4, []int{4, 9, 14}},
		{"aaaa. bbb,  cc 3 d ee", 2, []int{18}}, // after punctuation, beside a space or a digit: no
	} {
		if got := corpusCuts(c.text, c.n); !slices.Equal(got, c.want) {
			t.Errorf("corpusCuts(%q, %d) = %v, want %v", c.text, c.n, got, c.want)
		}
	}
}
