package workload

import (
	"testing"

	"github.com/infermatrix/infermatrix/schema"
)

// BenchmarkPromptAndBody measures what preparing one request costs the
// runner: a synthetic prompt of exactly 16 tokens and its chat body, as
// the load benchmarks send (issue 16 item 2). One op is one request.
func BenchmarkPromptAndBody(b *testing.B) {
	for _, api := range []string{"chat", "completions"} {
		b.Run(api, func(b *testing.B) {
			row := &schema.PlannedRow{ID: "t", Seed: 1, Input: schema.Length{Values: []int{16}}, Output: schema.Length{Values: []int{256}}}
			w, err := New(row, api, "m", builtinTok(b), 7)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			seq := int64(0)
			for b.Loop() {
				p := w.Prompt(seq)
				if _, err := w.Body(p, true); err != nil {
					b.Fatal(err)
				}
				seq++
			}
		})
	}
}
