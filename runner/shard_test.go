package runner

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
)

// shardedVirtual runs src on virtual time as shard sh.
func shardedVirtual(t *testing.T, src string, sh Shard) *Result {
	t.Helper()
	res, err := Run(context.Background(), plan(t, src), Options{Out: filepath.Join(t.TempDir(), "run"), Virtual: true, Shard: sh})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// bySeq maps a row's records by sequence number.
func bySeq(recs []metrics.Record) map[int64]metrics.Record {
	m := make(map[int64]metrics.Record, len(recs))
	for _, r := range recs {
		m[r.Seq] = r
	}
	return m
}

// Two and four shards of an open-loop row and a closed-loop row: each shard
// carries its share (every N-th arrival, with the global sequence number and
// arrival time; an even part of the users and of the count), and the union
// of the shards is the unsharded run: the same sequence numbers, the same
// request and warmup counts.
func TestShardsAddUpToTheWholeRun(t *testing.T) {
	src := `server: {target: builtin, sim: {preset: llama-3.1-8b-h100, seed: 7}}
defaults: {input_tokens: 200, output_tokens: 20}
rows:
  - {id: open, rate: {per_second: 40, arrival: poisson}, warmup: 5, requests: 51}
  - {id: closed, concurrency: 7, warmup: 4, requests: 40}
`
	whole := runVirtual(t, plan(t, src))
	for _, n := range []int{2, 4} {
		for _, id := range []string{"open", "closed"} {
			all := records(t, whole.Dir, id)
			ref := bySeq(all)
			seen := map[int64]bool{}
			measured := 0
			for i := 1; i <= n; i++ {
				sh := Shard{Index: i, Count: n}
				res := shardedVirtual(t, src, sh)
				if m := res.Manifest.Shard; m == nil || m.Index != i || m.Count != n || m.PlanSHA256 != whole.Manifest.Experiment.SHA256 {
					t.Fatalf("%d/%d: manifest shard %+v, want %d/%d of plan %s", i, n, m, i, n, whole.Manifest.Experiment.SHA256)
				}
				recs := records(t, res.Dir, id)
				if id == "open" {
					// The self-check holds the shard to its own part of
					// the rate, not the whole row's.
					for _, rs := range res.Summary.Rows {
						if rs.ID == "open" && rs.SelfCheck.RequestedRate != 40/float64(n) {
							t.Errorf("open %d/%d: requested rate %v, want the shard's %v", i, n, rs.SelfCheck.RequestedRate, 40/float64(n))
						}
					}
				}
				for _, r := range recs {
					if seen[r.Seq] {
						t.Fatalf("%s %d/%d: seq %d sent by two shards", id, i, n, r.Seq)
					}
					seen[r.Seq] = true
					if !r.Warmup {
						measured++
					}
					if id == "open" {
						if r.Seq%int64(n) != int64(i-1) {
							t.Errorf("open %d/%d sent seq %d, not every %d-th arrival", i, n, r.Seq, n)
						}
						w, ok := ref[r.Seq]
						if !ok || w.ScheduledNS != r.ScheduledNS || w.Warmup != r.Warmup || w.InputTokens.Requested != r.InputTokens.Requested {
							t.Errorf("open %d/%d seq %d: scheduled %d warmup %v input %d; the whole run's: %+v", i, n, r.Seq, r.ScheduledNS, r.Warmup, r.InputTokens.Requested, w)
						}
					}
				}
				if id == "closed" {
					for _, rs := range res.Summary.Rows {
						if want := (Shard{i, n}).split(7); rs.ID == "closed" && rs.SelfCheck.Users != want {
							t.Errorf("closed %d/%d: self-check users %d, want the shard's %d", i, n, rs.SelfCheck.Users, want)
						}
					}
					want := 40*i/n - 40*(i-1)/n + 4*i/n - 4*(i-1)/n
					if len(recs) != want {
						t.Errorf("closed %d/%d sent %d requests, want its even part %d", i, n, len(recs), want)
					}
				}
			}
			if measured != 51 && id == "open" || measured != 40 && id == "closed" {
				t.Errorf("%s: %d shards measured %d requests together, want the row's count", id, n, measured)
			}
			if len(seen) != len(all) {
				t.Errorf("%s: %d shards sent %d requests together, the whole run %d", id, n, len(seen), len(all))
			}
			if id == "open" {
				for s := range ref {
					if !seen[s] {
						t.Errorf("open: seq %d of the whole run was sent by none of %d shards", s, n)
					}
				}
			}
		}
	}
}

func TestParseShard(t *testing.T) {
	if s, err := ParseShard("2/4"); err != nil || s != (Shard{2, 4}) {
		t.Errorf("2/4: %v %v", s, err)
	}
	for _, bad := range []string{"0/2", "3/2", "1/0", "x/2", "2", "-1/3"} {
		if _, err := ParseShard(bad); !errors.Is(err, ErrBadShard) {
			t.Errorf("%q: err %v, want ErrBadShard", bad, err)
		}
	}
	if got := []int{Shard{1, 3}.split(7), Shard{2, 3}.split(7), Shard{3, 3}.split(7)}; !slices.Equal(got, []int{2, 2, 3}) {
		t.Errorf("7 split in 3: %v, want [2 2 3]", got)
	}
}

// --start-at: a shard begins its first row no earlier than the instant and
// records the instant and how late it began; a start the plan cannot keep
// is refused before anything is sent.
func TestStartAt(t *testing.T) {
	src := `server: {target: builtin, sim: {preset: llama-3.1-8b-h100, seed: 7}}
defaults: {input_tokens: 50, output_tokens: 5, grace: 200ms}
rows:
  - {id: a, rate: {per_second: 20, arrival: constant}, duration: 300ms}
`
	at := time.Now().Add(time.Second) // past the run's own start-up
	res, err := Run(context.Background(), plan(t, src), Options{Out: filepath.Join(t.TempDir(), "run"), Shard: Shard{1, 2}, StartAt: at})
	if err != nil {
		t.Fatal(err)
	}
	sh := res.Manifest.Shard
	if sh == nil || sh.StartAt == nil || !sh.StartAt.Equal(at) || sh.StartSkewNS < 0 {
		t.Fatalf("manifest shard %+v: want start_at %v and a skew of 0 or more", sh, at)
	}
	// The row's start is in the manifest on disk: the first row's is the
	// shard's skew.
	man, err := res.Dir.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if s := man.Shard; s == nil || len(s.RowStarts) != 1 || s.RowStarts[0].Row != "a" || !s.RowStarts[0].Planned.Equal(at) || s.RowStarts[0].LateNS != sh.StartSkewNS {
		t.Errorf("manifest.json's shard: %+v; want row a's start at %v, late by the skew %d ns", s, at, sh.StartSkewNS)
	}
	for _, r := range records(t, res.Dir, "a") {
		if r.StartUnixNS < at.UnixNano() {
			t.Fatalf("request %s sent at %v, before --start-at %v", r.ID, time.Unix(0, r.StartUnixNS), at)
		}
	}
	bad := []struct {
		name string
		src  string
		opts Options
	}{
		{"past", src, Options{Shard: Shard{1, 2}, StartAt: time.Now().Add(-time.Minute)}},
		{"unsharded", src, Options{StartAt: time.Now().Add(time.Minute)}},
		{"count row not last", src + "  - {id: b, concurrency: 2, requests: 4}\n  - {id: c, concurrency: 2, requests: 4}\n", Options{Shard: Shard{1, 2}, StartAt: time.Now().Add(time.Minute)}},
	}
	for _, b := range bad {
		b.opts.Out = filepath.Join(t.TempDir(), "run")
		if _, err := Run(context.Background(), plan(t, b.src), b.opts); !errors.Is(err, ErrBadStart) {
			t.Errorf("%s: err %v, want ErrBadStart", b.name, err)
		}
	}
}

// A trace is divided entry by entry: shard I of N replays entries k with
// k mod N = I-1, each at its own timestamp and with its own lengths, and a
// request-count trace row's shards send the row's count together.
func TestShardedTrace(t *testing.T) {
	ts := []float64{0, 20, 20, 50, 90, 150}
	in := []int{50, 300, 20, 513, 64, 1}
	out := []int{3, 8, 2, 5, 4, 1}
	src := `server: {target: builtin, sim: {preset: fixed, ttft: 2ms, itl: 1ms}}
defaults: {body: {ignore_eos: true}}
rows:
  - {id: replay, warmup: 1, trace: {file: trace.jsonl, block_size: 16}}
  - {id: first3, requests: 3, trace: {file: trace.jsonl, block_size: 16}}
`
	seen := map[string]map[int64]bool{"replay": {}, "first3": {}}
	for i := 1; i <= 2; i++ {
		dir := t.TempDir()
		p := planIn(t, dir, src, map[string]string{"trace.jsonl": traceLines(ts, in, out)})
		res, err := Run(context.Background(), p, Options{Out: filepath.Join(dir, "run"), Shard: Shard{i, 2}})
		if err != nil {
			t.Fatal(err)
		}
		for id := range seen {
			for _, r := range records(t, res.Dir, id) {
				if r.Seq%2 != int64(i-1) || seen[id][r.Seq] || id == "first3" && r.Seq >= 3 {
					t.Errorf("%s %d/2: sent entry %d", id, i, r.Seq)
				}
				seen[id][r.Seq] = true
				if want := int64(ts[r.Seq] * 1e6); r.ScheduledNS != want || r.InputTokens.Requested != in[r.Seq] || r.Warmup != (id == "replay" && r.Seq == 0) {
					t.Errorf("%s %d/2 entry %d: scheduled %v, input %d, warmup %v; want the entry's %v, %d", id, i, r.Seq, time.Duration(r.ScheduledNS), r.InputTokens.Requested, r.Warmup, time.Duration(want), in[r.Seq])
				}
			}
		}
	}
	if len(seen["replay"]) != len(ts) || len(seen["first3"]) != 3 {
		t.Errorf("two shards replayed %d entries of %d, and %d of a 3-request row", len(seen["replay"]), len(ts), len(seen["first3"]))
	}
}

// A duration-stopped open loop: every shard's measured window opens where
// the unsharded row's does (its first measured global arrival), not at the
// shard's own first measured arrival, so the union of 2 or 4 shards holds
// exactly the unsharded row's arrivals, warmup and measured alike.
func TestShardedDurationRowEndsWithTheWholeRow(t *testing.T) {
	src := `server: {target: builtin, sim: {preset: llama-3.1-8b-h100, seed: 3}}
defaults: {input_tokens: 100, output_tokens: 10}
rows:
  - {id: open, rate: {per_second: 30, arrival: poisson}, warmup_duration: 1s, duration: 3s}
  - {id: counted, rate: {per_second: 30, arrival: poisson}, warmup: 7, duration: 3s}
`
	whole := runVirtual(t, plan(t, src))
	for _, id := range []string{"open", "counted"} {
		ref := bySeq(records(t, whole.Dir, id))
		for _, n := range []int{2, 4} {
			union := map[int64]metrics.Record{}
			for i := 1; i <= n; i++ {
				for _, r := range records(t, shardedVirtual(t, src, Shard{Index: i, Count: n}).Dir, id) {
					union[r.Seq] = r
				}
			}
			for s, r := range union {
				if w, ok := ref[s]; !ok || w.Warmup != r.Warmup {
					t.Errorf("%s, %d shards: seq %d (warmup %v) is not the whole row's (%+v)", id, n, s, r.Warmup, ok)
				}
			}
			for s := range ref {
				if _, ok := union[s]; !ok {
					t.Errorf("%s, %d shards: the whole row's seq %d was sent by none", id, n, s)
				}
			}
		}
	}
}

// An open loop's max_concurrency is divided among the shards as its
// arrivals are: with a cap of 6 on a saturated server, no shard of 3 holds
// more than 2 requests in flight (each would hold 6 with the whole cap,
// 18 together); a cap smaller than the shard count is refused.
func TestShardedMaxConcurrencyIsSplit(t *testing.T) {
	src := `server: {target: builtin, sim: {preset: llama-3.1-8b-h100, seed: 5}}
defaults: {input_tokens: 2000, output_tokens: 200}
rows:
  - {id: capped, rate: {per_second: 40, max_concurrency: 6}, duration: 2s}
`
	for i := 1; i <= 3; i++ {
		recs := records(t, shardedVirtual(t, src, Shard{Index: i, Count: 3}).Dir, "capped")
		if got := maxOverlap(recs); got != 2 {
			t.Errorf("shard %d/3: %d requests in flight at most, want its 2 of the cap's 6", i, got)
		}
	}
	_, err := Run(context.Background(), plan(t, src), Options{Out: filepath.Join(t.TempDir(), "run"), Virtual: true, Shard: Shard{Index: 1, Count: 8}})
	if !errors.Is(err, ErrBadShard) {
		t.Errorf("a cap of 6 on 8 shards: %v, want refused", err)
	}
}
