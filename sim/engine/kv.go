package engine

// blockPool is one replica's paged KV cache with automatic prefix caching,
// shaped like vLLM V1's block pool: fixed-size blocks, a reference count per
// block, and a free queue ordered for eviction. A block whose last user
// finished keeps its content hash and sits in the free queue, still
// reusable by a later prompt with the same prefix, until it reaches the
// front of the queue and is handed out for something else.
type blockPool struct {
	size     int // tokens per block
	refs     []int32
	hash     []uint64 // content hash; 0 when the block holds no cacheable content
	prev     []int32  // free-queue links; -1 when not queued
	next     []int32
	head     int32 // sentinel index len(refs): free queue is a ring through it
	free     int
	cached   map[uint64]int32 // hash -> block holding that content
	caching  bool
	capacity int
}

func newBlockPool(blocks, size int, caching bool) *blockPool {
	p := &blockPool{
		size:     size,
		refs:     make([]int32, blocks),
		hash:     make([]uint64, blocks),
		prev:     make([]int32, blocks+1),
		next:     make([]int32, blocks+1),
		head:     int32(blocks),
		cached:   make(map[uint64]int32),
		caching:  caching,
		capacity: blocks,
	}
	p.prev[p.head], p.next[p.head] = p.head, p.head
	for b := range int32(blocks) {
		p.pushBack(b)
	}
	return p
}

func (p *blockPool) pushBack(b int32) {
	last := p.prev[p.head]
	p.next[last], p.prev[b] = b, last
	p.next[b], p.prev[p.head] = p.head, b
	p.free++
}

func (p *blockPool) unlink(b int32) {
	p.next[p.prev[b]], p.prev[p.next[b]] = p.next[b], p.prev[b]
	p.prev[b], p.next[b] = -1, -1
	p.free--
}

// usage is the fraction of blocks in use, as vLLM reports
// kv_cache_usage_perc: cached blocks nobody holds count as free.
func (p *blockPool) usage() float64 {
	if p.capacity == 0 {
		return 0
	}
	return 1 - float64(p.free)/float64(p.capacity)
}

// lookup returns how many leading blocks of hashes are cached, taking a
// reference on each so that they cannot be evicted while the caller holds
// them. It stops at the first miss: a chained hash makes a later block's
// hit meaningless without its predecessors.
func (p *blockPool) lookup(hashes []uint64, limit int, into []int32) []int32 {
	if !p.caching {
		return into
	}
	for i := 0; i < limit && i < len(hashes); i++ {
		b, ok := p.cached[hashes[i]]
		if !ok {
			break
		}
		if p.refs[b] == 0 {
			p.unlink(b)
		}
		p.refs[b]++
		into = append(into, b)
	}
	return into
}

// alloc appends n fresh blocks to into, evicting the cached content of the
// least recently freed ones. It reports false, allocating nothing, when
// fewer than n blocks are free.
func (p *blockPool) alloc(n int, into []int32) ([]int32, bool) {
	if n > p.free {
		return into, false
	}
	for range n {
		b := p.next[p.head]
		p.unlink(b)
		if h := p.hash[b]; h != 0 {
			if p.cached[h] == b {
				delete(p.cached, h)
			}
			p.hash[b] = 0
		}
		p.refs[b] = 1
		into = append(into, b)
	}
	return into, true
}

// publish records that block b now holds the content with hash h, so that
// later prompts can hit it. The first block to publish a hash wins; a
// duplicate computed concurrently stays private.
func (p *blockPool) publish(b int32, h uint64) {
	if !p.caching || p.hash[b] != 0 {
		return
	}
	if _, dup := p.cached[h]; dup {
		return
	}
	p.hash[b] = h
	p.cached[h] = b
}

// release drops one reference on each block, the last block first, so that
// the tail of a prompt is evicted before its head: heads are the parts other
// prompts most likely share.
func (p *blockPool) release(blocks []int32) {
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		p.refs[b]--
		if p.refs[b] == 0 {
			p.pushBack(b)
		}
	}
}

// blockHashes returns the chained hashes of the full blocks of ids: block
// i's hash covers its own tokens and, through its parent's hash, every token
// before it, as vLLM's prefix cache keys do. Zero is reserved for "no
// content", so a computed zero is remapped.
func blockHashes(ids []int, size int) []uint64 {
	n := len(ids) / size
	out := make([]uint64, n)
	var parent uint64 = 0xcbf29ce484222325
	for i := range n {
		h := parent
		for _, id := range ids[i*size : (i+1)*size] {
			h = mix(h ^ uint64(id))
		}
		if h == 0 {
			h = 1
		}
		out[i] = h
		parent = h
	}
	return out
}

// mix is a 64-bit finalizer (splitmix64's): cheap, and every input bit
// affects every output bit, which FNV over ints would not give.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
