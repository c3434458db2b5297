package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// The expected ids in groundtruth_test.go come from the Hugging Face
// tokenizers library itself (see the comment there).

func qwen3Path(t *testing.T) string {
	t.Helper()
	return filepath.Join(sharedDir(t), "qwen3", "tokenizer.json")
}

func loadQwen3(t *testing.T) Tokenizer {
	t.Helper()
	tk, err := New(qwen3Path(t))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

const gpt2Dir = "testdata/gpt2"

func loadGPT2Dir(t *testing.T) Tokenizer {
	t.Helper()
	tk, err := New(gpt2Dir)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// checkEncoding checks Encode and Count against want, and that Decode gives
// back decoded.
func checkEncoding(t *testing.T, tk Tokenizer, c gtCase, want []int, decoded string) {
	t.Helper()
	got := tk.Encode(c.text)
	if len(got) == 0 && len(want) == 0 {
		got = want // nil and empty are the same encoding
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: Encode(%q)\n got %v\nwant %v", c.name, c.text, got, want)
	}
	if n := tk.Count(c.text); n != len(want) {
		t.Errorf("%s: Count = %d, want %d", c.name, n, len(want))
	}
	if d := tk.Decode(want); d != decoded {
		t.Errorf("%s: Decode = %q, want %q", c.name, d, decoded)
	}
}

func TestQwen3MatchesHuggingFace(t *testing.T) {
	tk := loadQwen3(t)
	for _, c := range groundTruth {
		// Qwen normalizes to NFC, so decoding gives the NFC text.
		checkEncoding(t, tk, c, c.qwen3, norm.NFC.String(c.text))
	}
}

func TestGPT2MatchesHuggingFace(t *testing.T) {
	tk := loadGPT2Dir(t)
	if tk.Name() != gpt2Dir {
		t.Errorf("Name = %q, want %q", tk.Name(), gpt2Dir)
	}
	for _, c := range groundTruth {
		checkEncoding(t, tk, c, c.gpt2, c.text)
	}
}

// gpt2TokenizerJSON builds, from the files in testdata/gpt2, the
// tokenizer.json that the ground truth for gpt2 was computed with: GPT-2's
// own, less the parts encoding ignores. Its ByteLevel step omits use_regex,
// as files written before tokenizers 0.11 do.
func gpt2TokenizerJSON(t *testing.T) []byte {
	t.Helper()
	enc, err := os.ReadFile(filepath.Join(gpt2Dir, "encoder.json"))
	if err != nil {
		t.Fatal(err)
	}
	bpe, err := os.ReadFile(filepath.Join(gpt2Dir, "vocab.bpe"))
	if err != nil {
		t.Fatal(err)
	}
	var merges []string
	for _, l := range strings.Split(string(bpe), "\n")[1:] {
		if l != "" {
			merges = append(merges, l)
		}
	}
	m, err := json.Marshal(merges)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(`{
		"added_tokens": [{"id": 50256, "content": "<|endoftext|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": true}],
		"normalizer": null,
		"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true},
		"decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true},
		"model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": false,
			"vocab": ` + string(enc) + `, "merges": ` + string(m) + `}}`)
}

func TestGPT2TokenizerJSONMatchesHuggingFace(t *testing.T) {
	tk, err := parseHuggingFace(gpt2TokenizerJSON(t), "gpt2")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range groundTruth {
		checkEncoding(t, tk, c, c.gpt2, c.text)
	}
}

func TestBuiltinMatchesTiktoken(t *testing.T) {
	tk, err := New(Builtin)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range groundTruth {
		checkEncoding(t, tk, c, c.o200k, c.text)
	}
}

func TestLongTextCounts(t *testing.T) {
	builtin, err := New(Builtin)
	if err != nil {
		t.Fatal(err)
	}
	gpt2 := loadGPT2Dir(t)
	var qwen3 Tokenizer
	if _, err := os.Stat(sharedRel); err == nil || os.Getenv("INFERMATRIX_REQUIRE_SHARED") == "1" {
		qwen3 = loadQwen3(t)
	} else {
		t.Log("shared tokenizers absent: checking builtin and gpt2 only")
	}
	for name, want := range longCounts {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		if n := builtin.Count(text); n != want.o200k {
			t.Errorf("%s: builtin Count = %d, want %d", name, n, want.o200k)
		}
		if n := gpt2.Count(text); n != want.gpt2 {
			t.Errorf("%s: gpt2 Count = %d, want %d", name, n, want.gpt2)
		}
		if got := gpt2.Decode(gpt2.Encode(text)); got != text {
			t.Errorf("%s: gpt2 round trip changed the text", name)
		}
		if qwen3 == nil {
			continue
		}
		if n := qwen3.Count(text); n != want.qwen3 {
			t.Errorf("%s: qwen3 Count = %d, want %d", name, n, want.qwen3)
		}
		if got := qwen3.Decode(qwen3.Encode(text)); got != norm.NFC.String(text) {
			t.Errorf("%s: qwen3 round trip changed the text", name)
		}
	}
}

// tinyVariants rewrite testdata/tiny/tokenizer.json the way the ground truth
// generator did before encoding tinyTexts. The file's pre_tokenizer is
// Sequence[Digits, Split("-", MergedWithNext), ByteLevel].
var tinyVariants = map[string]func(j map[string]any){
	"base":                 func(map[string]any) {},
	"no_ignore_merges":     func(j map[string]any) { obj(j, "model")["ignore_merges"] = false },
	"removed":              func(j map[string]any) { preStep(j, 1)["behavior"] = "Removed" },
	"isolated":             func(j map[string]any) { preStep(j, 1)["behavior"] = "Isolated" },
	"merged_with_previous": func(j map[string]any) { preStep(j, 1)["behavior"] = "MergedWithPrevious" },
	"contiguous":           func(j map[string]any) { preStep(j, 1)["behavior"] = "Contiguous" },
	"inverted":             func(j map[string]any) { preStep(j, 1)["invert"] = true },
	"individual_digits":    func(j map[string]any) { preStep(j, 0)["individual_digits"] = true },
	"no_prefix_space":      func(j map[string]any) { preStep(j, 2)["add_prefix_space"] = false },
	"no_regex":             func(j map[string]any) { preStep(j, 2)["use_regex"] = false },
	"nfc":                  func(j map[string]any) { j["normalizer"] = map[string]any{"type": "NFC"} },
}

func obj(j map[string]any, key string) map[string]any { return j[key].(map[string]any) }

func preStep(j map[string]any, i int) map[string]any {
	return obj(j, "pre_tokenizer")["pretokenizers"].([]any)[i].(map[string]any)
}

func readTiny(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile("testdata/tiny/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	var j map[string]any
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	return j
}

func TestTinyVariantsMatchHuggingFace(t *testing.T) {
	if len(tinyVariants) != len(tinyTruth) {
		t.Fatalf("%d variants, %d with ground truth", len(tinyVariants), len(tinyTruth))
	}
	for name, variant := range tinyVariants {
		t.Run(name, func(t *testing.T) {
			j := readTiny(t)
			variant(j)
			data, err := json.Marshal(j)
			if err != nil {
				t.Fatal(err)
			}
			tk, err := parseHuggingFace(data, name)
			if err != nil {
				t.Fatal(err)
			}
			for i, text := range tinyTexts {
				want := tinyTruth[name][i]
				got := tk.Encode(text)
				if len(got) == 0 && len(want) == 0 {
					continue
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("Encode(%q)\n got %v\nwant %v", text, got, want)
				}
			}
		})
	}
}

func TestDecodePartialCharacters(t *testing.T) {
	tk := loadQwen3(t)
	// Ids and decodings from the Hugging Face library: "👨‍👩‍👧 中" is
	// 145367 (👨), 378 and 235 (the two halves of the zero-width joiner
	// U+200D), ...; decode stops inside the joiner after 378.
	cases := []struct {
		ids  []int
		want string
	}{
		{[]int{145367, 378}, "👨\uFFFD"},
		{[]int{378}, "\uFFFD"},
		{[]int{145367, 378, 235, 145233}, "👨\u200d👩"},
		{[]int{151645, 9707, 999999, -1}, "<|im_end|>Hello"}, // unknown ids are skipped
	}
	for _, c := range cases {
		if got := tk.Decode(c.ids); got != c.want {
			t.Errorf("Decode(%v) = %q, want %q", c.ids, got, c.want)
		}
	}
}

func TestAppendLossyUTF8(t *testing.T) {
	// What Rust's String::from_utf8_lossy returns: one U+FFFD per maximal
	// ill-formed subsequence.
	cases := map[string]string{
		"ok":                   "ok",
		"\xe4\xb8":             "\uFFFD",
		"\xe4\xb8a":            "\uFFFDa",
		"\xf0\x9f\x98":         "\uFFFD",
		"\xf0\x9f\x98\x80":     "😀",
		"\xff\xfe":             "\uFFFD\uFFFD",
		"\xed\xa0\x80":         "\uFFFD\uFFFD\uFFFD", // a surrogate: ED A0 is never valid
		"\xe0\x80\x80":         "\uFFFD\uFFFD\uFFFD", // overlong
		"a\x80b":               "a\uFFFDb",
		"\xc3":                 "\uFFFD",
		"\xf4\x90\x80\x80":     "\uFFFD\uFFFD\uFFFD\uFFFD", // above U+10FFFF
		"\xe4\xb8\xad\xe4\xb8": "中\uFFFD",
	}
	for in, want := range cases {
		if got := string(appendLossyUTF8(nil, []byte(in))); got != want {
			t.Errorf("lossy(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestInvalidUTF8Input(t *testing.T) {
	tk := loadGPT2Dir(t)
	// Invalid bytes are encoded as U+FFFD, like the text a server would
	// decode from them.
	if got, want := tk.Encode("a\xffb"), tk.Encode("a\uFFFDb"); !reflect.DeepEqual(got, want) {
		t.Errorf("Encode(invalid) = %v, want %v", got, want)
	}
}

func TestNewDirectoriesAndNames(t *testing.T) {
	tiny, err := New("testdata/tiny")
	if err != nil {
		t.Fatal(err)
	}
	if tiny.Name() != "testdata/tiny" {
		t.Errorf("Name = %q", tiny.Name())
	}
	if got, want := tiny.Encode("hello world"), tinyTruth["base"][0]; !reflect.DeepEqual(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	file, err := New("testdata/tiny/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	if file.Name() != "testdata/tiny/tokenizer.json" {
		t.Errorf("Name = %q", file.Name())
	}
	again, err := New("testdata/tiny")
	if err != nil || again != tiny {
		t.Errorf("New did not return the cached tokenizer: %v", err)
	}
	if _, err := New("testdata"); err == nil || !strings.Contains(err.Error(), "neither tokenizer.json") {
		t.Errorf("New(directory without tokenizer files) error = %v", err)
	}
	if _, err := New("testdata/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("New(missing directory) error = %v, want ErrNotExist", err)
	}
	if _, err := New("testdata/missing.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("New(missing file) error = %v, want ErrNotExist", err)
	}
	if _, err := New("testdata/english.txt"); err == nil {
		t.Error("New(text file) succeeded")
	}
}

func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name    string
		edit    func(j map[string]any)
		wantErr string
	}{
		{"wordpiece", func(j map[string]any) { obj(j, "model")["type"] = "WordPiece" }, `model type "WordPiece" is not supported`},
		{"lowercase", func(j map[string]any) { j["normalizer"] = map[string]any{"type": "Lowercase"} }, `normalizer "Lowercase" is not supported`},
		{"nested lowercase", func(j map[string]any) {
			j["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFC"}, map[string]any{"type": "Lowercase"}}}
		}, `normalizer "Lowercase" is not supported`},
		{"metaspace", func(j map[string]any) {
			j["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{map[string]any{"type": "Metaspace"}, map[string]any{"type": "ByteLevel"}}}
		}, `pre_tokenizer "Metaspace" is not supported`},
		{"no bytelevel", func(j map[string]any) { j["pre_tokenizer"] = map[string]any{"type": "Whitespace"} }, "does not end with ByteLevel"},
		{"no pre_tokenizer", func(j map[string]any) { j["pre_tokenizer"] = nil }, "does not end with ByteLevel"},
		{"bytelevel first", func(j map[string]any) {
			steps := obj(j, "pre_tokenizer")["pretokenizers"].([]any)
			steps[0], steps[2] = steps[2], steps[0]
		}, "does not end with ByteLevel"},
		{"split behavior", func(j map[string]any) { preStep(j, 1)["behavior"] = "Sideways" }, `split behavior "Sideways"`},
		{"bad regex", func(j map[string]any) { preStep(j, 1)["pattern"] = map[string]any{"Regex": "(unclosed"} }, "compile split regex"},
		{"dropout", func(j map[string]any) { obj(j, "model")["dropout"] = 0.1 }, "dropout"},
		{"wordpiece prefix", func(j map[string]any) { obj(j, "model")["continuing_subword_prefix"] = "##" }, "continuing_subword_prefix"},
		{"bad merge", func(j map[string]any) { obj(j, "model")["merges"] = []any{"a b c"} }, "merge 0"},
		{"merge out of vocab", func(j map[string]any) { obj(j, "model")["merges"] = []any{[]any{"q", "zz"}} }, "missing from the vocabulary"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := readTiny(t)
			c.edit(j)
			data, err := json.Marshal(j)
			if err != nil {
				t.Fatal(err)
			}
			_, err = parseHuggingFace(data, "tiny")
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, c.wantErr)
			}
		})
	}
	// The path leads every error from the loader.
	dir := t.TempDir()
	path := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(path, []byte(`{"model": {"type": "Unigram"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadHuggingFace(path); err == nil || !strings.HasPrefix(err.Error(), "tokenizer "+path+": ") {
		t.Errorf("error = %v, want it to start with the path", err)
	}
}

// TestMergeMatchesNaiveBPE checks the heap-based merge against the textbook
// loop (merge the lowest-ranked adjacent pair, leftmost first, until none
// is left) on random words, including long ones that the word cache skips.
func TestMergeMatchesNaiveBPE(t *testing.T) {
	h := loadGPT2Dir(t).(*hfTokenizer)
	r := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"a", "e", "t", "th", "in", "er", " ", "ing", "中", "é", "!", "\n", "ab", "re", "on"}
	for i := 0; i < 3000; i++ {
		var b strings.Builder
		for n := r.IntN(30); n >= 0; n-- {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		w := b.String()
		got := h.model.merge(nil, w)
		if want := naiveBPE(h.model, w); !reflect.DeepEqual(got, want) {
			t.Fatalf("merge(%q) = %v, want %v", w, got, want)
		}
	}
}

func naiveBPE(m *bpe, word string) []int {
	var ids []int32
	for i := 0; i < len(word); i++ {
		ids = append(ids, m.byteID[word[i]])
	}
	for {
		best := -1
		var bestMerge merge
		for i := 0; i+1 < len(ids); i++ {
			if mg, ok := m.merges.get(pairKey(ids[i], ids[i+1])); ok && (best < 0 || mg.rank < bestMerge.rank) {
				best, bestMerge = i, mg
			}
		}
		if best < 0 {
			break
		}
		ids = append(append(ids[:best], bestMerge.id), ids[best+2:]...)
	}
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

func TestConcurrentUse(t *testing.T) {
	// A fresh tokenizer, so that the goroutines fill its word cache
	// together; run with -race.
	tk, err := LoadGPT2(gpt2Dir)
	if err != nil {
		t.Fatal(err)
	}
	english, err := os.ReadFile("testdata/english.txt")
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{string(english)}
	for _, c := range groundTruth {
		texts = append(texts, c.text)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 3; k++ {
				for i, c := range groundTruth {
					if got := tk.Encode(c.text); len(got) != len(c.gpt2) || tk.Count(c.text) != len(c.gpt2) {
						errs <- fmt.Errorf("%s: got %d tokens, want %d", c.name, len(got), len(c.gpt2))
						return
					}
					_ = tk.Count(texts[(i+k)%len(texts)])
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestWordCacheIsBounded(t *testing.T) {
	tk, err := LoadGPT2(gpt2Dir)
	if err != nil {
		t.Fatal(err)
	}
	m := tk.(*hfTokenizer).model
	ids := []int{1, 2}
	for i := 0; i < 2*cacheShards*cacheEntriesPerShd; i++ {
		m.cache.put(strconv.Itoa(i), ids)
	}
	total := 0
	for i := range m.cache.shards {
		total += len(m.cache.shards[i].m)
	}
	if total > cacheShards*cacheEntriesPerShd {
		t.Errorf("cache holds %d words, limit %d", total, cacheShards*cacheEntriesPerShd)
	}
	// Hits after eviction still give the right ids.
	if got, want := tk.Encode(" hello world"), []int{23748, 995}; !reflect.DeepEqual(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
}
