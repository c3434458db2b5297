package samples

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/infermatrix/infermatrix/stats"
)

// reference is the in-memory summary the spilled one must match: the
// sorted samples, numpy's percentiles on them, and the mean and
// population deviation summed in ascending order.
func reference(vs []float64, qs []float64) Summary {
	s := slices.Clone(vs)
	slices.Sort(s)
	out := Summary{Count: len(s), Min: s[0], Max: s[len(s)-1]}
	var sum float64
	for _, v := range s {
		sum += v
	}
	out.Mean = sum / float64(len(s))
	var ss float64
	for _, v := range s {
		ss += (v - out.Mean) * (v - out.Mean)
	}
	out.Std = math.Sqrt(ss / float64(len(s)))
	for _, q := range qs {
		out.Percentiles = append(out.Percentiles, stats.Percentile(s, q))
	}
	return out
}

var testQs = []float64{0, 0.1, 1, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99, 100, 33.3333}

// near reports whether a and b agree within a relative 1e-12 (or an
// absolute 1e-12 near zero): the last digits compensated summation in
// another order may move.
func near(a, b float64) bool {
	return math.Abs(a-b) <= 1e-12*max(1, math.Abs(a), math.Abs(b))
}

// TestColumnMatchesSort: across the spill limit, a column's count, min,
// max and every percentile are bit for bit those of an in-memory sort,
// and its mean and deviation agree to the last digits, for a spread of
// distributions (continuous, heavy ties, constant, negative values, one
// sample, integers as token counts are).
func TestColumnMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gens := map[string]func(i int) float64{
		"lognormal": func(int) float64 { return math.Exp(rng.NormFloat64()) * 20 },
		"ties":      func(int) float64 { return float64(rng.IntN(3)) },
		"constant":  func(int) float64 { return 7.25 },
		"signed":    func(int) float64 { return rng.NormFloat64() * 1e-3 },
		"ramp":      func(i int) float64 { return float64(i) / 1e6 },
		"narrow":    func(int) float64 { return 1 + float64(rng.IntN(1000))*1e-15 },
		"zeros":     func(i int) float64 { return float64(i%2) * 0.001 },
	}
	for name, gen := range gens {
		for _, n := range []int{1, 2, 9, 10, 11, 37, 1000, 5000} {
			const limit = 10
			c := NewColumn(NewStore(t.TempDir()), limit)
			vs := make([]float64, n)
			for i := range vs {
				vs[i] = gen(i)
				c.Add(vs[i])
			}
			if c.Len() != n || c.Spilled() != (n > limit) {
				t.Fatalf("%s n=%d: len %d, spilled %v", name, n, c.Len(), c.Spilled())
			}
			got, err := c.Summarise(testQs)
			if err != nil {
				t.Fatalf("%s n=%d: %v", name, n, err)
			}
			want := reference(vs, testQs)
			if got.Count != want.Count || got.Min != want.Min || got.Max != want.Max {
				t.Errorf("%s n=%d: count/min/max %d %v %v; want %d %v %v", name, n, got.Count, got.Min, got.Max, want.Count, want.Min, want.Max)
			}
			if !near(got.Mean, want.Mean) || !near(got.Std, want.Std) {
				t.Errorf("%s n=%d: mean %v std %v; want %v %v", name, n, got.Mean, got.Std, want.Mean, want.Std)
			}
			for i, q := range testQs {
				if math.Float64bits(got.Percentiles[i]) != math.Float64bits(want.Percentiles[i]) {
					t.Errorf("%s n=%d: p%v %v; want %v", name, n, q, got.Percentiles[i], want.Percentiles[i])
				}
			}
			if p, err := c.Percentile(99.5); err != nil || p != stats.Percentile(sorted(vs), 99.5) {
				t.Errorf("%s n=%d: p99.5 %v (%v) after the summary", name, n, p, err)
			}
			if s, err := c.Sorted(); err != nil || !slices.Equal(s, sorted(vs)) {
				t.Errorf("%s n=%d: Sorted differs from the sorted samples (%v)", name, n, err)
			}
		}
	}
}

func sorted(vs []float64) []float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	return s
}

// TestColumnMemoryBounded: once spilled, a column keeps at most a block in
// memory however many samples it takes, and the rest is on disk.
func TestColumnMemoryBounded(t *testing.T) {
	st := NewStore(t.TempDir())
	c := NewColumn(st, 1000)
	for i := range 200_000 {
		c.Add(float64(i))
		if cap(c.mem) > 1000 {
			t.Fatalf("after %d samples: %d in memory; want at most the limit", i+1, cap(c.mem))
		}
	}
	if st.Size() < 8*(200_000-1000) {
		t.Errorf("%d bytes spilled; want the samples beyond a block", st.Size())
	}
	if p, _ := c.Percentile(50); p != 99999.5 {
		t.Errorf("p50 %v; want 99999.5", p)
	}
}

// TestColumnMerge: merging columns, spilled or not, keeps every sample of
// both (a timeslice's slots merge when the row outgrows MaxTimeslices).
func TestColumnMerge(t *testing.T) {
	st := NewStore(t.TempDir())
	var all []float64
	mk := func(n int, base float64) *Column {
		c := NewColumn(st, 8)
		for i := range n {
			v := base + float64(i)
			c.Add(v)
			all = append(all, v)
		}
		return &c
	}
	a, b, z := mk(5, 0), mk(30, 100), mk(3, 1000)
	a.Merge(b)
	a.Merge(z)
	var zero Column
	zero.Merge(a)
	zero.Add(-1)
	all = append(all, -1)
	got, err := zero.Sorted()
	if err != nil || !slices.Equal(got, sorted(all)) {
		t.Errorf("merged %v (%v); want %v", got, err, sorted(all))
	}
}

// TestColumnSpillFailure: a store that cannot create its file keeps the
// samples in memory, exact, and says why.
func TestColumnSpillFailure(t *testing.T) {
	c := NewColumn(NewStore(filepath.Join(t.TempDir(), "missing", "dir")), 4)
	for i := range 100 {
		c.Add(float64(i))
	}
	vs, ok := c.InMemory()
	if c.Err() == nil || !ok || len(vs) != 100 {
		t.Errorf("err %v, in memory %v with %d samples; want an error and all 100 in memory", c.Err(), ok, len(vs))
	}
}

// TestSpansSpillFailure: spans whose store cannot create its file stay in
// memory, all of them, and say why.
func TestSpansSpillFailure(t *testing.T) {
	s := NewSpans(NewStore(filepath.Join(t.TempDir(), "missing", "dir")), 4)
	for i := range 50 {
		s.Add(int64(i), int64(i+3))
	}
	n := 0
	if err := s.Walk(func(int64, int) { n++ }); err != nil || n != 100 || s.Err() == nil {
		t.Errorf("walked %d edges (%v), spill error %v; want 100 edges and the error", n, err, s.Err())
	}
	if spans, ok := s.InMemory(); !ok || len(spans) != 50 {
		t.Errorf("in memory %v, %d spans; want all 50", ok, len(spans))
	}
}

// TestSpansWalkMatchesSort: the edges walked from spilled runs are the
// sequence an in-memory sort of every edge gives, ends before starts at
// the same instant.
func TestSpansWalkMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 7, 8, 9, 100, 3000} {
		s := NewSpans(NewStore(t.TempDir()), 8)
		var want []int64
		for range n {
			start := int64(rng.IntN(50)) - 5 // ties and negative times
			end := start + int64(rng.IntN(10))
			s.Add(start, end)
			want = append(want, Edge(start, 1), Edge(end, -1))
		}
		slices.Sort(want)
		var got []int64
		if err := s.Walk(func(at int64, d int) { got = append(got, Edge(at, d)) }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("n=%d: walked %d edges, not the sorted %d", n, len(got), len(want))
		}
		if _, inMem := s.InMemory(); inMem != (n <= 8) {
			t.Errorf("n=%d: in memory %v", n, inMem)
		}
	}
	if at, d := EdgeOf(Edge(-3, 1)); at != -3 || d != 1 {
		t.Errorf("edge (-3, +1) decoded as (%d, %d)", at, d)
	}
	if !(Edge(5, -1) < Edge(5, 1) && Edge(5, 1) < Edge(6, -1)) {
		t.Error("edges out of sweep order")
	}
}

// BenchmarkSummarise is the cost of a spilled metric's summary (count,
// mean, std, min, max and five percentiles) per sample, against sorting
// the same samples in memory as an unspilled metric does.
func BenchmarkSummarise(b *testing.B) {
	const n = 4 << 20
	rng := rand.New(rand.NewPCG(5, 6))
	vs := make([]float64, n)
	for i := range vs {
		vs[i] = math.Round(math.Exp(rng.NormFloat64())*20e6) / 1e6 // ms from whole ns, as ITL is
	}
	qs := []float64{50, 90, 95, 99, 99.9}
	b.Run("spilled", func(b *testing.B) {
		c := NewColumn(NewStore(b.TempDir()), DefaultLimit)
		for _, v := range vs {
			c.Add(v)
		}
		b.ResetTimer()
		for b.Loop() {
			if _, err := c.Summarise(qs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/sample")
	})
	b.Run("sort", func(b *testing.B) {
		s := make([]float64, n)
		for b.Loop() {
			copy(s, vs)
			slices.Sort(s)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/sample")
	})
}
