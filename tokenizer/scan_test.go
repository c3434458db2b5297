package tokenizer

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/dlclark/regexp2"
)

// The hand-written scanners must cut text exactly where regexp2 running the
// original pattern does; regexp2 in turn is checked against the Hugging Face
// library through the encoding tests.

// Qwen 2 and 3 write numbers as \p{N}, Llama 3 as \p{N}{1,3}.
const (
	qwenPattern   = llama3Prefix + `\p{N}` + llama3Suffix
	llama3Pattern = llama3Prefix + `\p{N}{1,3}` + llama3Suffix
)

var scanPatterns = []string{gpt2Pattern, qwenPattern, llama3Pattern, llama3Prefix + `\p{N}+` + llama3Suffix, o200kPattern}

// scanAlphabet mixes every class the patterns distinguish: ASCII and other
// letters, digits and other numbers, each kind of whitespace including the
// line breaks the patterns single out, apostrophes and contraction letters in
// both cases, characters whose case folding is unusual, and multi-byte
// punctuation and emoji. For o200k's case-aware word classes it also has
// letters of each category (Lu, Ll, Lt "ǅ", Lm "ʰ", Lo, including Latin-1's
// "ª") and marks of each kind (Mn, Mc "ः", Me "⃝"), and the '/' and the
// typographic apostrophe "’" that o200k treats as punctuation.
var scanAlphabet = []string{
	"a", "Z", "s", "S", "t", "T", "r", "R", "e", "E", "v", "V", "m", "M", "l", "L", "d", "D",
	"'", "'", "'", "é", "ſ", "K", "İ", "ß", "中", "文", "ア", "한",
	"0", "7", "٣", "½", "²", "Ⅻ",
	" ", " ", " ", "\t", "\n", "\r", "\v", "\f", "\u00a0", "\u3000", "\u2028", "\u0085", "\u200b", "\ufeff",
	".", ",", "!", "(", "-", "_", "<", "|", "\u0301", "—", "，", "🍕", "\u200d", "🇯", "\x00", "\x7f",
	"É", "Ω", "ω", "ǅ", "ʰ", "ª", "µ", "\u0903", "\u20dd", "/", "’",
}

func randomText(r *rand.Rand) string {
	var b strings.Builder
	for n := r.IntN(24); n >= 0; n-- {
		b.WriteString(scanAlphabet[r.IntN(len(scanAlphabet))])
	}
	return b.String()
}

func collect(m matcher, s string) [][2]int {
	var out [][2]int
	m.matches(s, func(start, end int) { out = append(out, [2]int{start, end}) })
	return out
}

var compiled sync.Map // pattern -> *regexp2.Regexp

func checkScanner(t *testing.T, pattern, s string) {
	t.Helper()
	fast := knownScanner(pattern)
	if fast == nil {
		t.Fatalf("no scanner for %q", pattern)
	}
	re, ok := compiled.Load(pattern)
	if !ok {
		c, err := regexp2.Compile(pattern, regexp2.None)
		if err != nil {
			t.Fatal(err)
		}
		re, _ = compiled.LoadOrStore(pattern, c)
	}
	want := collect(regexMatcher{re.(*regexp2.Regexp)}, s)
	if got := collect(fast, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("pattern %q, text %q:\nscanner %v\nregexp2 %v", pattern, s, got, want)
	}
}

func TestScannersMatchRegexp2(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 5000 // FuzzScanners explores further: go test -fuzz FuzzScanners
	if testing.Short() {
		n = 500
	}
	for i := 0; i < n; i++ {
		s := randomText(r)
		for _, p := range scanPatterns {
			checkScanner(t, p, s)
		}
	}
}

func FuzzScanners(f *testing.F) {
	for _, s := range []string{"", "Hello world", "don't I'LL", "a  \n\n b\r\n", "12345 ½", "我们 ok!!\n", " \t'sx",
		"HTTPServer camelCase ǅx ʰA", "\u0301ABC \u0301's !\u0301a", "a.\n/b //\r\n", "THEY'RE 1234567 x’s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// regexp2 backtracks in time quadratic in the length of some runs
		// (whitespace before (?!\S), o200k's capitals), which stalls the
		// fuzzer on long inputs.
		if len(s) > 2000 {
			t.Skip("long input")
		}
		s = strings.ToValidUTF8(s, "\uFFFD") // as Encode does first
		for _, p := range scanPatterns {
			checkScanner(t, p, s)
		}
	})
}

func TestKnownScanner(t *testing.T) {
	for _, p := range scanPatterns {
		if knownScanner(p) == nil {
			t.Errorf("no scanner for %q", p)
		}
	}
	for _, p := range []string{`\s+`, llama3Prefix + `\p{N}{2}` + llama3Suffix, llama3Prefix + `\p{N}{1,0}` + llama3Suffix} {
		if knownScanner(p) != nil {
			t.Errorf("scanner for unknown pattern %q", p)
		}
	}
}
