package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// LoadHuggingFace reads a Hugging Face tokenizer.json whose model is a
// byte-level BPE (GPT-2, Llama 3, Qwen 2 and 3, Mistral's Tekken, DeepSeek and
// most other current models) and returns a tokenizer that encodes like the
// tokenizers library's encode(text, add_special_tokens=False), added tokens
// included: "<|im_end|>" in the text is one token, as a server sees it. The
// tokenizer's Name is path.
//
// Supported: normalizer null, NFC, NFD, NFKC, NFKD or a Sequence of them;
// pre_tokenizer ByteLevel, Split, Digits or a Sequence of them ending in
// ByteLevel; merges as "a b" strings or ["a", "b"] pairs; ignore_merges.
// Anything else (SentencePiece-style Metaspace models, WordPiece, Unigram,
// lowercasing normalizers) is an error rather than a silently wrong count.
func LoadHuggingFace(path string) (Tokenizer, error) {
	return loadHuggingFace(path, path)
}

// LoadGPT2 reads OpenAI's original GPT-2 files, encoder.json (the vocabulary)
// and vocab.bpe (the merges), from dir. They describe the same byte-level BPE
// as GPT-2's tokenizer.json, so the result encodes like it: the GPT-2 regex
// pre-tokenizer, no normalizer, and "<|endoftext|>" as an added token.
func LoadGPT2(dir string) (Tokenizer, error) {
	return loadGPT2(dir, dir)
}

// hfJSON is the part of tokenizer.json this package reads. Truncation,
// padding and the post-processor only matter for add_special_tokens=True or
// batches, and the decoder is always the byte-level one for these models.
type hfJSON struct {
	AddedTokens  []addedToken    `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Model        struct {
		Type                    string          `json:"type"`
		Dropout                 *float64        `json:"dropout"`
		UnkToken                *string         `json:"unk_token"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
		FuseUnk                 bool            `json:"fuse_unk"`
		IgnoreMerges            bool            `json:"ignore_merges"`
		Vocab                   map[string]int  `json:"vocab"`
		Merges                  json.RawMessage `json:"merges"`
	} `json:"model"`
}

func loadHuggingFace(path, name string) (Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", name, err)
	}
	t, err := parseHuggingFace(data, name)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", name, err)
	}
	return t, nil
}

func parseHuggingFace(data []byte, name string) (*hfTokenizer, error) {
	var f hfJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("parse tokenizer.json: %w", err)
	}
	m := &f.Model
	if m.Type != "BPE" && !(m.Type == "" && m.Merges != nil) {
		return nil, fmt.Errorf("model type %q is not supported: only byte-level BPE is", m.Type)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return nil, fmt.Errorf("bpe dropout %v is not supported: it makes encoding random", *m.Dropout)
	}
	if p := m.ContinuingSubwordPrefix; p != nil && *p != "" {
		return nil, fmt.Errorf("continuing_subword_prefix %q is not supported: not a byte-level BPE", *p)
	}
	if s := m.EndOfWordSuffix; s != nil && *s != "" {
		return nil, fmt.Errorf("end_of_word_suffix %q is not supported: not a byte-level BPE", *s)
	}
	merges, err := parseMerges(m.Merges)
	if err != nil {
		return nil, err
	}
	normalize, err := buildNormalizer(f.Normalizer)
	if err != nil {
		return nil, err
	}
	pre, err := buildPreTokenizer(f.PreTokenizer)
	if err != nil {
		return nil, err
	}
	unk := ""
	if m.UnkToken != nil {
		unk = *m.UnkToken
	}
	return build(name, bpeSpec{
		vocab:        m.Vocab,
		merges:       merges,
		ignoreMerges: m.IgnoreMerges,
		unk:          unk,
		fuseUnk:      m.FuseUnk,
		added:        f.AddedTokens,
		normalize:    normalize,
		pre:          pre,
	})
}

// parseMerges accepts both spellings of the merges list: "a b" strings
// (tokenizers before 0.20, and Llama 3's file) and ["a", "b"] pairs (newer
// files such as Qwen3's, which can hold tokens containing spaces).
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	// The first element says which spelling this is; trying one and then
	// the other would parse megabytes twice.
	if !firstElementIsArray(raw) {
		var lines []string
		if err := json.Unmarshal(raw, &lines); err != nil {
			return nil, fmt.Errorf("parse merges: want \"a b\" strings or [\"a\", \"b\"] pairs: %w", err)
		}
		merges := make([][2]string, len(lines))
		for i, l := range lines {
			a, b, ok := strings.Cut(l, " ")
			if !ok || strings.Contains(b, " ") {
				return nil, fmt.Errorf("merge %d %q: want two tokens separated by one space", i, l)
			}
			merges[i] = [2]string{a, b}
		}
		return merges, nil
	}
	// Decoding into arrays rather than slices saves an allocation per pair.
	var merges [][2]string
	if err := json.Unmarshal(raw, &merges); err != nil {
		return nil, fmt.Errorf("parse merges: want \"a b\" strings or [\"a\", \"b\"] pairs: %w", err)
	}
	for i, p := range merges {
		if p[0] == "" || p[1] == "" {
			return nil, fmt.Errorf("merge %d: want a pair of tokens, got %q", i, p)
		}
	}
	return merges, nil
}

func firstElementIsArray(raw []byte) bool {
	const ws = " \t\r\n"
	raw = bytes.TrimLeft(raw, ws)
	if len(raw) == 0 || raw[0] != '[' {
		return false
	}
	raw = bytes.TrimLeft(raw[1:], ws)
	return len(raw) > 0 && raw[0] == '['
}

type normalizerJSON struct {
	Type        string            `json:"type"`
	Normalizers []json.RawMessage `json:"normalizers"`
}

// buildNormalizer returns the normalizer described by raw, nil for none.
// Only the Unicode normal forms are supported: they are what byte-level
// models use (Qwen: NFC), and others (Lowercase, Replace, Prepend...) belong
// to tokenizers this package does not handle anyway.
func buildNormalizer(raw json.RawMessage) (func(string) string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var n normalizerJSON
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, fmt.Errorf("parse normalizer: %w", err)
	}
	switch n.Type {
	case "NFC":
		return nfc, nil
	case "NFD":
		return norm.NFD.String, nil
	case "NFKC":
		return norm.NFKC.String, nil
	case "NFKD":
		return norm.NFKD.String, nil
	case "Sequence":
		var steps []func(string) string
		for _, r := range n.Normalizers {
			s, err := buildNormalizer(r)
			if err != nil {
				return nil, err
			}
			if s != nil {
				steps = append(steps, s)
			}
		}
		switch len(steps) {
		case 0:
			return nil, nil
		case 1:
			return steps[0], nil
		}
		return func(s string) string {
			for _, f := range steps {
				s = f(s)
			}
			return s
		}, nil
	}
	return nil, fmt.Errorf("normalizer %q is not supported (supported: NFC, NFD, NFKC, NFKD, Sequence)", n.Type)
}

type preTokenizerJSON struct {
	Type           string `json:"type"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	UseRegex       *bool  `json:"use_regex"`
	Pattern        *struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior         string            `json:"behavior"`
	Invert           bool              `json:"invert"`
	IndividualDigits bool              `json:"individual_digits"`
	Pretokenizers    []json.RawMessage `json:"pretokenizers"`
}

// buildPreTokenizer turns the pre_tokenizer of tokenizer.json into a
// preTokenizer. It must end with ByteLevel, the step that makes the model
// byte-level; the byte mapping itself is implicit here (BPE runs on raw
// bytes), so only its optional prefix space and GPT-2 regex remain as steps.
func buildPreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	var steps []preTokenizerJSON
	if err := flattenPre(raw, &steps); err != nil {
		return nil, err
	}
	if len(steps) == 0 || steps[len(steps)-1].Type != "ByteLevel" {
		return nil, errors.New("pre_tokenizer does not end with ByteLevel: only byte-level BPE tokenizers are supported")
	}
	var out []preTokenizer
	for i, s := range steps {
		switch s.Type {
		case "ByteLevel":
			if i != len(steps)-1 {
				return nil, errors.New("pre_tokenizer has ByteLevel before other steps, which is not supported")
			}
			if s.AddPrefixSpace {
				out = append(out, prefixSpacePre{})
			}
			// use_regex appeared in tokenizers 0.11; files written
			// before it always used the regex.
			if s.UseRegex == nil || *s.UseRegex {
				m, err := compilePattern(gpt2Pattern)
				if err != nil {
					return nil, fmt.Errorf("compile byte-level regex: %w", err)
				}
				out = append(out, splitPre{m: m, behavior: behaviorIsolated})
			}
		case "Split":
			b, ok := splitBehaviors[s.Behavior]
			if !ok {
				return nil, fmt.Errorf("split behavior %q is not supported", s.Behavior)
			}
			var m matcher
			switch {
			case s.Pattern != nil && s.Pattern.Regex != nil:
				var err error
				if m, err = compilePattern(*s.Pattern.Regex); err != nil {
					return nil, fmt.Errorf("compile split regex %q: %w", *s.Pattern.Regex, err)
				}
			case s.Pattern != nil && s.Pattern.String != nil && *s.Pattern.String != "":
				m = literalMatcher{*s.Pattern.String}
			default:
				return nil, errors.New("split pre-tokenizer has no pattern")
			}
			out = append(out, splitPre{m: m, behavior: b, invert: s.Invert})
		case "Digits":
			b := behaviorContiguous
			if s.IndividualDigits {
				b = behaviorIsolated
			}
			out = append(out, splitPre{m: digitMatcher{}, behavior: b})
		default:
			return nil, fmt.Errorf("pre_tokenizer %q is not supported (supported: ByteLevel, Split, Digits, Sequence)", s.Type)
		}
	}
	switch len(out) {
	case 0:
		return wholePre{}, nil
	case 1:
		return out[0], nil
	}
	return sequencePre{out}, nil
}

// flattenPre appends the steps of raw to steps, expanding nested Sequences.
func flattenPre(raw json.RawMessage, steps *[]preTokenizerJSON) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var p preTokenizerJSON
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("parse pre_tokenizer: %w", err)
	}
	if p.Type != "Sequence" {
		*steps = append(*steps, p)
		return nil
	}
	for _, r := range p.Pretokenizers {
		if err := flattenPre(r, steps); err != nil {
			return err
		}
	}
	return nil
}

// bpeSpec is what both file formats provide, in vocabulary spelling (bytes
// mapped to printable characters).
type bpeSpec struct {
	vocab        map[string]int
	merges       [][2]string
	ignoreMerges bool
	unk          string
	fuseUnk      bool
	added        []addedToken
	normalize    func(string) string
	pre          preTokenizer
}

func build(name string, s bpeSpec) (*hfTokenizer, error) {
	if len(s.vocab) == 0 {
		return nil, errors.New("vocabulary is empty")
	}
	m := &bpe{
		merges:       newMergeTable(len(s.merges)),
		ignoreMerges: s.ignoreMerges,
		unk:          -1,
		fuseUnk:      s.fuseUnk,
	}
	m.cache.init()
	for b := range m.byteID {
		m.byteID[b] = -1
		if id, ok := s.vocab[string(byteToRune[b])]; ok {
			m.byteID[b] = int32(id)
		}
	}
	if s.unk != "" {
		id, ok := s.vocab[s.unk]
		if !ok {
			return nil, fmt.Errorf("unk_token %q is not in the vocabulary", s.unk)
		}
		m.unk = int32(id)
	}
	var buf []byte
	for rank, p := range s.merges {
		a, okA := s.vocab[p[0]]
		b, okB := s.vocab[p[1]]
		buf = append(append(buf[:0], p[0]...), p[1]...)
		c, okC := s.vocab[string(buf)] // no allocation for the lookup
		if !okA || !okB || !okC {
			return nil, fmt.Errorf("merge %d (%q %q) uses a token missing from the vocabulary", rank, p[0], p[1])
		}
		// A repeated pair keeps its last rank, as in Hugging Face, whose
		// merge map is collected from the list in order.
		m.merges.put(pairKey(int32(a), int32(b)), merge{rank: int32(rank), id: int32(c)})
	}

	maxID := -1
	for _, id := range s.vocab {
		maxID = max(maxID, id)
	}
	for _, a := range s.added {
		maxID = max(maxID, a.ID)
	}
	t := &hfTokenizer{name: name, normalize: s.normalize, pre: s.pre, model: m, text: make([]string, maxID+1)}
	if s.ignoreMerges {
		m.vocab = make(map[string]int32, len(s.vocab))
	}
	for tok, id := range s.vocab {
		if id < 0 {
			return nil, fmt.Errorf("token %q has negative id %d", tok, id)
		}
		raw, ok := unmapBytes(tok)
		if !ok {
			// Not spelled in the byte alphabet: BPE can never produce
			// it, and the ByteLevel decoder passes such a token through
			// unchanged.
			t.text[id] = tok
			continue
		}
		t.text[id] = string(raw)
		if m.vocab != nil {
			m.vocab[string(raw)] = int32(id)
		}
	}

	var rawAdded, normAdded []addedToken
	for _, a := range s.added {
		if a.Content == "" || a.ID < 0 {
			continue
		}
		// Added tokens decode to their content: the text that produced
		// them, so Decode(Encode(s)) == s holds for them too.
		t.text[a.ID] = a.Content
		if !a.Normalized {
			rawAdded = append(rawAdded, a)
			continue
		}
		// Matched against normalized text, so normalize the pattern too,
		// as Hugging Face does.
		if s.normalize != nil {
			a.Content = s.normalize(a.Content)
		}
		normAdded = append(normAdded, a)
	}
	t.rawAdded = newAddedMatcher(rawAdded)
	t.normAdded = newAddedMatcher(normAdded)
	return t, nil
}

func loadGPT2(dir, name string) (Tokenizer, error) {
	data, err := os.ReadFile(filepath.Join(dir, "encoder.json"))
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", name, err)
	}
	var vocab map[string]int
	if err := json.Unmarshal(data, &vocab); err != nil {
		return nil, fmt.Errorf("tokenizer %s: parse encoder.json: %w", name, err)
	}
	data, err = os.ReadFile(filepath.Join(dir, "vocab.bpe"))
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", name, err)
	}
	var merges [][2]string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimRight(sc.Text(), "\r")
		if l == "" || line == 1 && strings.HasPrefix(l, "#version") {
			continue
		}
		a, b, ok := strings.Cut(l, " ")
		if !ok || strings.Contains(b, " ") {
			return nil, fmt.Errorf("tokenizer %s: vocab.bpe line %d %q: want two tokens separated by one space", name, line, l)
		}
		merges = append(merges, [2]string{a, b})
	}
	m, err := compilePattern(gpt2Pattern)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: compile byte-level regex: %w", name, err)
	}
	spec := bpeSpec{vocab: vocab, merges: merges, pre: splitPre{m: m, behavior: behaviorIsolated}}
	// GPT-2's tokenizer.json declares its one special token this way.
	if id, ok := vocab[gpt2EndOfText]; ok {
		spec.added = []addedToken{{ID: id, Content: gpt2EndOfText, Normalized: true, Special: true}}
	}
	t, err := build(name, spec)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", name, err)
	}
	return t, nil
}

const gpt2EndOfText = "<|endoftext|>"
