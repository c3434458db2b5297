package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/sim"
	openai "github.com/sashabaranov/go-openai"
)

// recordingSim serves a simulator preset on loopback and keeps the
// messages of every chat request it is sent, by request id.
type recordingSim struct {
	URL  string
	mu   sync.Mutex
	msgs map[string][]openai.ChatCompletionMessage
}

func startRecordingSim(t *testing.T, preset string) *recordingSim {
	t.Helper()
	cfg, err := BuiltinConfig(schema.SimSettings{Preset: preset})
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rs := &recordingSim{msgs: map[string][]openai.ChatCompletionMessage{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			var req openai.ChatCompletionRequest
			if json.Unmarshal(b, &req) == nil {
				rs.mu.Lock()
				rs.msgs[r.Header.Get("X-Request-Id")] = req.Messages
				rs.mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rs.URL = srv.URL + "/v1"
	return rs
}

// byConversation groups records by conversation, each in turn order as
// dispatched (seq).
func byConversation(t *testing.T, recs []metrics.Record) map[string][]metrics.Record {
	t.Helper()
	out := map[string][]metrics.Record{}
	for _, r := range recs {
		if r.ConversationID == "" || r.Turn == nil {
			t.Fatalf("seq %d: no conversation_id or turn: %+v", r.Seq, r)
		}
		out[r.ConversationID] = append(out[r.ConversationID], r)
	}
	for _, c := range out {
		sort.Slice(c, func(i, j int) bool { return c[i].Seq < c[j].Seq })
	}
	return out
}

// TestConversationTurnsCarryHistory runs a conversation row against the
// built-in server's engine: each user's turns run in order and never
// overlap; turn k sends turn k-1's messages, the server's actual reply
// and a new user message; its input length is the previous prompt, reply
// and new message; and the server finds the previous prompt and reply in
// its prefix cache, which the per-turn summary shows.
func TestConversationTurnsCarryHistory(t *testing.T) {
	srv := startRecordingSim(t, "tiny-fast")
	dir := t.TempDir()
	p := planIn(t, dir, `server: {urls: [`+srv.URL+`]}
rows:
  - id: chat
    concurrency: 2
    requests: 12
    input_tokens: 300
    output_tokens: 40
    body: {ignore_eos: true}
    conversation: {turns: 3, user_tokens: 30, think_time: 10ms}
validity: {ignore: [samples, steady_state, client_stall, simulator, bursts, client_cpu]}
`, nil)
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(dir, "run")})
	if err != nil {
		t.Fatal(err)
	}
	rs := res.Summary.Rows[0]
	if rs.Requests.Completed != 12 {
		t.Fatalf("%+v; want 12 completed", rs.Requests)
	}
	convs := byConversation(t, records(t, res.Dir, "chat"))
	// 12 requests make 4 conversations of 3 turns, or more when the row
	// stops with one user's conversation cut short.
	if len(convs) < 4 || len(convs) > 5 {
		t.Errorf("%d conversations; want 4 of 3 turns, or 5 with the last ones cut short", len(convs))
	}
	reached := make([]int, 3) // conversations that reached each turn
	for _, c := range convs {
		for k := range c {
			reached[k]++
		}
	}
	tok := builtinTok(t)
	for id, c := range convs {
		for k, r := range c {
			if *r.Turn != k {
				t.Fatalf("%s: turns %v out of order", id, turnsOf(c))
			}
			if r.Error != nil || r.InputTokens.Server == nil || r.OutputTokens.Server == nil || r.CachedTokens == nil {
				t.Fatalf("%s turn %d: %+v", id, k, r)
			}
			msgs := srv.msgs[r.ID]
			if len(msgs) != 2*k+1 {
				t.Fatalf("%s turn %d sent %d messages; want %d", id, k, len(msgs), 2*k+1)
			}
			if k == 0 {
				if *r.InputTokens.Server != 300 || *r.CachedTokens != 0 {
					t.Errorf("%s turn 0: %d input tokens, %d cached; want 300 and none", id, *r.InputTokens.Server, *r.CachedTokens)
				}
				continue
			}
			prev := c[k-1]
			if r.StartNS < prev.StartNS+prev.EndNS {
				t.Errorf("%s turn %d started at %d ns, before turn %d ended at %d ns", id, k, r.StartNS, k-1, prev.StartNS+prev.EndNS)
			}
			before, reply := msgs[:2*k-1], msgs[2*k-1]
			if !sameMessages(before, srv.msgs[prev.ID]) {
				t.Errorf("%s turn %d does not begin with turn %d's messages", id, k, k-1)
			}
			if reply.Role != openai.ChatMessageRoleAssistant || tok.Count(reply.Content) != *prev.OutputTokens.Server {
				t.Errorf("%s turn %d: history's reply %q (%s); want the server's %d-token answer", id, k, reply.Content, reply.Role, *prev.OutputTokens.Server)
			}
			if want := *prev.InputTokens.Server + *prev.OutputTokens.Server + 30; *r.InputTokens.Server != want || r.InputTokens.Client != want {
				t.Errorf("%s turn %d: input %+v (server %d); want %d: the previous prompt, its reply and 30 new", id, k, r.InputTokens, *r.InputTokens.Server, want)
			}
			// The cache holds whole blocks of the previous prompt and its
			// reply (all but the reply's last token, whose KV is never
			// computed); hits beyond the previous prompt are the reply's.
			if hist := *prev.InputTokens.Server + *prev.OutputTokens.Server; *r.CachedTokens <= *prev.InputTokens.Server || *r.CachedTokens > hist {
				t.Errorf("%s turn %d: %d cached tokens; want the previous prompt (%d) and most of its reply, up to %d", id, k, *r.CachedTokens, *prev.InputTokens.Server, hist)
			}
			if r.SharedTokens != r.InputTokens.Client-30 {
				t.Errorf("%s turn %d: shared %d; want the history, %d", id, k, r.SharedTokens, r.InputTokens.Client-30)
			}
		}
	}
	if len(rs.ByTurn) != 3 {
		t.Fatalf("by_turn %+v; want 3 turns", rs.ByTurn)
	}
	for k, ts := range rs.ByTurn {
		if ts.Turn != k || ts.Requests != reached[k] || ts.TTFT.Count != reached[k] || ts.CacheHitRatio == nil {
			t.Errorf("turn %d: %d requests, %d TTFTs, hit ratio %v; want %d conversations' turn %d", k, ts.Requests, ts.TTFT.Count, ts.CacheHitRatio, reached[k], k)
		}
	}
	if first, last := rs.ByTurn[0], rs.ByTurn[2]; last.InputTokens.Mean <= first.InputTokens.Mean || *last.CacheHitRatio < 0.8 || *first.CacheHitRatio != 0 {
		t.Errorf("first turn %+v, last %+v; want the last longer and served mostly from the cache", first, last)
	}
	if rs.Cache.UnexpectedTokens != 0 {
		t.Errorf("cache %+v: hits on the history are intended, not contamination", rs.Cache)
	}
}

// TestConversationDatasetReplay replays a three-turn JSONL conversation:
// the file's user messages are the turns, after its system message; its
// own assistant messages give way to the server's replies.
func TestConversationDatasetReplay(t *testing.T) {
	srv := startRecordingSim(t, "tiny-fast")
	dir := t.TempDir()
	p := planIn(t, dir, `server: {urls: [`+srv.URL+`]}
rows:
  - id: replay
    concurrency: 1
    requests: 3
    output_tokens: 6
    body: {ignore_eos: true}
    unique_prompts: "off"
    dataset: {file: conv.jsonl, format: jsonl}
    conversation: {think_time: 1ms}
  - id: sharegpt
    concurrency: 1
    requests: 3
    body: {ignore_eos: true}
    unique_prompts: "off"
    dataset: {file: sg.json, format: sharegpt}
    conversation: {turns: 5}
validity: {ignore: [samples, steady_state, client_stall, simulator, bursts, client_cpu, load]}
`, map[string]string{"conv.jsonl": `{"messages": [` +
		`{"role": "system", "content": "You are a ship's cook."},` +
		`{"role": "user", "content": "What is for dinner?"},` +
		`{"role": "assistant", "content": "CANNED ONE"},` +
		`{"role": "user", "content": "And for dessert?"},` +
		`{"role": "assistant", "content": "CANNED TWO"},` +
		`{"role": "user", "content": "Who is eating?"}]}` + "\n", "sg.json": shareGPTFile})
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(dir, "run")})
	if err != nil {
		t.Fatal(err)
	}
	convs := byConversation(t, records(t, res.Dir, "replay"))
	if len(convs) != 1 {
		t.Fatalf("%d conversations; want one of three turns", len(convs))
	}
	var c []metrics.Record
	for _, c = range convs {
	}
	if len(c) != 3 {
		t.Fatalf("turns %v; want 0, 1, 2", turnsOf(c))
	}
	users := []string{"What is for dinner?", "And for dessert?", "Who is eating?"}
	for k, r := range c {
		msgs := srv.msgs[r.ID]
		if len(msgs) != 2+2*k || msgs[0].Content != "You are a ship's cook." || msgs[len(msgs)-1].Content != users[k] {
			t.Fatalf("turn %d sent %+v", k, msgs)
		}
		for j := 1; j < len(msgs)-1; j += 2 {
			want := srv.msgs[c[j/2].ID]
			if msgs[j].Content != want[len(want)-1].Content || msgs[j+1].Role != openai.ChatMessageRoleAssistant {
				t.Errorf("turn %d message %d: %+v", k, j, msgs[j])
			}
			if a := msgs[j+1].Content; a == "CANNED ONE" || a == "CANNED TWO" || a == "" {
				t.Errorf("turn %d: assistant message %q; want the server's reply, not the file's", k, a)
			}
		}
		if r.OutputTokens.Requested != 6 {
			t.Errorf("turn %d: %d output tokens asked; want the row's 6", k, r.OutputTokens.Requested)
		}
	}

	// ShareGPT: a conversation's human turns, each asking for its file
	// reply's length; the next conversation follows.
	tok := builtinTok(t)
	sg := records(t, res.Dir, "sharegpt")
	want := []struct {
		conv, turn int
		user       string
		out        int
	}{
		{0, 0, "Tell me about whales.", tok.Count("Whales are large marine mammals of the order Cetacea.")},
		{0, 1, "And sharks?", tok.Count("Fish.")},
		{1, 0, "Hi back.", tok.Count("How can I help?")},
	}
	if len(sg) != len(want) {
		t.Fatalf("sharegpt: %d records; want 3", len(sg))
	}
	sort.Slice(sg, func(i, j int) bool { return sg[i].Seq < sg[j].Seq })
	for i, w := range want {
		r := sg[i]
		msgs := srv.msgs[r.ID]
		if *r.Turn != w.turn || len(msgs) != 2*w.turn+1 || msgs[len(msgs)-1].Content != w.user || r.OutputTokens.Requested != w.out {
			t.Errorf("sharegpt request %d: turn %d, %d messages ending %q, %d output tokens; want turn %d ending %q, %d tokens",
				i, *r.Turn, len(msgs), msgs[len(msgs)-1].Content, r.OutputTokens.Requested, w.turn, w.user, w.out)
		}
	}
	if sg[0].ConversationID != sg[1].ConversationID || sg[1].ConversationID == sg[2].ConversationID {
		t.Errorf("sharegpt conversations %s, %s, %s; want the first two one conversation", sg[0].ConversationID, sg[1].ConversationID, sg[2].ConversationID)
	}
}

func turnsOf(c []metrics.Record) []int {
	var out []int
	for _, r := range c {
		out = append(out, *r.Turn)
	}
	return out
}

func sameMessages(a, b []openai.ChatCompletionMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Role != b[i].Role || a[i].Content != b[i].Content {
			return false
		}
	}
	return true
}

// TestConversationArrivals: in a rate row, conversations arrive at the
// rate, each first turn scheduled at its arrival, and every conversation's
// turns follow one another without overlap; max_concurrency caps the
// conversations held at once.
func TestConversationArrivals(t *testing.T) {
	srv := startRecordingSim(t, "tiny-fast")
	dir := t.TempDir()
	p := planIn(t, dir, `server: {urls: [`+srv.URL+`]}
rows:
  - id: arrivals
    rate: {per_second: 40, arrival: constant, max_concurrency: 3}
    requests: 15
    input_tokens: 200
    output_tokens: 10
    body: {ignore_eos: true}
    conversation: {turns: 3, user_tokens: 20, think_time: 30ms}
validity: {ignore: [samples, steady_state, client_stall, simulator, bursts, client_cpu]}
`, nil)
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(dir, "run")})
	if err != nil {
		t.Fatal(err)
	}
	recs := records(t, res.Dir, "arrivals")
	if len(recs) != 15 {
		t.Fatalf("%d records; want 15", len(recs))
	}
	convs := byConversation(t, recs)
	var firsts []int64
	for id, c := range convs {
		for k, r := range c {
			if *r.Turn != k || r.Error != nil {
				t.Fatalf("%s: turns %v, turn %d error %+v", id, turnsOf(c), k, r.Error)
			}
			if k > 0 && r.StartNS < c[k-1].StartNS+c[k-1].EndNS {
				t.Errorf("%s turn %d started before turn %d ended", id, k, k-1)
			}
		}
		firsts = append(firsts, c[0].ScheduledNS)
	}
	// Constant arrivals at 40/s are 25 ms apart.
	sort.Slice(firsts, func(i, j int) bool { return firsts[i] < firsts[j] })
	for i := 1; i < len(firsts); i++ {
		if gap := firsts[i] - firsts[i-1]; gap < 24e6 || gap > 26e6 {
			t.Errorf("conversations %d and %d scheduled %.1f ms apart; want 25 ms", i-1, i, float64(gap)/1e6)
		}
	}
	// At most three conversations at once: from each conversation's first
	// request (after its wait for a slot) to its last turn's end.
	type span struct{ from, to int64 }
	var spans []span
	for _, c := range convs {
		last := c[len(c)-1]
		spans = append(spans, span{c[0].StartNS, last.StartNS + last.EndNS})
	}
	for _, s := range spans {
		n := 0
		for _, o := range spans {
			if o.from <= s.from && s.from < o.to {
				n++
			}
		}
		if n > 3 {
			t.Errorf("%d conversations held at %d ns; max_concurrency is 3", n, s.from)
		}
	}
}
