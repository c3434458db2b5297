package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
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
			run := func(sh Shard) []metrics.Record {
				res, err := Run(context.Background(), plan(t, src), Options{Out: filepath.Join(t.TempDir(), "run"), Shard: sh})
				if err != nil {
					t.Fatal(err)
				}
				return records(t, res.Dir, "chat")
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
