package workload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/tokenizer"
)

// qwen3Tok returns the Qwen3 tokenizer from the project's shared/ directory,
// skipping the test when it is absent (failing it when
// INFERMATRIX_REQUIRE_SHARED=1, as the tokenizer package's tests do).
func qwen3Tok(t *testing.T) tokenizer.Tokenizer {
	t.Helper()
	dir := filepath.Join("..", "..", "shared", "tokenizers", "qwen3")
	if _, err := os.Stat(dir); err != nil {
		msg := "Qwen3 tokenizer not found at " + dir
		if os.Getenv("INFERMATRIX_REQUIRE_SHARED") == "1" {
			t.Fatal(msg + "; INFERMATRIX_REQUIRE_SHARED=1 requires it")
		}
		t.Skip(msg + "; skipping")
	}
	tok, err := tokenizer.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestMooncakeBlocks checks the promise trace prompts make: equal leading
// hash ids give byte-identical leading text, whole blocks are exactly
// block-size tokens, and every prompt is exactly its input_length.
func TestMooncakeBlocks(t *testing.T) {
	for _, tc := range []struct {
		name string
		tok  func(*testing.T) tokenizer.Tokenizer
	}{
		{"builtin", func(t *testing.T) tokenizer.Tokenizer { return builtinTok(t) }},
		{"qwen3", qwen3Tok},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := tc.tok(t)
			const size = 64
			b := newBlockBuilder(corpusFor(tok), size, 42)
			for _, h := range []int64{0, 1, 2, 3, 7, -5, 1 << 40} {
				if n := tok.Count(b.block(h)); n != size {
					t.Errorf("block %d: %d tokens; want %d", h, n, size)
				}
			}
			if b.block(1) == b.block(2) {
				t.Error("different hash ids share their text")
			}
			type req struct {
				ids   []int64
				input int
			}
			reqs := []req{
				{[]int64{1, 2, 3}, 3 * size},   // whole blocks
				{[]int64{1, 2, 4}, 3*size - 9}, // a truncated last block
				{[]int64{1, 2}, 2*size - 63},   // a last block of one token
				{[]int64{1, 5}, 5 * size},      // ids stop short: the tail is the request's own
				{[]int64{1}, 1},                // one token
				{nil, 100},                     // no ids at all
				{[]int64{3, 2, 1}, 3 * size},   // the same ids in another order share nothing
			}
			texts := make([]string, len(reqs))
			for i, r := range reqs {
				text, got, _ := b.build(r.ids, r.input, uint64(i))
				if n := tok.Count(text); n != r.input || got != r.input {
					t.Errorf("ids %v, input %d: %d tokens (reported %d)", r.ids, r.input, n, got)
				}
				texts[i] = text
			}
			// The leading whole blocks are the blocks' own text, so
			// requests with equal leading ids share a byte-identical
			// prefix.
			b12 := b.block(1) + b.block(2)
			for i := 0; i < 3; i++ {
				if !strings.HasPrefix(texts[i], b.block(1)) {
					t.Errorf("request %d does not start with block 1", i)
				}
			}
			if !strings.HasPrefix(texts[0], b12) || !strings.HasPrefix(texts[1], b12) {
				t.Error("requests with ids 1, 2, ... do not share blocks 1 and 2 verbatim")
			}
			// A truncated last block is a prefix of that block's text.
			if tail := strings.TrimPrefix(texts[1], b12); !strings.HasPrefix(b.block(4), tail) {
				t.Errorf("truncated block 4 %q is not a prefix of block 4", tail)
			}
			if texts[0] == texts[1] || strings.HasPrefix(texts[6], b.block(1)) {
				t.Error("distinct ids gave the same text")
			}
			if !strings.HasPrefix(texts[6], b.block(3)+b.block(2)) {
				t.Error("ids 3, 2, 1 do not start with blocks 3 and 2")
			}
			// The tail beyond the ids is the request's own: another request
			// with the same ids and length gets another tail.
			other, _, _ := b.build([]int64{1, 5}, 5*size, 999)
			if other == texts[3] || !strings.HasPrefix(other, b.block(1)+b.block(5)) {
				t.Error("tails beyond the hash ids are shared between requests, or the ids are not")
			}
			// Another run (nonce) has other text for the same ids, so a
			// server's cache cannot hold a previous run's blocks.
			if newBlockBuilder(corpusFor(tok), size, 43).block(1) == b.block(1) {
				t.Error("a block's text is the same in another run")
			}
		})
	}
}

// TestBlockCacheIsBounded: the cache forgets blocks past its budget, and a
// forgotten block is rebuilt byte for byte.
func TestBlockCacheIsBounded(t *testing.T) {
	tok := builtinTok(t)
	b := newBlockBuilder(corpusFor(tok), 512, 1)
	first := b.block(1)
	b.bytes = maxBlockCacheBytes // as if full
	b.block(2)
	if _, ok := b.blocks[1]; ok {
		t.Error("a full cache kept its old block")
	}
	if b.block(1) != first {
		t.Error("a rebuilt block differs from the first build")
	}
}
