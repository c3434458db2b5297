package tokenizer

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// The builtin tokenizer must give exactly the ids of tiktoken-go's
// EncodeOrdinary, which it replaced for speed (see builtin.go) and which
// these tests keep as the oracle. groundtruth_test.go checks both against a
// third implementation (gpt-tokenizer).

// tiktokenOracle is tiktoken-go's o200k_base, its ranks read from the same
// embedded files (the offline loader; nothing is downloaded).
var tiktokenOracle = sync.OnceValues(func() (*tiktoken.Tiktoken, error) {
	tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
	return tiktoken.GetEncoding(o200k)
})

func oracle(tb testing.TB) *tiktoken.Tiktoken {
	tb.Helper()
	enc, err := tiktokenOracle()
	if err != nil {
		tb.Fatal(err)
	}
	return enc
}

// raceEnabled is set by race_test.go when the race detector is on. It makes
// the oracle (regexp2) about ten times slower, and the differential tests,
// which run in one goroutine, gain nothing from it, so they then take a
// fifth of their sample, as with -short; CI runs every test with -race, and
// a full run without it (or the fuzzers) explores further.
var raceEnabled bool

// sample returns n, or a fifth of it under -short or the race detector.
func sample(n int) int {
	if testing.Short() || raceEnabled {
		return n / 5
	}
	return n
}

func loadBuiltin(tb testing.TB) *builtin {
	tb.Helper()
	tk, err := New(Builtin)
	if err != nil {
		tb.Fatal(err)
	}
	return tk.(*builtin)
}

// checkOracle checks Encode, Count and Decode of s against tiktoken-go.
func checkOracle(t *testing.T, tk *builtin, enc *tiktoken.Tiktoken, s string) {
	t.Helper()
	want := enc.EncodeOrdinary(s)
	got := tk.Encode(s)
	if len(got) == 0 && len(want) == 0 {
		got = want
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Encode(%q)\n got %v\nwant %v (tiktoken-go)", s, got, want)
	}
	if n := tk.Count(s); n != len(want) {
		t.Fatalf("Count(%q) = %d, want %d", s, n, len(want))
	}
	// Invalid UTF-8 is encoded as U+FFFD per bad byte, as tiktoken-go does.
	if d, want := tk.Decode(got), enc.Decode(want); d != want {
		t.Fatalf("Decode(Encode(%q)) = %q, tiktoken-go decodes %q", s, d, want)
	}
	if d := tk.Decode(got); utf8.ValidString(s) && d != s {
		t.Fatalf("Decode(Encode(%q)) = %q", s, d)
	}
}

func TestBuiltinName(t *testing.T) {
	tk := loadBuiltin(t)
	if got := tk.Name(); got != "builtin:o200k_base" {
		t.Errorf("Name = %q", got)
	}
	if again, _ := New(""); again != Tokenizer(tk) {
		t.Error(`New("") did not return the cached builtin`)
	}
}

func TestBuiltinMatchesTiktokenOnGroundTruth(t *testing.T) {
	tk, enc := loadBuiltin(t), oracle(t)
	for _, c := range groundTruth {
		checkOracle(t, tk, enc, c.text)
	}
	for name := range longCounts {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		checkOracle(t, tk, enc, string(data))
	}
}

// mobyDick is the workload's prompt corpus: 330 kB of English prose with
// em dashes, curly quotes, chapter headings and numbers.
func mobyDick(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "workload", "corpus", "moby-dick.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestBuiltinMatchesTiktokenOnCorpus(t *testing.T) {
	tk, enc := loadBuiltin(t), oracle(t)
	text := mobyDick(t)
	// The whole text at once, then a few thousand slices of it: cut at
	// random bytes, so that some begin or end inside a character (invalid
	// UTF-8) or inside a word, a run of spaces or a line break.
	checkOracle(t, tk, enc, text)
	r := rand.New(rand.NewPCG(5, 6))
	for i := sample(3000); i > 0; i-- {
		size := 1 << r.IntN(12) // 1 byte to 4 kB, most of them short
		size += r.IntN(size)
		start := r.IntN(len(text))
		checkOracle(t, tk, enc, text[start:min(len(text), start+size)])
	}
}

// trickyPieces are the ingredients of trickyText: the cases the o200k
// pattern and BPE treat specially, including the contractions in every case
// (the pattern's (?i:...)) and with the typographic apostrophe (which is
// punctuation), runs of digits of every length around the three the pattern
// groups, case changes inside words, letters of every category, marks,
// emoji sequences, each kind of whitespace including the Unicode spaces,
// line breaks in every combination, punctuation before line breaks and
// slashes, the special-token texts (ordinary text here), and invalid UTF-8.
var trickyPieces = []string{
	"hello", "Hello", "HELLO", "hELLo", "camelCase", "HTTPServer", "iPhone", "McDonald", "a", "I", "x", "Z",
	"don", "they", "we", "CAN", "It",
	"'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'rE", "'ve", "'VE", "'m", "'M", "'ll", "'LL", "'Ll", "'d", "'D",
	"’s", "’LL", "’", "'", "''", "'x", "'l", "'r",
	"0", "1", "12", "123", "1234", "12345", "1234567", "٣٤٥", "½", "²", "Ⅻ", "3.14", "1,000",
	"中文", "日本語", "東京は", "한국어", "カタカナ", "ひらがな", "我们今天去公园散步",
	"🍕", "👍🏽", "👨\u200d👩\u200d👧", "🇯🇵", "❤️", "\u200d", "\ufe0f",
	"e\u0301", "\u0301", "\u0308", "\u0903", "\u20dd", "Å", "ǅ", "ǈ", "ʰ", "ª", "ß", "ſ", "K", "İ",
	"Ω", "ω", "Привет", "мир", "Γειά", "مرحبا", "שלום", "नमस्ते", "ไทย",
	" ", " ", " ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r", "\r\n", "\r\n\r\n", " \n", "\n ", "\t\n ",
	"\v", "\f", "\u00a0", "\u3000", "\u2028", "\u2029", "\u0085", "\u2009", "\u1680",
	".", "...", "!!", "?!", "--", "-", "/", "//", "://", "\\", "(", ")", "\"", "#", "@", "$", "%", "&", "*", "_",
	".\r\n", "!\n/", "}\n\n", ";\r\n/", ".//", ":/\n",
	"—", "–", "，", "。", "、", "©", "€", "«", "»", "“", "”",
	"<|endoftext|>", "<|endofprompt|>", "<|im_end|>", "<|",
	"\x00", "\x01", "\x7f", "\u00ad", "\ufeff", "\u200b", "\uFFFD",
	"\xff", "\xe4\xb8", "\x80", "\xed\xa0\x80",
}

func trickyText(r *rand.Rand) string {
	var b strings.Builder
	for n := r.IntN(40); n >= 0; n-- {
		b.WriteString(trickyPieces[r.IntN(len(trickyPieces))])
	}
	return b.String()
}

func TestBuiltinMatchesTiktokenOnTrickyText(t *testing.T) {
	tk, enc := loadBuiltin(t), oracle(t)
	r := rand.New(rand.NewPCG(7, 8))
	n := sample(5000)
	for i := 0; i < n; i++ {
		checkOracle(t, tk, enc, trickyText(r))
	}
	// Long pre-tokens, which the word cache leaves out: words and CJK runs
	// of hundreds of bytes, and long runs of whitespace and punctuation.
	for i := 0; i < n/50; i++ {
		var b strings.Builder
		piece := trickyPieces[r.IntN(len(trickyPieces))]
		for b.Len() < 200+r.IntN(800) {
			if r.IntN(4) == 0 {
				piece = trickyPieces[r.IntN(len(trickyPieces))]
			}
			b.WriteString(piece)
		}
		checkOracle(t, tk, enc, b.String())
	}
}

func FuzzBuiltinMatchesTiktoken(f *testing.F) {
	for _, c := range groundTruth {
		f.Add(c.text)
	}
	f.Add("don't I'LL THEY'RE x’s 1234567 a.\r\n/b")
	tk, enc := loadBuiltin(f), oracle(f)
	f.Fuzz(func(t *testing.T, s string) {
		// tiktoken-go takes time quadratic in the length of a pre-token
		// (0.7 s for 10,000 CJK characters), which stalls the fuzzer.
		if len(s) > 2000 {
			t.Skip("long input")
		}
		checkOracle(t, tk, enc, s)
	})
}

func TestO200kScannerMatchesRegexp2OnTrickyText(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for i := sample(5000); i > 0; i-- {
		// As Encode does first; the oracle tests cover invalid UTF-8.
		checkScanner(t, o200kPattern, strings.ToValidUTF8(trickyText(r), "\uFFFD"))
	}
}

// TestBuiltinMergeMatchesTiktokenBPE checks the merge step on its own
// against a direct port of tiktoken's byte_pair_merge (join the adjacent
// parts whose concatenation has the lowest rank, leftmost first), on words
// the pre-tokenizer would never produce: concatenations of random tokens.
func TestBuiltinMergeMatchesTiktokenBPE(t *testing.T) {
	tk := loadBuiltin(t)
	m := tk.model
	r := rand.New(rand.NewPCG(11, 12))
	for i := sample(3000); i > 0; i-- {
		var b strings.Builder
		for k := r.IntN(12); k >= 0; k-- {
			b.WriteString(tk.tokens.token(r.IntN(200000)))
		}
		w := b.String()
		got := m.merge(nil, w)
		if want := tiktokenBPE(tk.tokens.get, w); !reflect.DeepEqual(got, want) {
			t.Fatalf("merge(%q) = %v, want %v", w, got, want)
		}
	}
}

func tiktokenBPE(rank func(string) (int32, bool), word string) []int {
	bounds := make([]int, len(word)+1) // part i is word[bounds[i]:bounds[i+1]]
	for i := range bounds {
		bounds[i] = i
	}
	for {
		best, bestRank := -1, int32(0)
		for i := 0; i+2 < len(bounds); i++ {
			if r, ok := rank(word[bounds[i]:bounds[i+2]]); ok && (best < 0 || r < bestRank) {
				best, bestRank = i, r
			}
		}
		if best < 0 {
			break
		}
		bounds = append(bounds[:best+1], bounds[best+2:]...)
	}
	var ids []int
	for i := 0; i+1 < len(bounds); i++ {
		id, _ := rank(word[bounds[i]:bounds[i+1]])
		ids = append(ids, int(id))
	}
	return ids
}

func TestBuiltinDecode(t *testing.T) {
	tk := loadBuiltin(t)
	cases := []struct {
		ids  []int
		want string
	}{
		{nil, ""},
		{[]int{13225, 199999, 200018}, "Hello<|endoftext|><|endofprompt|>"},
		{[]int{13225, -1, 199998, 200000, 1 << 30}, "Hello"}, // no such tokens
		// Ids that cut a character in two decode to its bytes, invalid
		// UTF-8, as in tiktoken-go (the prompt builder relies on it).
		{[]int{173468}, oracle(t).Decode([]int{173468})},
	}
	for _, c := range cases {
		if got := tk.Decode(c.ids); got != c.want {
			t.Errorf("Decode(%v) = %q, want %q", c.ids, got, c.want)
		}
	}
	if s := tk.Decode([]int{173468}); utf8.ValidString(s) {
		t.Errorf("Decode(173468) = %q, want part of a character", s)
	}
	if got := tk.Encode("<|endoftext|>"); len(got) == 1 {
		t.Errorf("special token text encoded as a special token: %v", got)
	}
}

func TestBuiltinVocabulary(t *testing.T) {
	tk := loadBuiltin(t)
	m := tk.model
	n := 0
	for id := range tk.tokens.info {
		text := tk.tokens.token(id)
		if got, ok := tk.tokens.get(text); ok != (id < 199998) || ok && int(got) != id {
			t.Errorf("token %d (%q): table has %d, %v", id, text, got, ok)
		}
		if ok := text != ""; ok {
			n++
		}
	}
	if n != 199998+2 {
		t.Errorf("%d ids have text, want 199,998 tokens and 2 special tokens", n)
	}
	for b, id := range m.byteID {
		if tk.tokens.token(int(id)) != string([]byte{byte(b)}) {
			t.Errorf("byte %#02x has id %d, which decodes to %q", b, id, tk.tokens.token(int(id)))
		}
	}
	// Every token is what BPE makes of its own bytes, so emitting a
	// pre-token that is a token directly (ignoreMerges, as tiktoken does)
	// is only a shortcut for o200k_base; this would catch a vocabulary
	// for which it is not. (Every 5th token under -short or -race.)
	step := 5000 / sample(5000)
	for id := 0; id < 199998; id += step {
		text := tk.tokens.token(id)
		if len(text) < 2 {
			continue
		}
		if got := m.merge(nil, text); len(got) != 1 || got[0] != id {
			t.Errorf("merge(%q) = %v, want [%d]", text, got, id)
		}
	}
}

func TestParseTiktokenErrors(t *testing.T) {
	// A valid file with every byte, to which each case appends a line.
	var b strings.Builder
	for i := 0; i < 256; i++ {
		fmt.Fprintf(&b, "%s %d\n", base64.StdEncoding.EncodeToString([]byte{byte(i)}), i)
	}
	base := b.String()
	if tk, err := parseTiktoken(strings.NewReader(base+"aGk= 256\n"), 0, map[int]string{300: "<|x|>"}); err != nil {
		t.Fatal(err)
	} else if got := tk.Encode("hi"); !reflect.DeepEqual(got, []int{256}) {
		t.Errorf("Encode(hi) = %v, want [256]", got)
	} else if got := tk.Decode([]int{256, 300}); got != "hi<|x|>" {
		t.Errorf("Decode = %q", got)
	}
	cases := map[string]string{
		"":                                 "no tokens",
		base + "aGk=\n":                    "want \"base64 rank\"",
		base + "aGk= \n":                   "missing rank",
		base + "aGk= x\n":                  "bad rank",
		base + "aGk= 99999999999\n":        "too large",
		base + "!!!! 256\n":                "illegal base64",
		base + "aGk= 5\n":                  "rank 5 appears twice",
		base + "aA== 256\n":                "appears twice",
		base[strings.Index(base, "\n")+1:]: "byte 0x00 is not a token",
		base + strings.Repeat("A", 70<<10) + " 256\n": "line 257: longer than 65536 bytes",
		base + "aGk= 256": "", // no newline at the end: fine
	}
	for data, want := range cases {
		_, err := parseTiktoken(strings.NewReader(data), len(data), nil)
		if want == "" {
			if err != nil {
				t.Errorf("parseTiktoken(...%q): %v", data[max(0, len(data)-12):], err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseTiktoken(...%q) error = %v, want %q", data[max(0, len(data)-12):], err, want)
		}
	}
	if _, err := parseTiktoken(strings.NewReader(base), len(base), map[int]string{5: "<|x|>"}); err == nil || !strings.Contains(err.Error(), "id 5 of an ordinary token") {
		t.Errorf("special token on an ordinary id: error = %v", err)
	}
}

func TestBuiltinConcurrentUse(t *testing.T) {
	// A fresh tokenizer, so that the goroutines fill its word cache
	// together; run with -race.
	tk, err := newBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 2; k++ {
				for _, c := range groundTruth {
					if got := tk.Count(c.text); got != len(c.o200k) {
						t.Errorf("%s: Count = %d, want %d", c.name, got, len(c.o200k))
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}
