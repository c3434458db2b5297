package samples

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Column is one metric's samples. It keeps them in memory up to its limit,
// as a slice the caller can sort and read (InMemory), and beyond it spills
// them to its Store in blocks, keeping only the block being filled. A
// Column must not be copied once used, nor added to after it is read.
type Column struct {
	store *Store
	limit int // samples in memory before the first spill
	room  int // samples mem may hold before the next write
	mem   []float64
	// blocks are the spilled samples, in the store's file, in the order
	// they were added.
	blocks  []block
	spilled int
	err     error // a failed spill: the samples stay in memory
}

type block struct {
	off int64
	n   int
}

// NewColumn returns an empty column spilling to s beyond limit samples; a
// limit ≤ 0 means DefaultLimit, and a nil store never spills.
func NewColumn(s *Store, limit int) Column {
	if limit <= 0 {
		limit = DefaultLimit
	}
	room := limit
	if s == nil {
		room = math.MaxInt
	}
	return Column{store: s, limit: limit, room: room}
}

// Add appends v, which must not be NaN. It costs an append while the
// column is in memory, and a buffered write of a block every
// min(limit, 8 Ki) samples once it has spilled.
func (c *Column) Add(v float64) {
	if len(c.mem) < cap(c.mem) {
		c.mem = append(c.mem, v)
		return
	}
	c.grow()
	c.mem = append(c.mem, v)
}

// grow makes room for one more sample: it spills at the limit, and
// otherwise grows the slice as append would, but never past the limit.
func (c *Column) grow() {
	if len(c.mem) >= c.room {
		c.spill()
		if len(c.mem) < cap(c.mem) {
			return
		}
	}
	n := min(max(2*cap(c.mem), 16), c.room)
	if n <= len(c.mem) {
		n = len(c.mem) + 1
	}
	m := make([]float64, len(c.mem), n)
	copy(m, c.mem)
	c.mem = m
}

// blockSize is the samples written at a time once the column has spilled.
func (c *Column) blockSize() int { return min(c.limit, maxBlock) }

// spill writes mem out in blocks and keeps a block's room in memory. A
// failed write keeps every sample in memory from then on: the figures stay
// exact, and only the memory bound is lost (Err says why).
func (c *Column) spill() {
	if c.room == 0 {
		// The zero Column: never spills.
		c.room = math.MaxInt
		return
	}
	bs := c.blockSize()
	for i := 0; i < len(c.mem); i += bs {
		part := c.mem[i:min(i+bs, len(c.mem))]
		off, err := c.store.appendFloats(part)
		if err != nil {
			// Keep what was not written.
			c.mem = c.mem[i:]
			c.err, c.room = err, math.MaxInt
			return
		}
		c.blocks = append(c.blocks, block{off, len(part)})
		c.spilled += len(part)
	}
	if cap(c.mem) > bs {
		c.mem = make([]float64, 0, bs)
	} else {
		c.mem = c.mem[:0]
	}
	c.room = bs
}

// Len is the number of samples.
func (c *Column) Len() int { return c.spilled + len(c.mem) }

// Spilled reports whether some samples are on disk.
func (c *Column) Spilled() bool { return len(c.blocks) > 0 }

// Err is the error of a failed spill, after which the column kept its
// samples in memory; nil otherwise.
func (c *Column) Err() error { return c.err }

// InMemory returns the samples, in the order added, when none has
// spilled; the slice is the column's own (the caller may sort it, but
// must not add to the column after).
func (c *Column) InMemory() ([]float64, bool) {
	if c.Spilled() {
		return nil, false
	}
	return c.mem, true
}

// Merge moves o's samples into c; both must spill to the same store, and
// o must not be used after.
func (c *Column) Merge(o *Column) {
	if len(o.blocks) > 0 {
		if c.store == nil {
			c.store, c.limit = o.store, o.limit
		}
		c.blocks = append(c.blocks, o.blocks...)
		c.spilled += o.spilled
		if c.err == nil {
			// Spilled now: what is in memory goes out at the next Add.
			c.room = c.blockSize()
		}
	}
	for _, v := range o.mem {
		c.Add(v)
	}
	*o = Column{}
}

// each calls fn with the samples, a block at a time, in the order added.
func (c *Column) each(fn func([]float64)) error {
	var raw []byte
	var vs []float64
	for _, b := range c.blocks {
		if cap(raw) < 8*b.n {
			raw = make([]byte, 8*b.n)
			vs = make([]float64, b.n)
		}
		raw, vs = raw[:8*b.n], vs[:b.n]
		if err := c.store.read(b.off, raw); err != nil {
			return err
		}
		for i := range vs {
			vs[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
		}
		fn(vs)
	}
	fn(c.mem)
	return nil
}

// Summary is a column's statistics.
type Summary struct {
	Count               int
	Mean, Std, Min, Max float64
	// Percentiles are in the order asked for.
	Percentiles []float64
}

// Summarise computes the column's statistics with bounded memory, reading
// its spilled samples a few times: one pass for the count, mean, min and
// max, one for the standard deviation, and two or three for each batch of
// percentiles (see Percentiles). The mean and deviation are compensated
// (Neumaier) sums over the samples in the order added; an in-memory sort
// sums them in ascending order, so the two may differ in the last digits
// of the mean and deviation, never in a percentile, min or max.
func (c *Column) Summarise(qs []float64) (Summary, error) {
	s := Summary{Count: c.Len()}
	if s.Count == 0 {
		return s, nil
	}
	var sum compensated
	s.Min, s.Max = math.Inf(1), math.Inf(-1)
	if err := c.each(func(vs []float64) {
		for _, v := range vs {
			sum.add(v)
			s.Min, s.Max = min(s.Min, v), max(s.Max, v)
		}
	}); err != nil {
		return Summary{}, err
	}
	n := float64(s.Count)
	s.Mean = sum.value() / n
	var ss compensated
	if err := c.each(func(vs []float64) {
		for _, v := range vs {
			d := v - s.Mean
			ss.add(d * d)
		}
	}); err != nil {
		return Summary{}, err
	}
	s.Std = math.Sqrt(ss.value() / n)
	ps, err := c.Percentiles(qs)
	if err != nil {
		return Summary{}, err
	}
	s.Percentiles = ps
	return s, nil
}

// compensated is Neumaier's compensated sum.
type compensated struct{ sum, c float64 }

func (k *compensated) add(v float64) {
	t := k.sum + v
	if math.Abs(k.sum) >= math.Abs(v) {
		k.c += (k.sum - t) + v
	} else {
		k.c += (v - t) + k.sum
	}
	k.sum = t
}

func (k *compensated) value() float64 { return k.sum + k.c }

// Percentile is the q-th percentile (0 ≤ q ≤ 100) of the samples.
func (c *Column) Percentile(q float64) (float64, error) {
	ps, err := c.Percentiles([]float64{q})
	if err != nil {
		return 0, err
	}
	return ps[0], nil
}

// Percentiles returns the q-th percentiles of the samples, each exactly
// as numpy.percentile's default (linear interpolation between the closest
// ranks, Hyndman and Fan's type 7) would on the sorted samples: the order
// statistics it needs are found by selection, without sorting the whole.
// Each pass over the samples counts, for every range of values still
// holding a wanted rank, its values by the next 16 bits of their
// order-preserving bit pattern (fewer for a range of fewer values); the ranges whose values fit the column's
// limit are then read into memory and sorted. Three passes suffice for
// real data; ties and a constant column end at the full 64 bits, where a
// range is one value.
func (c *Column) Percentiles(qs []float64) ([]float64, error) {
	n := c.Len()
	out := make([]float64, len(qs))
	if n == 0 {
		for i := range out {
			out[i] = math.NaN()
		}
		return out, nil
	}
	for _, q := range qs {
		if !(q >= 0 && q <= 100) {
			return nil, fmt.Errorf("percentile %v is outside 0..100", q)
		}
	}
	if vs, ok := c.InMemory(); ok {
		s := slices.Clone(vs)
		slices.Sort(s)
		for i, q := range qs {
			out[i] = interpolate(n, q, func(r int) float64 { return s[r] })
		}
		return out, nil
	}
	var ranks []int64
	for _, q := range qs {
		interpolate(n, q, func(r int) float64 { ranks = append(ranks, int64(r)); return 0 })
	}
	slices.Sort(ranks)
	ranks = slices.Compact(ranks)
	at, err := c.selectRanks(ranks)
	if err != nil {
		return nil, err
	}
	for i, q := range qs {
		out[i] = interpolate(n, q, func(r int) float64 { return at[int64(r)] })
	}
	return out, nil
}

// interpolate is stats.Percentile over n sorted values read through at,
// with the same arithmetic, so that the two agree to the bit.
func interpolate(n int, q float64, at func(int) float64) float64 {
	if n == 1 {
		return at(0)
	}
	h := (float64(n) - 1) * q / 100
	lo := math.Floor(h)
	i := int(lo)
	if i >= n-1 {
		return at(n - 1)
	}
	a, b := at(i), at(i+1)
	return a + (h-lo)*(b-a)
}

// Sorted returns every sample in ascending order, in memory: for a
// comparison of two runs, which resamples them all.
func (c *Column) Sorted() ([]float64, error) {
	out := make([]float64, 0, c.Len())
	if err := c.each(func(vs []float64) { out = append(out, vs...) }); err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}

// key maps a float64 to a uint64 in the same order (NaN excepted).
func key(v float64) uint64 {
	b := math.Float64bits(v)
	if b>>63 == 1 {
		return ^b
	}
	return b | 1<<63
}

func fromKey(k uint64) float64 {
	if k>>63 == 1 {
		return math.Float64frombits(k &^ (1 << 63))
	}
	return math.Float64frombits(^k)
}

// maxDigit is the most bits a pass counts by: 64 Ki counters, 512 KiB.
const maxDigit = 16

// group is a range of keys holding wanted ranks: every key whose bits
// above shift are lo's.
type group struct {
	lo, hi uint64
	shift  uint  // bits still free below the group's prefix
	bits   uint  // bits counted by this pass: fewer for a small group
	first  int64 // rank of the group's smallest value
	n      int64
	ranks  []int64
	counts []int64   // by the next digit, while counting
	vals   []float64 // the group's values, while collecting
}

// selectRanks finds the values of the given order statistics (sorted,
// distinct, each in [0, Len())).
func (c *Column) selectRanks(ranks []int64) (map[int64]float64, error) {
	out := make(map[int64]float64, len(ranks))
	pending := []*group{{lo: 0, hi: math.MaxUint64, shift: 64, n: int64(c.Len()), ranks: ranks}}
	for len(pending) > 0 {
		// Collect the smallest groups while they fit the column's
		// limit together; count the rest by their next digit.
		bySize := slices.Clone(pending)
		slices.SortFunc(bySize, func(a, b *group) int { return int(min(max(a.n-b.n, -1), 1)) })
		budget := int64(c.limit)
		for _, g := range bySize {
			if g.n <= budget {
				g.vals = make([]float64, 0, g.n)
				budget -= g.n
			} else {
				// About one counter a value, so that a small group
				// does not clear 64 Ki counters for a few values.
				g.bits = min(uint(max(bits.Len64(uint64(g.n)), 4)), maxDigit, g.shift)
				g.counts = make([]int64, 1<<g.bits)
			}
		}
		his := make([]uint64, len(pending))
		for i, g := range pending {
			his[i] = g.hi
		}
		err := c.each(func(vs []float64) {
			if len(pending) == 1 {
				// The first pass, and often the last: no group to find.
				g := pending[0]
				if g.vals != nil {
					for _, v := range vs {
						if k := key(v); k >= g.lo && k <= g.hi {
							g.vals = append(g.vals, v)
						}
					}
					return
				}
				sh, mask := g.shift-g.bits, uint64(1)<<g.bits-1
				for _, v := range vs {
					if k := key(v); k >= g.lo && k <= g.hi {
						g.counts[(k>>sh)&mask]++
					}
				}
				return
			}
			for _, v := range vs {
				k := key(v)
				// The first group whose range does not end below k
				// (pending is in key order), written out: a search
				// with a comparison function took a third of the time.
				i, j := 0, len(his)
				for i < j {
					if m := int(uint(i+j) >> 1); his[m] < k {
						i = m + 1
					} else {
						j = m
					}
				}
				if i == len(his) || pending[i].lo > k {
					continue
				}
				g := pending[i]
				if g.vals != nil {
					g.vals = append(g.vals, v)
				} else {
					g.counts[(k>>(g.shift-g.bits))&(1<<g.bits-1)]++
				}
			}
		})
		if err != nil {
			return nil, err
		}
		var next []*group
		for _, g := range pending {
			if g.vals != nil {
				if int64(len(g.vals)) != g.n {
					return nil, fmt.Errorf("read spilled samples: %d values where %d were counted", len(g.vals), g.n)
				}
				slices.Sort(g.vals)
				for _, r := range g.ranks {
					out[r] = g.vals[r-g.first]
				}
				g.vals = nil
				continue
			}
			next = append(next, g.split(out)...)
			g.counts = nil
		}
		pending = next
	}
	return out, nil
}

// split turns a counted group into the sub-ranges holding its ranks,
// resolving those narrowed to a single key.
func (g *group) split(out map[int64]float64) []*group {
	var next []*group
	shift := g.shift - g.bits
	cum, ri := g.first, 0
	for b := 0; b < len(g.counts) && ri < len(g.ranks); b++ {
		cnt := g.counts[b]
		if cnt == 0 {
			continue
		}
		start := ri
		for ri < len(g.ranks) && g.ranks[ri] < cum+cnt {
			ri++
		}
		if ri > start {
			lo := g.lo | uint64(b)<<shift
			if shift == 0 {
				for _, r := range g.ranks[start:ri] {
					out[r] = fromKey(lo)
				}
			} else {
				next = append(next, &group{lo: lo, hi: lo | (1<<shift - 1), shift: shift, first: cum, n: cnt, ranks: g.ranks[start:ri]})
			}
		}
		cum += cnt
	}
	return next
}
