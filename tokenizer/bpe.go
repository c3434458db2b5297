package tokenizer

import (
	"hash/maphash"
	"sync"
)

// bpe is a byte-level BPE model: it turns one pre-token (a short run of raw
// bytes such as " world") into ids by repeatedly merging the adjacent pair
// with the lowest merge rank, exactly as the Hugging Face BPE model does.
type bpe struct {
	// byteID is the id of each single byte, -1 where the vocabulary lacks it.
	byteID [256]int32
	// merges maps a pair of ids to the merge's rank and the id of the
	// merged token. A tiktoken rank file has no merge list: joins stands
	// in for it (see builtin and mergeJoins).
	merges mergeTable
	joins  *tokenTable
	// vocab maps raw-byte tokens to ids; it is only consulted for
	// ignoreMerges.
	vocab map[string]int32
	// ignoreMerges emits a pre-token that is itself in the vocabulary as that
	// one token, skipping the merges (Llama 3 sets it: the merge sequence
	// does not always rebuild such a token).
	ignoreMerges bool
	// unk is the id for bytes missing from the vocabulary, -1 for none (the
	// byte is then dropped, as Hugging Face does); fuseUnk merges a run of
	// them into one. Byte-level vocabularies hold all 256 bytes, so neither
	// applies to real models.
	unk     int32
	fuseUnk bool

	cache wordCache
}

type merge struct{ rank, id int32 }

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// mergeTable is an open-addressing hash table from pair keys to merges.
// Merge lookups are most of the work of BPE once the text is split, and
// this table, a flat array probed linearly at a load factor of at most one
// half, answers about twice as fast as a Go map.
type mergeTable struct {
	keys  []uint64 // emptyKey marks a free slot
	vals  []merge
	shift uint // 64 - log2(len(keys))
}

// emptyKey cannot be a real pair: ids are below 2^31.
const emptyKey = ^uint64(0)

func newMergeTable(n int) mergeTable {
	size, shift := 8, uint(61)
	for size < 2*n {
		size *= 2
		shift--
	}
	t := mergeTable{keys: make([]uint64, size), vals: make([]merge, size), shift: shift}
	for i := range t.keys {
		t.keys[i] = emptyKey
	}
	return t
}

func (t *mergeTable) slot(k uint64) int {
	return int((k * 0x9E3779B97F4A7C15) >> t.shift)
}

// put sets the merge for k, replacing any earlier one.
func (t *mergeTable) put(k uint64, v merge) {
	mask := len(t.keys) - 1
	for i := t.slot(k); ; i = (i + 1) & mask {
		if t.keys[i] == emptyKey || t.keys[i] == k {
			t.keys[i], t.vals[i] = k, v
			return
		}
	}
}

func (t *mergeTable) get(k uint64) (merge, bool) {
	mask := len(t.keys) - 1
	for i := t.slot(k); ; i = (i + 1) & mask {
		switch t.keys[i] {
		case k:
			return t.vals[i], true
		case emptyKey:
			return merge{}, false
		}
	}
}

// appendWord appends the ids of the pre-token word to dst.
func (m *bpe) appendWord(dst []int, word string) []int {
	if len(word) == 0 {
		return dst
	}
	if len(word) == 1 && m.byteID[word[0]] >= 0 {
		return append(dst, int(m.byteID[word[0]]))
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[word]; ok {
			return append(dst, int(id))
		}
	}
	cacheable := len(word) <= maxCachedWord
	if cacheable {
		if ids, ok := m.cache.get(word); ok {
			return append(dst, ids...)
		}
	}
	start := len(dst)
	dst = m.merge(dst, word)
	if cacheable {
		m.cache.put(word, dst[start:])
	}
	return dst
}

// symbol is one part of a word being merged: a doubly linked list over a
// slice, where a merged-away symbol is marked with gone.
type symbol struct {
	id         int32
	prev, next int32
	gone       bool
}

// candidate is a possible merge of the symbol at pos with the one after it
// into id, whose bytes are n long (n is only set by mergeJoins).
type candidate struct{ rank, pos, id, n int32 }

// less orders candidates by rank, then leftmost first: the order in which
// Hugging Face's BinaryHeap pops them.
func (c candidate) less(d candidate) bool {
	return c.rank < d.rank || c.rank == d.rank && c.pos < d.pos
}

type mergeScratch struct {
	syms []symbol
	heap []candidate
	hs   []uint64 // mergeJoins' hashes
}

var scratchPool = sync.Pool{New: func() any { return new(mergeScratch) }}

// merge runs BPE over the bytes of word and appends the resulting ids.
func (m *bpe) merge(dst []int, word string) []int {
	if m.joins != nil {
		return m.mergeJoins(dst, word)
	}
	return m.mergeList(dst, word)
}

// mergeList is merge with a merge list. It is a port of Hugging Face's
// Word::merge_all: a min-heap of candidate merges keyed by (rank,
// position); stale candidates, whose pair has since changed, are skipped
// when popped. That gives O(n log n) on long pre-tokens (a CJK
// sentence without spaces is a single pre-token of hundreds of bytes).
func (m *bpe) mergeList(dst []int, word string) []int {
	sc := scratchPool.Get().(*mergeScratch)
	defer scratchPool.Put(sc)

	syms := sc.syms[:0]
	for i := 0; i < len(word); i++ {
		id := m.byteID[word[i]]
		if id < 0 {
			if m.unk < 0 {
				continue
			}
			if m.fuseUnk && len(syms) > 0 && syms[len(syms)-1].id == m.unk {
				continue
			}
			id = m.unk
		}
		n := int32(len(syms))
		syms = append(syms, symbol{id: id, prev: n - 1, next: n + 1})
	}
	if len(syms) == 0 {
		sc.syms = syms
		return dst
	}
	syms[len(syms)-1].next = -1

	h := sc.heap[:0]
	for i := 0; i+1 < len(syms); i++ {
		if mg, ok := m.merges.get(pairKey(syms[i].id, syms[i+1].id)); ok {
			h = heapPush(h, candidate{mg.rank, int32(i), mg.id, 0})
		}
	}
	for len(h) > 0 {
		var top candidate
		top, h = heapPop(h)
		cur := &syms[top.pos]
		if cur.gone || cur.next < 0 {
			continue
		}
		right := syms[cur.next]
		if mg, ok := m.merges.get(pairKey(cur.id, right.id)); !ok || mg.id != top.id {
			continue // stale: one side was merged since this was queued
		}
		cur.id = top.id
		syms[cur.next].gone = true
		cur.next = right.next
		if right.next >= 0 {
			syms[right.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if mg, ok := m.merges.get(pairKey(syms[cur.prev].id, cur.id)); ok {
				h = heapPush(h, candidate{mg.rank, cur.prev, mg.id, 0})
			}
		}
		if cur.next >= 0 {
			if mg, ok := m.merges.get(pairKey(cur.id, syms[cur.next].id)); ok {
				h = heapPush(h, candidate{mg.rank, top.pos, mg.id, 0})
			}
		}
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		dst = append(dst, int(syms[i].id))
	}
	sc.syms, sc.heap = syms, h
	return dst
}

// mergeJoins is merge for a tiktoken rank file, where the parts a and b
// merge into the token spelled by a's bytes then b's, of rank its id (see
// builtin): the same parts, heap and order, with two shortcuts that a
// merge list does not allow. Every byte is a token, so the part at i
// starts at byte i and ends where the next one starts, and hs[i], the
// hash of its bytes, gives the hash of a join in one multiply-add
// (tokenTable.join). And a queued candidate is stale exactly when the
// parts at its position no longer span its token's length: parts only
// grow rightwards from where they start, and any two parts spelling those
// bytes join into it, so no lookup is needed to tell.
func (m *bpe) mergeJoins(dst []int, word string) []int {
	sc := scratchPool.Get().(*mergeScratch)
	defer scratchPool.Put(sc)
	t := m.joins
	n := int32(len(word))
	syms, hs := sc.syms[:0], sc.hs[:0]
	for i := range n {
		syms = append(syms, symbol{id: m.byteID[word[i]], prev: i - 1, next: i + 1})
		hs = append(hs, uint64(word[i])+1)
	}
	syms[n-1].next = -1
	// end is where the part at i ends.
	end := func(i int32) int32 {
		if next := syms[i].next; next >= 0 {
			return next
		}
		return n
	}
	h := sc.heap[:0]
	for i := int32(0); i+1 < n; i++ {
		if id, ok := t.join(word[i:], 1, hs[i], 1, hs[i+1]); ok {
			h = heapPush(h, candidate{id, i, id, 2})
		}
	}
	for len(h) > 0 {
		var top candidate
		top, h = heapPop(h)
		cur := &syms[top.pos]
		if cur.gone || cur.next < 0 {
			continue
		}
		right := cur.next
		rightEnd := end(right)
		if rightEnd-top.pos != top.n {
			continue // stale: one side was merged since this was queued
		}
		hs[top.pos] = hs[top.pos]*t.pow[rightEnd-right] + hs[right]
		cur.id = top.id
		syms[right].gone = true
		cur.next = syms[right].next
		if cur.next >= 0 {
			syms[cur.next].prev = top.pos
		}
		if prev := cur.prev; prev >= 0 {
			if id, ok := t.join(word[prev:], uint32(top.pos-prev), hs[prev], uint32(top.n), hs[top.pos]); ok {
				h = heapPush(h, candidate{id, prev, id, rightEnd - prev})
			}
		}
		if next := cur.next; next >= 0 {
			nextEnd := end(next)
			if id, ok := t.join(word[top.pos:], uint32(top.n), hs[top.pos], uint32(nextEnd-next), hs[next]); ok {
				h = heapPush(h, candidate{id, top.pos, id, nextEnd - top.pos})
			}
		}
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		dst = append(dst, int(syms[i].id))
	}
	sc.syms, sc.heap, sc.hs = syms, h, hs
	return dst
}

func heapPush(h []candidate, c candidate) []candidate {
	h = append(h, c)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].less(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func heapPop(h []candidate) (candidate, []candidate) {
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h[r].less(h[l]) {
			j = r
		}
		if !h[j].less(h[i]) {
			break
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
	return top, h
}

// The word cache remembers the ids of recent pre-tokens: natural text repeats
// the same few thousand words, and a map lookup is far cheaper than merging.
// It is sharded to keep lock contention low when every worker of a run
// counts at once, and bounded by emptying a shard when it fills, which costs
// nothing to track and only briefly lowers the hit rate.
const (
	cacheShards        = 32
	cacheEntriesPerShd = 4096 // 131,072 entries in all
	// maxCachedWord leaves long pre-tokens (CJK sentences, runs of
	// whitespace) out: they rarely repeat and would crowd out words.
	maxCachedWord = 256
)

type wordCache struct {
	seed   maphash.Seed
	shards [cacheShards]cacheShard
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[string][]int
	_  [40]byte // keep shards on separate cache lines
}

func (c *wordCache) init() { c.seed = maphash.MakeSeed() }

func (c *wordCache) shard(word string) *cacheShard {
	return &c.shards[maphash.String(c.seed, word)%cacheShards]
}

func (c *wordCache) get(word string) ([]int, bool) {
	s := c.shard(word)
	s.mu.RLock()
	ids, ok := s.m[word]
	s.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(word string, ids []int) {
	// Copy both: word may be a substring of a large prompt that the cache
	// must not keep alive, and ids aliases the caller's slice.
	w := string([]byte(word))
	v := append([]int(nil), ids...)
	s := c.shard(word)
	s.mu.Lock()
	if s.m == nil || len(s.m) >= cacheEntriesPerShd {
		s.m = make(map[string][]int)
	}
	s.m[w] = v
	s.mu.Unlock()
}
