package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// truthRecord is one line of ground truth: what the server knows about a
// request when it ends, finished, faulted or abandoned. It exists so that a
// client's measurement error can be computed: a client that records when it
// read each token can compare its times with the times the server wrote
// them, and its token counts and error classification with the server's.
//
// Config.GroundTruth receives one JSON object per line, in the order the
// requests end, for example:
//
//	{"id":"chatcmpl-…","endpoint":"/v1/chat/completions",
//	 "arrival_unix_ns":1767225600000000000,"prompt_tokens":12,
//	 "output_tokens":3,"finish_reason":"length","fault":null,"status":"ok",
//	 "due_ns":[20000000,25000000,30000000],
//	 "write_ns":[20012000,25011000,30010000],
//	 "flush_ns":[20041000,25038000,30035000]}
//
// (on one line). The fields:
//
//   - id: the response id the client sees in the body; for a 429, 500 or
//     503 fault, which has no id in its body, a client matches the line by
//     arrival time instead.
//   - endpoint: the request path.
//   - arrival_unix_ns: when the server started reading the request, in Unix
//     nanoseconds; the offsets below count from it on the server's
//     monotonic clock.
//   - prompt_tokens: the prompt's token count, as usage reports it.
//   - output_tokens: tokens delivered to the client: all of them for a
//     finished request, those sent before the end otherwise (zero for a
//     non-streaming request that did not finish).
//   - finish_reason: "length" or "stop" for a finished request, else null.
//   - fault: the kind of the injected fault that struck, else null. A stall
//     or slow_headers fault delays a request that still finishes.
//   - status: "ok" (finished), "canceled" (the client went away or the
//     server closed first) or "fault" (an injected fault ended it).
//   - due_ns: for each delivered token, when the model scheduled it.
//   - write_ns: for each delivered token, when the server began writing
//     the event carrying it, read just before the Write call. The bytes
//     can reach the client from then on: write_ns is the lower bound on
//     when a client can have read the token.
//   - flush_ns: for each delivered token, when the write and flush of the
//     event carrying it returned. A client can read the token before
//     then, while the write is still in progress, so flush_ns is no lower
//     bound on a client's read time.
//
// All three arrays have one entry per delivered token and count from
// arrival on the server's monotonic clock, so write_ns[k] <= flush_ns[k].
// With several tokens per event (tgi), every token of an event has that
// event's write and flush times. For a non-streaming request every token
// has the time the body's write began and the time it returned.
//
// Requests rejected as invalid (4xx) are not recorded: they never started.
type truthRecord struct {
	ID            string  `json:"id"`
	Endpoint      string  `json:"endpoint"`
	ArrivalUnixNs int64   `json:"arrival_unix_ns"`
	PromptTokens  int     `json:"prompt_tokens"`
	OutputTokens  int     `json:"output_tokens"`
	FinishReason  *string `json:"finish_reason"`
	Fault         *string `json:"fault"`
	Status        string  `json:"status"`
	DueNs         []int64 `json:"due_ns"`
	WriteNs       []int64 `json:"write_ns"`
	FlushNs       []int64 `json:"flush_ns"`
}

// truth collects a request's per-token times as it runs.
type truth struct {
	due, write, flush []int64 // offsets from arrival, nanoseconds
}

// truthWriter serialises ground-truth lines onto Config.GroundTruth.
type truthWriter struct {
	mu  sync.Mutex
	w   io.Writer
	err error // the first write error, after which lines are dropped
}

// write appends g's line. Each line is one Write call, so that a writer
// shared with other output never interleaves a line.
func (t *truthWriter) write(g *generation) {
	rec := truthRecord{
		ID:            g.id,
		Endpoint:      g.ep.path(),
		ArrivalUnixNs: g.arrival.UnixNano(),
		PromptTokens:  g.req.promptTokens,
		OutputTokens:  g.sent,
		Status:        g.status,
		DueNs:         g.truth.due[:min(g.sent, len(g.truth.due))],
		WriteNs:       g.truth.write[:min(g.sent, len(g.truth.write))],
		FlushNs:       g.truth.flush[:min(g.sent, len(g.truth.flush))],
	}
	if g.status == statusOK {
		reason := g.req.finishReason
		rec.FinishReason = &reason
	}
	if g.struck {
		kind := string(g.fault.Kind)
		rec.Fault = &kind
	}
	line, err := json.Marshal(rec)
	if err != nil {
		return // ints and strings always marshal
	}
	line = append(line, '\n')
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return
	}
	if _, err := t.w.Write(line); err != nil {
		t.err = fmt.Errorf("sim: write ground truth: %w", err)
	}
}

// GroundTruthErr returns the first error writing to Config.GroundTruth, after
// which no more lines were written, or nil.
func (s *Server) GroundTruthErr() error {
	if s.truth == nil {
		return nil
	}
	s.truth.mu.Lock()
	defer s.truth.mu.Unlock()
	return s.truth.err
}

func (e endpoint) path() string {
	if e == completionEndpoint {
		return "/v1/completions"
	}
	return "/v1/chat/completions"
}
