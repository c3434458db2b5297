package samples

import (
	"encoding/binary"
	"math"
	"slices"
)

// Spans are the [start, end] of a row's requests, from which the load the
// server saw is computed: a sweep over their starts and ends in time order.
// Up to the limit they are kept in memory; beyond it each limit's worth is
// turned into its edges, sorted, and written to the store as a run, and
// Walk merges the runs, so that the sweep sees the very sequence an
// in-memory sort of every edge gives.
type Spans struct {
	store *Store
	limit int
	mem   [][2]int64
	runs  []block // sorted edges, n counted in edges
	n     int
	err   error
	// writing is the run being sorted and written in the background, so
	// that Add, called under the runner's collector lock, does not sort.
	writing *pendingRun
}

// pendingRun is a run on its way to the store.
type pendingRun struct {
	done  chan struct{}
	spans [][2]int64
	run   block
	err   error
}

// NewSpans returns empty spans spilling to s beyond limit spans; a limit
// ≤ 0 means DefaultLimit, and a nil store never spills.
func NewSpans(s *Store, limit int) Spans {
	if limit <= 0 {
		limit = DefaultLimit
	}
	if s == nil {
		limit = math.MaxInt
	}
	return Spans{store: s, limit: limit}
}

// Add appends the span [start, end].
func (s *Spans) Add(start, end int64) {
	if len(s.mem) >= s.limit && s.store != nil && s.err == nil {
		s.spill()
	}
	s.mem = append(s.mem, [2]int64{start, end})
	s.n++
}

// Len is the number of spans.
func (s *Spans) Len() int { return s.n }

// InMemory returns the spans when none has spilled.
func (s *Spans) InMemory() ([][2]int64, bool) {
	if len(s.runs) > 0 || s.writing != nil {
		return nil, false
	}
	return s.mem, true
}

// Edge encodes a start (d = +1) or end (d = −1) at a time as one integer
// whose order is the sweep's: by time, and ends before starts at the same
// instant (a user's next request starting as its last ends is one in
// flight, not two). Times must be within ±2⁶² ns.
func Edge(at int64, d int) int64 {
	e := at << 1
	if d > 0 {
		e |= 1
	}
	return e
}

// EdgeOf decodes an Edge.
func EdgeOf(e int64) (at int64, d int) {
	if e&1 == 1 {
		return e >> 1, 1
	}
	return e >> 1, -1
}

// sortedEdges returns the edges of spans, in sweep order.
func sortedEdges(spans [][2]int64) []int64 {
	edges := make([]int64, 0, 2*len(spans))
	for _, sp := range spans {
		edges = append(edges, Edge(sp[0], 1), Edge(sp[1], -1))
	}
	slices.Sort(edges)
	return edges
}

// spill hands the spans in memory to a goroutine that sorts their edges
// and writes them as one run, waiting first for the run before it: at
// most two batches are in memory, and the sort (a few milliseconds for
// 64 Ki spans) happens outside the caller's lock. A failed write keeps the
// spans in memory from then on.
func (s *Spans) spill() {
	s.settle()
	if s.err != nil {
		return
	}
	p := &pendingRun{done: make(chan struct{}), spans: s.mem}
	go func() {
		defer close(p.done)
		edges := sortedEdges(p.spans)
		p.run.off, p.err = s.store.appendInts(edges)
		p.run.n = len(edges)
	}()
	s.writing = p
	s.mem = make([][2]int64, 0, cap(s.mem))
}

// settle waits for the run being written and records it, or, when its
// write failed, takes its spans back into memory.
func (s *Spans) settle() {
	p := s.writing
	if p == nil {
		return
	}
	<-p.done
	s.writing = nil
	if p.err != nil {
		s.err = p.err
		s.mem = append(p.spans, s.mem...)
		return
	}
	s.runs = append(s.runs, p.run)
}

// Err is the error of a failed spill, after which the spans stayed in
// memory; nil otherwise.
func (s *Spans) Err() error {
	s.settle()
	return s.err
}

// Walk calls fn with every edge in sweep order (see Edge), merging the
// spilled runs with the spans still in memory. Its memory is a small
// buffer a run.
func (s *Spans) Walk(fn func(at int64, d int)) error {
	s.settle()
	tail := sortedEdges(s.mem)
	if len(s.runs) == 0 {
		for _, e := range tail {
			fn(EdgeOf(e))
		}
		return nil
	}
	rs := make([]*runReader, 0, len(s.runs)+1)
	for _, r := range s.runs {
		rr := &runReader{store: s.store, next: r.off, left: r.n}
		if err := rr.fill(); err != nil {
			return err
		}
		rs = append(rs, rr)
	}
	if len(tail) > 0 {
		rs = append(rs, &runReader{buf: tail})
	}
	h := runHeap(rs)
	h.init()
	for len(h) > 0 {
		r := h[0]
		fn(EdgeOf(r.buf[r.i]))
		r.i++
		if r.i == len(r.buf) {
			if err := r.fill(); err != nil {
				return err
			}
		}
		if r.i == len(r.buf) {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		}
		h.down(0)
	}
	return nil
}

// runBuf is the edges read from a run at a time.
const runBuf = 1024

type runReader struct {
	store *Store
	next  int64 // file offset of the next unread edge
	left  int   // edges not yet read
	buf   []int64
	i     int
	raw   []byte
}

// fill reads the next edges of the run, if any.
func (r *runReader) fill() error {
	if r.left == 0 {
		return nil
	}
	n := min(r.left, runBuf)
	if r.raw == nil {
		r.raw = make([]byte, 8*runBuf)
		r.buf = make([]int64, 0, runBuf)
	}
	raw := r.raw[:8*n]
	if err := r.store.read(r.next, raw); err != nil {
		return err
	}
	r.buf = r.buf[:n]
	for i := range r.buf {
		r.buf[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
	}
	r.i = 0
	r.next += int64(8 * n)
	r.left -= n
	return nil
}

// runHeap is a min-heap of runs by their next edge.
type runHeap []*runReader

func (h runHeap) less(i, j int) bool { return h[i].buf[h[i].i] < h[j].buf[h[j].i] }

func (h runHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h runHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
