package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
)

// convNumber is the conversation's number, the end of its id
// (<run>-<row>-c<k>): the same conversation has the same number in the
// unsharded run and on its shard.
func convNumber(t *testing.T, id string) int64 {
	t.Helper()
	i := strings.LastIndex(id, "-c")
	n, err := strconv.ParseInt(id[i+2:], 10, 64)
	if i < 0 || err != nil {
		t.Fatalf("conversation id %q: no number", id)
	}
	return n
}

// convTurns groups a row's records by conversation number, each in turn
// order.
func convTurns(t *testing.T, recs []metrics.Record) map[int64][]metrics.Record {
	t.Helper()
	out := map[int64][]metrics.Record{}
	for _, r := range byConversation(t, recs) {
		out[convNumber(t, r[0].ConversationID)] = r
	}
	return out
}

// A conversation row under --shard: shard I holds conversations k with
// k mod N = I-1, each whole (every turn), and the shards' conversations
// together are the unsharded row's, with the same turns: the same prompt
// and reply lengths, turn by turn, and (rate) the same arrival time. No
// two shards send a request under the same sequence number.
func TestShardedConversations(t *testing.T) {
	const head = `server: {target: builtin, sim: {preset: fixed, ttft: 2ms, itl: 1ms}}
defaults:
  input_tokens: {mean: 60, stddev: 20, min: 20, max: 100}
  output_tokens: {values: [2, 3, 4]}
  body: {ignore_eos: true}
rows:
`
	for _, form := range []struct {
		name, row string
		convs     int
	}{
		// Conversations 50 ms apart, each over in a few milliseconds.
		{"rate", "  - {id: chat, rate: {per_second: 20, arrival: constant}, requests: 12, conversation: {turns: 3, user_tokens: {mean: 20, stddev: 8, min: 5, max: 40}}}\n", 4},
		// One user per shard: two whole conversations each.
		{"users", "  - {id: chat, concurrency: 2, requests: 12, conversation: {turns: 3, user_tokens: {mean: 20, stddev: 8, min: 5, max: 40}}}\n", 4},
	} {
		t.Run(form.name, func(t *testing.T) {
			src := head + form.row
			// Each record's arrival is read in its schedule: scheduled_ns
			// less where the row's schedule began (schedule_start_ns).
			run := func(sh Shard) []metrics.Record {
				res, err := Run(context.Background(), plan(t, src), Options{Out: filepath.Join(t.TempDir(), "run"), Shard: sh})
				if err != nil {
					t.Fatal(err)
				}
				recs := records(t, res.Dir, "chat")
				for i := range recs {
					recs[i].ScheduledNS -= res.Summary.Row("chat").ScheduleStartNS
				}
				return recs
			}
			whole := convTurns(t, run(Shard{}))
			seqs := map[int64]bool{}
			union := map[int64][]metrics.Record{}
			for i := 1; i <= 2; i++ {
				recs := run(Shard{i, 2})
				for _, r := range recs {
					if seqs[r.Seq] {
						t.Errorf("shard %d/2: seq %d sent by both shards", i, r.Seq)
					}
					seqs[r.Seq] = true
				}
				for k, turns := range convTurns(t, recs) {
					if k%2 != int64(i-1) {
						t.Errorf("shard %d/2 holds conversation %d; want k mod 2 = %d", i, k, i-1)
					}
					if len(turns) != 3 {
						t.Errorf("shard %d/2: conversation %d has %d turns, want all 3 on its shard", i, k, len(turns))
					}
					union[k] = turns
				}
			}
			if len(union) != form.convs {
				t.Errorf("the shards held %d conversations together, want %d", len(union), form.convs)
			}
			for k, turns := range union {
				ref, ok := whole[k]
				if !ok {
					t.Errorf("conversation %d: held by a shard, not by the unsharded run", k)
					continue
				}
				for j, r := range turns {
					if j >= len(ref) {
						break // the unsharded run cut it short
					}
					w := ref[j]
					got := fmt.Sprint(*r.Turn, r.InputTokens.Requested, r.OutputTokens.Requested)
					want := fmt.Sprint(*w.Turn, w.InputTokens.Requested, w.OutputTokens.Requested)
					if got != want {
						t.Errorf("conversation %d turn %d: turn, input, output %s; unsharded %s", k, j, got, want)
					}
					if form.name == "rate" && j == 0 && r.ScheduledNS != w.ScheduledNS {
						t.Errorf("conversation %d arrived at %d ns on its shard, %d ns unsharded", k, r.ScheduledNS, w.ScheduledNS)
					}
				}
			}
			// The draws differ from one conversation to the next: the
			// comparison above is not of equal constants.
			distinct := map[string]bool{}
			for _, turns := range whole {
				distinct[fmt.Sprint(turns[0].InputTokens.Requested, turns[len(turns)-1].InputTokens.Requested)] = true
			}
			if len(distinct) < 2 {
				t.Errorf("every conversation has the same lengths %v: the test shows nothing", distinct)
			}
		})
	}
}

// maxOverlap is the most requests in flight at once among recs (a request
// ending at the instant another starts does not overlap it).
func maxOverlap(recs []metrics.Record) int {
	type ev struct {
		at int64
		d  int
	}
	var evs []ev
	for _, r := range recs {
		evs = append(evs, ev{r.StartNS, 1}, ev{r.StartNS + r.EndNS, -1})
	}
	slices.SortFunc(evs, func(a, b ev) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.d, b.d)) })
	n, most := 0, 0
	for _, e := range evs {
		n += e.d
		most = max(most, n)
	}
	return most
}

// A ramped row under --shard: a rate ramp's shards send every other
// arrival of the global schedule, each stamped with the step the
// unsharded run stamps it with, so each step's requests add up to the
// unsharded step's; a concurrency ramp's shards run their part of each
// step's users. A ramp whose first step has fewer users than shards is
// refused.
func TestShardedRamps(t *testing.T) {
	src := `server: {target: builtin, sim: {preset: llama-3.1-8b-h100, seed: 7}}
defaults: {input_tokens: 50, output_tokens: 5, body: {ignore_eos: true}}
rows:
  - {id: rates, warmup: 3, rate: {arrival: poisson}, ramp: {rate: {from: 10, to: 30, step: 10}, step_duration: 1s}}
  - {id: users, ramp: {concurrency: {from: 2, to: 5, step: 1}, step_duration: 500ms}}
`
	whole := runVirtual(t, plan(t, src))
	ref := bySeq(records(t, whole.Dir, "rates"))
	wantSteps := map[int]int{}
	for _, r := range ref {
		wantSteps[r.Step]++
	}
	gotSteps := map[int]int{}
	for i := 1; i <= 2; i++ {
		sh := Shard{i, 2}
		res := shardedVirtual(t, src, sh)
		for _, r := range records(t, res.Dir, "rates") {
			w, ok := ref[r.Seq]
			if r.Seq%2 != int64(i-1) || !ok || w.Step != r.Step || w.ScheduledNS != r.ScheduledNS || w.Warmup != r.Warmup {
				t.Errorf("rates %d/2 seq %d: step %d at %d ns (warmup %v); unsharded (sent %v) step %d at %d ns (warmup %v)", i, r.Seq, r.Step, r.ScheduledNS, r.Warmup, ok, w.Step, w.ScheduledNS, w.Warmup)
			}
			gotSteps[r.Step]++
		}
		// Users: each step's part of 2, 3, 4, 5 users, dealt out in
		// turn: shard 1 runs users 0, 2, 4, shard 2 users 1, 3.
		bySteps := map[int][]metrics.Record{}
		for _, r := range records(t, res.Dir, "users") {
			bySteps[r.Step] = append(bySteps[r.Step], r)
		}
		for k, lv := range []int{2, 3, 4, 5} {
			if got, want := maxOverlap(bySteps[k+1]), (lv-i)/2+1; got != want {
				t.Errorf("users %d/2 step %d: %d requests in flight at most, want the shard's %d of %d users", i, k+1, got, want, lv)
			}
		}
		for _, rs := range res.Summary.Rows {
			if rs.ID == "rates" && len(rs.Steps) == 3 && rs.Steps[2].SelfCheck.RequestedRate != 15 {
				t.Errorf("rates %d/2: step 3 self-check asks for %v req/s, want the shard's 15 of 30", i, rs.Steps[2].SelfCheck.RequestedRate)
			}
		}
	}
	if !maps.Equal(gotSteps, wantSteps) || len(wantSteps) < 4 {
		t.Errorf("requests by step: shards together %v, unsharded %v", gotSteps, wantSteps)
	}
	bad := `server: {target: builtin}
defaults: {input_tokens: 50, output_tokens: 5}
rows:
  - {id: r, ramp: {concurrency: {from: 1, to: 3, step: 1}, step_duration: 1s}}
`
	if _, err := Run(context.Background(), plan(t, bad), Options{Out: filepath.Join(t.TempDir(), "run"), Virtual: true, Shard: Shard{1, 2}}); !errors.Is(err, ErrBadShard) {
		t.Errorf("a ramp from 1 user on 2 shards: err %v, want ErrBadShard", err)
	}
}

// The start clock records every row's start in run order against the
// instant it planned: the first row's lateness is the shard's skew, each
// later row is planned a slot and a gap after the one before, and a row
// that begins after its instant (the row before overran) is recorded as
// late by that much.
func TestRowStarts(t *testing.T) {
	var starts []rundir.RowStart
	var skew time.Duration
	at := time.Now().Add(20 * time.Millisecond)
	c := &startClock{next: at, first: true, gap: 30 * time.Millisecond, logf: t.Logf,
		skew:    func(d time.Duration) { skew = d },
		started: func(s rundir.RowStart) { starts = append(starts, s) }}
	slot := schema.Duration(10 * time.Millisecond)
	rows := []schema.PlannedRow{{ID: "a", Duration: slot}, {ID: "b", Duration: slot}, {ID: "c", Duration: slot}}
	for i := range rows {
		if !c.wait(context.Background(), &rows[i]) {
			t.Fatal("wait ended early")
		}
		if i == 0 {
			time.Sleep(200 * time.Millisecond) // row a overruns its 40 ms
		}
	}
	if len(starts) != 3 || starts[0].Row != "a" || starts[1].Row != "b" || starts[2].Row != "c" {
		t.Fatalf("row starts %+v; want a, b, c in run order", starts)
	}
	if starts[0].LateNS != skew.Nanoseconds() || !starts[0].Planned.Equal(at) {
		t.Errorf("first row: %+v; want planned at %v, late by the skew %v", starts[0], at, skew)
	}
	for i := 1; i < 3; i++ {
		if want := starts[i-1].Planned.Add(40 * time.Millisecond); !starts[i].Planned.Equal(want) {
			t.Errorf("row %s planned at %v; want %v, a slot and a gap after the row before", starts[i].Row, starts[i].Planned, want)
		}
	}
	// Row b came 200 ms after a's start, planned 40 ms after it: at
	// least 160 ms late, and so is c, planned 40 ms after b's plan.
	if starts[1].LateNS < (160*time.Millisecond).Nanoseconds() || starts[2].LateNS < (120*time.Millisecond).Nanoseconds() {
		t.Errorf("rows b and c began %v and %v late; want at least 160 ms and 120 ms", time.Duration(starts[1].LateNS), time.Duration(starts[2].LateNS))
	}
}

// A search row is refused under --shard before anything is sent, saying
// why (each probe depends on the last one's result) and what to run
// instead: a sweep of the search's range.
func TestShardRefusesSearchNamingASweep(t *testing.T) {
	src := `server: {target: builtin}
defaults: {input_tokens: 50, output_tokens: 5}
rows:
  - {id: sat, duration: 1s, search: {concurrency: {min: 4, max: 40}}}
acceptance:
  - {name: slo, rows: [sat], expect: ttft.p95 < 1000}
`
	_, err := Run(context.Background(), plan(t, src), Options{Out: filepath.Join(t.TempDir(), "run"), Shard: Shard{1, 2}})
	if !errors.Is(err, ErrBadShard) {
		t.Fatalf("err %v, want ErrBadShard", err)
	}
	for _, want := range []string{"row sat: a search row cannot be sharded", "the last probe's result", "sweep: {concurrency: [4, 8, 16, 32, 40]}"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q; want it to say %q", err, want)
		}
	}
}

// On virtual time too, a conversation row's shards hold conversations
// k mod N = I-1, whole, with the unsharded run's turns, and their users
// are the closed loop's split; a rate row's conversations arrive at their
// global times.
func TestShardedConversationsVirtual(t *testing.T) {
	src := `server: {target: builtin, sim: {preset: llama-3.1-8b-h100, seed: 7}}
defaults: {input_tokens: {mean: 60, stddev: 20, min: 20, max: 100}, output_tokens: {values: [2, 3, 4]}, body: {ignore_eos: true}}
rows:
  - {id: users, concurrency: 2, requests: 12, conversation: {turns: 3, user_tokens: {mean: 20, stddev: 8, min: 5, max: 40}}}
  - {id: rate, rate: {per_second: 2, arrival: poisson}, requests: 12, conversation: {turns: 3, user_tokens: {mean: 20, stddev: 8, min: 5, max: 40}}}
`
	whole := runVirtual(t, plan(t, src))
	for _, id := range []string{"users", "rate"} {
		ref := convTurns(t, records(t, whole.Dir, id))
		held := 0
		for i := 1; i <= 2; i++ {
			recs := records(t, shardedVirtual(t, src, Shard{i, 2}).Dir, id)
			if id == "users" && maxOverlap(recs) != 1 {
				t.Errorf("users %d/2: %d turns in flight at once; want the shard's one user", i, maxOverlap(recs))
			}
			for k, turns := range convTurns(t, recs) {
				held++
				w := ref[k]
				if k%2 != int64(i-1) || len(turns) != 3 || len(w) != 3 {
					t.Errorf("%s %d/2: conversation %d with %d turns (unsharded %d)", id, i, k, len(turns), len(w))
					continue
				}
				for j := range turns {
					if turns[j].InputTokens.Requested != w[j].InputTokens.Requested || turns[j].OutputTokens.Requested != w[j].OutputTokens.Requested ||
						j == 0 && id == "rate" && turns[j].ScheduledNS != w[j].ScheduledNS {
						t.Errorf("%s %d/2: conversation %d turn %d: input %d, output %d, at %d ns; unsharded %d, %d, %d ns", id, i, k, j,
							turns[j].InputTokens.Requested, turns[j].OutputTokens.Requested, turns[j].ScheduledNS, w[j].InputTokens.Requested, w[j].OutputTokens.Requested, w[j].ScheduledNS)
					}
				}
			}
		}
		if held != 4 || len(ref) != 4 {
			t.Errorf("%s: the shards held %d conversations, the unsharded run %d; want 4", id, held, len(ref))
		}
	}
}

// A concurrency ramp's users are dealt out so that every shard's part of
// each step only grows from step to step and the parts add up to the
// step's users, for any number of shards.
func TestRampUsersAddUp(t *testing.T) {
	levels := []float64{1, 2, 3, 5, 8, 13, 21, 34}
	for n := 1; n <= 12; n++ {
		sum := make([]int, len(levels))
		for i := 1; i <= n; i++ {
			u := Shard{i, n}.rampUsers(levels)
			for k := range u {
				if k > 0 && u[k] < u[k-1] {
					t.Errorf("shard %d/%d: %d users at step %d, %d at step %d: a user would leave", i, n, u[k-1], k, u[k], k+1)
				}
				sum[k] += u[k]
			}
		}
		for k, lv := range levels {
			if sum[k] != int(lv) {
				t.Errorf("%d shards run %d users at step %d, want %v", n, sum[k], k+1, lv)
			}
		}
	}
}
