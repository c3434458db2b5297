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
// count, the worst case (every word merged from bytes).
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
	h, ok := tk.(*hfTokenizer)
	if !ok {
		b.Skip("no cache to empty")
	}
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		h.model.cache = wordCache{}
		h.model.cache.init()
		b.StartTimer()
		h.Count(text)
	}
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
	tk := qwen3ForBench(b)
	text := benchText(b, "english.txt")
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tk.Count(text)
		}
	})
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
