package tokenizer

import (
	"os"
	"path/filepath"
	"testing"
)

// The benchmarks count a ~1,700-token English text and a ~1,500-character
// Chinese and Japanese text (both in testdata/, written for this package).
// Most count the same text repeatedly, so the BPE word cache is warm, as it
// is in a long benchmark run; the Cold ones empty the cache before each
// count, the worst case (every word merged from bytes). The Builtin ones are
// o200k_base, the default tokenizer that both the load generator and the
// built-in server count every prompt with.
//
//	go test -run '^$' -bench . ./tokenizer/

func benchText(b *testing.B, name string) string {
	b.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		b.Fatal(err)
	}
	return string(data)
}

func benchCount(b *testing.B, tk Tokenizer, text string) {
	b.Helper()
	b.SetBytes(int64(len(text)))
	n := tk.Count(text)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tk.Count(text)
	}
	b.ReportMetric(float64(n), "tokens/op")
}

func benchCountCold(b *testing.B, tk Tokenizer, text string) {
	b.Helper()
	var m *bpe
	switch t := tk.(type) {
	case *hfTokenizer:
		m = t.model
	case *builtin:
		m = t.model
	default:
		b.Skip("no cache to empty")
	}
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		m.cache = wordCache{}
		m.cache.init()
		b.StartTimer()
		tk.Count(text)
	}
}

func benchCountParallel(b *testing.B, tk Tokenizer, text string) {
	b.Helper()
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tk.Count(text)
		}
	})
}

func builtinForBench(b *testing.B) Tokenizer {
	b.Helper()
	tk, err := New(Builtin)
	if err != nil {
		b.Fatal(err)
	}
	return tk
}

func qwen3ForBench(b *testing.B) Tokenizer {
	b.Helper()
	tk, err := New(filepath.Join(sharedDir(b), "qwen3", "tokenizer.json"))
	if err != nil {
		b.Fatal(err)
	}
	return tk
}

func BenchmarkCountBuiltinEnglish(b *testing.B) {
	benchCount(b, builtinForBench(b), benchText(b, "english.txt"))
}

func BenchmarkCountBuiltinCJK(b *testing.B) {
	benchCount(b, builtinForBench(b), benchText(b, "cjk.txt"))
}

func BenchmarkCountBuiltinEnglishCold(b *testing.B) {
	benchCountCold(b, builtinForBench(b), benchText(b, "english.txt"))
}

func BenchmarkCountBuiltinCJKCold(b *testing.B) {
	benchCountCold(b, builtinForBench(b), benchText(b, "cjk.txt"))
}

func BenchmarkCountBuiltinEnglishParallel(b *testing.B) {
	benchCountParallel(b, builtinForBench(b), benchText(b, "english.txt"))
}

// BenchmarkLoadBuiltin is the one-time cost of the first New(Builtin):
// parsing the embedded ranks and building the token table.
func BenchmarkLoadBuiltin(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := newBuiltin(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCountQwen3English(b *testing.B) {
	benchCount(b, qwen3ForBench(b), benchText(b, "english.txt"))
}

func BenchmarkCountQwen3CJK(b *testing.B) {
	benchCount(b, qwen3ForBench(b), benchText(b, "cjk.txt"))
}

func BenchmarkCountQwen3EnglishCold(b *testing.B) {
	benchCountCold(b, qwen3ForBench(b), benchText(b, "english.txt"))
}

func BenchmarkCountQwen3CJKCold(b *testing.B) {
	benchCountCold(b, qwen3ForBench(b), benchText(b, "cjk.txt"))
}

func BenchmarkCountQwen3EnglishParallel(b *testing.B) {
	benchCountParallel(b, qwen3ForBench(b), benchText(b, "english.txt"))
}

func BenchmarkLoadQwen3(b *testing.B) {
	path := filepath.Join(sharedDir(b), "qwen3", "tokenizer.json")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadHuggingFace(path); err != nil {
			b.Fatal(err)
		}
	}
}
