package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// checkTruthTimes checks the per-token arrays of a ground-truth line: one
// entry per delivered token, each array non-decreasing, and every token
// due, then written, then flushed.
func checkTruthTimes(t *testing.T, rec truthRecord) {
	t.Helper()
	if len(rec.DueNs) != rec.OutputTokens || len(rec.WriteNs) != rec.OutputTokens || len(rec.FlushNs) != rec.OutputTokens {
		t.Fatalf("%s: %d due, %d write and %d flush times for %d tokens", rec.ID, len(rec.DueNs), len(rec.WriteNs), len(rec.FlushNs), rec.OutputTokens)
	}
	for k := range rec.OutputTokens {
		if rec.WriteNs[k] < rec.DueNs[k] {
			t.Errorf("%s: token %d written at %d before due at %d", rec.ID, k, rec.WriteNs[k], rec.DueNs[k])
		}
		if rec.FlushNs[k] < rec.WriteNs[k] {
			t.Errorf("%s: token %d flushed at %d before its write began at %d", rec.ID, k, rec.FlushNs[k], rec.WriteNs[k])
		}
		if k > 0 && (rec.DueNs[k] < rec.DueNs[k-1] || rec.WriteNs[k] < rec.WriteNs[k-1] || rec.FlushNs[k] < rec.FlushNs[k-1]) {
			t.Errorf("%s: token %d goes back in time", rec.ID, k)
		}
		// One goroutine writes a stream: an event's write begins after
		// the previous event's flush returned.
		if k > 0 && rec.WriteNs[k] != rec.WriteNs[k-1] && rec.WriteNs[k] < rec.FlushNs[k-1] {
			t.Errorf("%s: token %d written at %d, before the previous event's flush returned at %d", rec.ID, k, rec.WriteNs[k], rec.FlushNs[k-1])
		}
	}
}

func TestGroundTruth(t *testing.T) {
	const (
		ttft = 3 * time.Millisecond
		itl  = 500 * time.Microsecond
	)
	truth := &syncBuffer{}
	inst := startSim(t, Config{TTFT: ttft, ITL: itl, GroundTruth: truth})
	tok := builtinTokenizer(t)
	before := time.Now()

	// 1. A finished stream; its id comes from the chunks.
	events := readEvents(t, request(t, inst.BaseURL+"/chat/completions", chatStream(5), "").Body)
	first, _ := decodeChunk(t, events[0])
	waitTruth(t, truth, 1)

	// 2. A finished non-streaming completion.
	resp := request(t, inst.BaseURL+"/completions", `{"prompt":"one two three","max_tokens":3}`, "")
	var body textResponse
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	waitTruth(t, truth, 2)

	// 3. A rate-limited request and 4. an error event after 2 tokens.
	io.Copy(io.Discard, request(t, inst.BaseURL+"/completions", `{"prompt":"hi","max_tokens":3}`, "429").Body)
	waitTruth(t, truth, 3)
	readEvents(t, request(t, inst.BaseURL+"/chat/completions", chatStream(9), "error_event; after=2").Body)
	waitTruth(t, truth, 4)

	// 5. A stream the client abandons after its first token.
	ctx, cancel := context.WithCancel(context.Background())
	long := openLongStream(t, ctx, inst.BaseURL)
	r := bufio.NewReader(long.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"content":" `) {
			break
		}
	}
	cancel()
	long.Body.Close()
	recs := waitTruth(t, truth, 5)
	after := time.Now()

	for _, rec := range recs {
		if rec.ArrivalUnixNs < before.UnixNano() || rec.ArrivalUnixNs > after.UnixNano() {
			t.Errorf("%s: arrival %d outside the test", rec.ID, rec.ArrivalUnixNs)
		}
		checkTruthTimes(t, rec)
	}
	str := func(s *string) string {
		if s == nil {
			return "null"
		}
		return *s
	}
	for i, want := range []struct {
		id, endpoint, finish, fault, status string
		prompt, output                      int
	}{
		{first.ID, "/v1/chat/completions", "length", "null", "ok", 1, 5},
		{body.ID, "/v1/completions", "length", "null", "ok", tok.Count("one two three"), 3},
		{"", "/v1/completions", "null", "429", "fault", 1, 0},
		{"", "/v1/chat/completions", "null", "error_event", "fault", 1, 2},
		{"", "/v1/chat/completions", "null", "null", "canceled", 1, -1},
	} {
		rec := recs[i]
		if (want.id != "" && rec.ID != want.id) || rec.Endpoint != want.endpoint || str(rec.FinishReason) != want.finish ||
			str(rec.Fault) != want.fault || rec.Status != want.status || rec.PromptTokens != want.prompt ||
			(want.output >= 0 && rec.OutputTokens != want.output) {
			t.Errorf("line %d: %+v\nwant %+v", i+1, rec, want)
		}
	}
	if got := recs[4].OutputTokens; got < 1 || got >= 20000 {
		t.Errorf("abandoned stream delivered %d tokens", got)
	}
	// The model's schedule: token k due at TTFT + k*ITL.
	for k, due := range recs[0].DueNs {
		if want := ttft + time.Duration(k)*itl; time.Duration(due) != want {
			t.Errorf("stream token %d due at %v, want %v", k, time.Duration(due), want)
		}
	}
	// A non-streaming body carries every token at once.
	for k, f := range recs[1].FlushNs {
		if f != recs[1].FlushNs[0] || time.Duration(f) < ttft+2*itl {
			t.Errorf("non-streaming flush times %v", recs[1].FlushNs)
		}
		if w := recs[1].WriteNs[k]; w != recs[1].WriteNs[0] || time.Duration(w) < ttft+2*itl {
			t.Errorf("non-streaming write times %v", recs[1].WriteNs)
		}
	}
	if n := truth.writeCount(); n != 5 {
		t.Errorf("%d writes for 5 lines, want one each", n)
	}
}

// TestGroundTruthEvents checks that with several tokens per event, every
// token has an entry, and the tokens of an event share its flush time.
func TestGroundTruthEvents(t *testing.T) {
	truth := &syncBuffer{}
	inst := startSim(t, Config{TTFT: time.Millisecond, ITL: 200 * time.Microsecond, Personality: PersonalityTGI, TokensPerEvent: 4, GroundTruth: truth})
	readEvents(t, request(t, inst.BaseURL+"/chat/completions", chatStream(10), "").Body)
	rec := waitTruth(t, truth, 1)[0]
	if rec.OutputTokens != 10 || rec.Status != statusOK {
		t.Fatalf("ground truth %+v", rec)
	}
	checkTruthTimes(t, rec)
	for _, group := range [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}} {
		for _, k := range group {
			if rec.FlushNs[k] != rec.FlushNs[group[0]] || rec.WriteNs[k] != rec.WriteNs[group[0]] {
				t.Errorf("token %d written at %d and flushed at %d, apart from its event at %d and %d",
					k, rec.WriteNs[k], rec.FlushNs[k], rec.WriteNs[group[0]], rec.FlushNs[group[0]])
			}
		}
		// The event goes out when its last token is due.
		if last := group[len(group)-1]; rec.FlushNs[group[0]] < rec.DueNs[last] {
			t.Errorf("event of tokens %v flushed before its last token was due", group)
		}
	}
	if rec.FlushNs[4] == rec.FlushNs[3] {
		t.Error("two events share a flush time")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestGroundTruthWriteError(t *testing.T) {
	inst := startSim(t, Config{TTFT: time.Nanosecond, ITL: time.Nanosecond, GroundTruth: failingWriter{}})
	resp := request(t, inst.BaseURL+"/completions", `{"prompt":"hi","max_tokens":2}`, "")
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	deadline := time.Now().Add(10 * time.Second)
	for inst.Server.GroundTruthErr() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := inst.Server.GroundTruthErr(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("GroundTruthErr() = %v", err)
	}
	if s, _ := New(Config{}); s.GroundTruthErr() != nil {
		t.Error("GroundTruthErr without ground truth")
	}
}
