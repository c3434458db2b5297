package runner

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/infermatrix/infermatrix/schema"
)

// Shard selects one shard of a distributed run (run --shard I/N): every
// shard derives the same seeded global schedule from the same plan and
// keeps its share of it, so that the union of the shards is the unsharded
// load, without the shards talking to each other (docs/sharding.md).
// The zero Shard is an unsharded run.
type Shard struct {
	Index int // from 1
	Count int
}

// ErrBadShard is wrapped by ParseShard's and Run's errors for a shard that
// does not name one of N.
var ErrBadShard = errors.New("bad shard")

// ParseShard reads "I/N".
func ParseShard(s string) (Shard, error) {
	i, n, ok := strings.Cut(s, "/")
	if !ok {
		return Shard{}, fmt.Errorf("%w %q: want I/N, e.g. 2/4", ErrBadShard, s)
	}
	ii, err1 := strconv.Atoi(strings.TrimSpace(i))
	nn, err2 := strconv.Atoi(strings.TrimSpace(n))
	if err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("%w %q: want I/N with whole numbers, e.g. 2/4", ErrBadShard, s)
	}
	sh := Shard{Index: ii, Count: nn}
	return sh, sh.Check()
}

// Check reports a shard that is not one of N (1 <= I <= N).
func (s Shard) Check() error {
	if s == (Shard{}) {
		return nil
	}
	if s.Count < 1 || s.Index < 1 || s.Index > s.Count {
		return fmt.Errorf("%w %d/%d: want 1 <= I <= N", ErrBadShard, s.Index, s.Count)
	}
	return nil
}

// on says the run is sharded at all; a 1/1 shard is, trivially.
func (s Shard) on() bool { return s.Count > 0 }

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// split is the shard's part of a count divided as evenly as possible:
// ⌊n·I/N⌋ - ⌊n·(I-1)/N⌋, so the parts of all shards add up to n exactly.
func (s Shard) split(n int) int {
	if !s.on() {
		return n
	}
	return n*s.Index/s.Count - n*(s.Index-1)/s.Count
}

// keeps says whether the shard sends the global arrival (or trace entry)
// with index i, counted from 0: every N-th, starting at I-1.
func (s Shard) keeps(i int64) bool {
	return !s.on() || i%int64(s.Count) == int64(s.Index-1)
}

// strided counts the indices in [from, from+n) that the shard keeps.
func (s Shard) strided(from, n int) int {
	if !s.on() {
		return n
	}
	count := func(upTo int) int { // kept indices in [0, upTo)
		if upTo <= s.Index-1 {
			return 0
		}
		return (upTo-s.Index)/s.Count + 1
	}
	return count(from+n) - count(from)
}

// shardProblems lists the rows a shard cannot yet take its share of
// exactly: a run that would not add up is refused before anything is sent.
func shardProblems(plan *schema.Plan, s Shard) []string {
	var out []string
	for _, r := range plan.Rows {
		switch {
		case r.Search != nil:
			out = append(out, searchRefusal(&r))
		case r.Load.Ramp != nil && r.Load.Mode == schema.ModeConcurrency && r.Load.Ramp.Levels[0] < float64(s.Count):
			out = append(out, fmt.Sprintf("row %s: the ramp's first step's %v users cannot be divided among %d shards (some shard would have none)", r.ID, r.Load.Ramp.Levels[0], s.Count))
		case r.Load.MaxConcurrency > 0 && r.Load.MaxConcurrency < s.Count:
			out = append(out, fmt.Sprintf("row %s: max_concurrency %d cannot be divided among %d shards (some shard would have no slot)", r.ID, r.Load.MaxConcurrency, s.Count))
		case r.Load.Mode == schema.ModeConcurrency && r.Load.Concurrency < s.Count:
			out = append(out, fmt.Sprintf("row %s: %d users cannot be divided among %d shards (some shard would have none)", r.ID, r.Load.Concurrency, s.Count))
		}
	}
	return out
}

// searchRefusal says why a search row cannot be sharded, and what to run
// instead: each probe's load is chosen from the last probe's outcome,
// which shards that do not talk to each other cannot share, whereas a
// sweep's points are fixed by the file, and every shard divides each
// point as it divides any row. The sweep offered doubles from the search's
// min to its max, as the search's own bracketing does.
func searchRefusal(r *schema.PlannedRow) string {
	sp := r.Search
	var levels []string
	for v := sp.Min; v < sp.Max && len(levels) < 8; v *= 2 {
		levels = append(levels, strconv.FormatFloat(v, 'f', -1, 64))
	}
	levels = append(levels, strconv.FormatFloat(sp.Max, 'f', -1, 64))
	return fmt.Sprintf("row %s: a search row cannot be sharded: each probe's load is chosen from the last probe's result, which shards that do not talk to each other cannot share; "+
		"sweep the same range instead (e.g. sweep: {%s: [%s]}), whose points every shard divides, and read the limit from the merged run, or run the search unsharded",
		r.ID, sp.Vary, strings.Join(levels, ", "))
}

// openLoopRow says the row's requests follow a global arrival schedule
// (rate or trace) that a shard thins, rather than users a shard divides.
// A conversation row's requests are turns, not arrivals: its
// conversations are divided (nextConversation), and its turns numbered,
// warmed up and counted as a closed loop's requests are.
func (rr *rowRun) openLoopRow() bool {
	return rr.row.Load.Mode != schema.ModeConcurrency && rr.row.Conversation == nil
}

// loadSeq is the first sequence number of the row's load: warm prefixes
// (each shard primes for itself) come before it.
func (rr *rowRun) loadSeq() int64 { return int64(rr.primeCount()) }

// nextKept is the first sequence number at or after seq that the shard
// sends. An open-loop shard's sequence numbers are the global schedule's,
// so its prompts and record ids are those of the unsharded run.
func (rr *rowRun) nextKept(seq int64) int64 {
	if !rr.shard.on() || !rr.openLoopRow() || seq < rr.loadSeq() {
		return seq
	}
	for !rr.shard.keeps(seq - rr.loadSeq()) {
		seq++
	}
	return seq
}

// kept thins next, the global arrival schedule, to the shard's arrivals.
func (rr *rowRun) kept(next func() (time.Duration, bool)) func() (time.Duration, bool) {
	if !rr.shard.on() {
		return next
	}
	var i int64
	return func() (time.Duration, bool) {
		for {
			at, ok := next()
			if !ok {
				return at, false
			}
			i++
			rr.noteGlobalArrival(i-1, at)
			if rr.shard.keeps(i - 1) {
				return at, true
			}
		}
	}
}

// noteGlobalArrival watches the global arrivals as kept thins them, for
// the first measured one (after the warmup count and warmup_duration): its
// due time opens the row's measured window on every shard, so that each
// shard's duration timer closes at the instant the unsharded row's does.
// Opened at the shard's own first measured arrival instead, shard I's
// window would end up to I-1 arrivals late, and the union would hold
// arrivals the unsharded row never sends.
func (rr *rowRun) noteGlobalArrival(k int64, at time.Duration) {
	r := rr.row
	if !rr.openLoopRow() || k < int64(r.Warmup) || r.WarmupDuration > 0 && at < r.WarmupDuration.D() {
		return
	}
	rr.mu.Lock()
	if !rr.globalOpenSet {
		rr.globalOpen, rr.globalOpenSet = at, true
	}
	rr.mu.Unlock()
}

// maxConcurrency is the shard's part of an open loop's max_concurrency:
// the even split, as each shard sends about 1/N of the arrivals. It
// approximates the one cap of the unsharded row: N queues of C/N slots,
// not one queue of C, so under saturation the shards' queues drain at their
// own pace (docs/sharding.md).
func (rr *rowRun) maxConcurrency() int {
	c := rr.row.Load.MaxConcurrency
	if c == 0 || !rr.shard.on() {
		return c
	}
	return rr.shard.split(c)
}

// warmupCount is how many warmup requests (after the warm prefixes) the
// shard's tickets count as warmup: the global number for an open loop,
// whose sequence numbers are global, the shard's part for a closed loop.
func (rr *rowRun) warmupCount() int {
	if rr.openLoopRow() {
		return rr.row.Warmup
	}
	return rr.shard.split(rr.row.Warmup)
}

// requestCount is the shard's part of a request-count row's measured
// requests: the arrivals it keeps among the global measured ones for an
// open loop (so the union sends exactly the row's count), the even split
// for a closed loop. 0 means the row is not stopped by a count.
func (rr *rowRun) requestCount() int {
	r := rr.row
	if r.Requests == 0 || !rr.shard.on() {
		return r.Requests
	}
	if !rr.openLoopRow() {
		return rr.shard.split(r.Requests)
	}
	warm := r.Warmup
	if r.WarmupDuration > 0 && r.Load.Mode == schema.ModeRate {
		warm = int(math.Round(r.WarmupDuration.D().Seconds() * r.Load.Rate))
	}
	return rr.shard.strided(warm, r.Requests)
}

// promptSeq is the sequence number a closed-loop shard's ticket sends
// under: its own tickets interleaved with the other shards', so that no two
// shards send the same prompt or record id.
func (rr *rowRun) promptSeq(seq int64) int64 {
	if !rr.shard.on() || rr.openLoopRow() || seq < rr.loadSeq() {
		return seq
	}
	return rr.loadSeq() + (seq-rr.loadSeq())*int64(rr.shard.Count) + int64(rr.shard.Index-1)
}
