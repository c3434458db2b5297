// Package metrics defines what infermatrix measures and how: the per-request
// Record written as each request completes, the metric definitions derived
// from its timestamps (docs/metrics.md is their prose twin), the row Summary
// with exact statistics, and the environment acceptance and hypothesis
// expressions are evaluated in.
//
// It sits below both runner (which produces records) and reports (which
// judges summaries), so the two cannot disagree on what "TTFT" means.
package metrics

// Error classes. Every failed request gets exactly one, so error counts by
// class add up to the total.
const (
	ErrConnect   = "connect"   // no connection: refused, DNS, TLS
	ErrHTTP      = "http"      // a non-2xx status; Record.Status says which
	ErrStream    = "stream"    // the server sent an error event mid-stream
	ErrTruncated = "truncated" // the stream ended without [DONE]
	ErrReset     = "reset"     // the connection broke while reading the response
	ErrTimeout   = "timeout"   // the per-request timeout expired
	ErrCanceled  = "canceled"  // cancelled on purpose: the row's cancel setting, or the end of the grace period
	ErrProtocol  = "protocol"  // a response that is not what the API promises (bad JSON, wrong content type)
	ErrRedirect  = "redirect"  // a redirect not followed: to another origin, one that would turn the POST into a GET, or too many
)

// ErrorClasses lists every class in a fixed order, for tables and
// expressions.
var ErrorClasses = []string{ErrConnect, ErrHTTP, ErrStream, ErrTruncated, ErrReset, ErrTimeout, ErrCanceled, ErrProtocol, ErrRedirect}

// Record is one request, as written to rows/<id>/requests.jsonl the moment
// it completes. Every metric is derived from these fields, so a run can be
// re-summarised (with other definitions, or other SLOs) without re-running.
//
// Times are integer nanoseconds from one monotonic clock. ScheduledNS and
// StartNS count from the start of the row; every other time counts from
// StartNS, the request's own start. A zero time means the event did not
// happen (a request cannot receive a byte at the very instant it starts).
type Record struct {
	// ID is unique within the run and sent as the X-Request-Id header, so a
	// record can be matched to the server's logs.
	ID  string `json:"id"`
	Row string `json:"row"`
	Seq int64  `json:"seq"` // dispatch order within the row, from 0
	// Trial is the trial of a repeated row the request belongs to, from 1
	// (rows/<id>/trial-<k>/requests.jsonl); 0 for a row without repeat.
	// Seq and the times count within the trial.
	Trial  int  `json:"trial,omitempty"`
	Warmup bool `json:"warmup,omitempty"`
	// Virtual says the request ran on the built-in server's virtual clock
	// (run --virtual): its times were simulated, not read off a socket.
	Virtual bool   `json:"virtual,omitempty"`
	URL     string `json:"url"`
	Stream  bool   `json:"stream"`
	// Step is the step of a ramped row (ramp) the request was sent in,
	// from 1; 0 for warmup and for a row without ramp (metrics/ramp.go).
	Step int `json:"step,omitempty"`

	// ConversationID and Turn place a request of a conversation row
	// (conversation): the conversation, unique in the run, and the turn,
	// from 0. Turn is nil outside conversations.
	ConversationID string `json:"conversation_id,omitempty"`
	Turn           *int   `json:"turn,omitempty"`

	// ScheduledNS is when the load pattern wanted the request sent. For
	// open-loop rows, StartNS - QueueNS - ScheduledNS is the dispatcher's
	// lag behind its schedule.
	ScheduledNS int64 `json:"scheduled_ns"`
	// StartNS is stamped just before the HTTP client looks for a
	// connection, after any wait for a concurrency slot (QueueNS).
	StartNS     int64 `json:"start_ns"`
	StartUnixNS int64 `json:"start_unix_ns"` // wall clock at StartNS, for correlating with server logs
	QueueNS     int64 `json:"queue_ns,omitempty"`

	ConnNS     int64 `json:"conn_ns,omitempty"` // a connection was obtained (httptrace GotConn)
	ConnReused bool  `json:"conn_reused,omitempty"`
	// Retries counts requests the HTTP transport sent again on a fresh
	// connection because the reused one closed before any response byte.
	// Usually a stale keep-alive connection (llama.cpp closes each after a
	// stream); it can also be a server dropping connections under load.
	Retries      int   `json:"retries,omitempty"`
	FirstByteNS  int64 `json:"first_byte_ns,omitempty"`  // first byte of the response headers
	FirstTokenNS int64 `json:"first_token_ns,omitempty"` // first event carrying generated text (reasoning included)
	// FirstOutputNS is the first event carrying non-reasoning text.
	FirstOutputNS int64 `json:"first_output_ns,omitempty"`
	LastTokenNS   int64 `json:"last_token_ns,omitempty"` // last event carrying generated text
	EndNS         int64 `json:"end_ns"`                  // the response ended: [DONE], end of body, or the error

	// FirstChoiceNS and LastChoiceNS are the first and last events of a
	// stream with a non-empty choices array, text or not: an empty role
	// chunk or a finish chunk counts. UsageNS is the last event with usage
	// and no choices (a usage-only chunk). Infermatrix's own metrics never
	// read them; they are where vLLM's benchmark fires TTFT and ends E2E,
	// for report.semantics: vllm (docs/metrics.md). A record without them
	// (zero while FirstTokenNS is set) was written by a client that did not
	// stamp them, and vLLM's figures fall back to text events.
	FirstChoiceNS int64 `json:"first_choice_ns,omitempty"`
	LastChoiceNS  int64 `json:"last_choice_ns,omitempty"`
	UsageNS       int64 `json:"usage_ns,omitempty"`

	Status int `json:"status,omitempty"`
	// ResponseID is the id the server gave its response ("chatcmpl-..."),
	// to find the request in the server's own logs.
	ResponseID   string `json:"response_id,omitempty"`
	Error        *Error `json:"error,omitempty"`
	FinishReason string `json:"finish_reason,omitempty"`

	InputTokens  Tokens `json:"input_tokens"`
	OutputTokens Tokens `json:"output_tokens"`
	// Inputs is how many inputs an embeddings or rerank request carried
	// (texts to embed, documents to score against the query); 0 for chat
	// and completions. A pooling request's InputTokens count all of them,
	// its OutputTokens nothing: it generates no token.
	Inputs int `json:"inputs,omitempty"`
	// CachedTokens is how many of the prompt's tokens the server says it
	// found in its prefix cache (usage.prompt_tokens_details.cached_tokens,
	// or llama.cpp's timings.cache_n); nil when it did not say.
	CachedTokens *int `json:"cached_tokens,omitempty"`
	// SharedTokens is how many leading prompt tokens the workload shares
	// with other requests on purpose, by the client's count: a declared
	// prefix, a trace's hash-id blocks, or a whole prompt the experiment
	// sends verbatim more than once. Cached tokens beyond these (and beyond
	// a chat template's) are a cache hit the row did not ask for.
	SharedTokens int `json:"shared_tokens,omitempty"`
	// TemplateTokens is how many tokens the server's chat template adds
	// to the prompt around the messages, where the client could learn
	// them: from the built-in server's configuration in process (sim's
	// Config.ChatTemplateTokens), or from a server's vLLM-shaped
	// /tokenize (runner/templateprobe.go); 0 where it could not. The
	// token check allows them, so that the template is not taken for a
	// tokenizer that counts the prompt differently.
	TemplateTokens int `json:"template_tokens,omitempty"`

	// Events are the arrival times of the events carrying generated text,
	// stamped when their bytes were read and before JSON decoding.
	Events []int64 `json:"events,omitempty"`
	// EventTokens holds, for each of Events, the client tokenizer's count
	// of that event's own text: 1 for a server that streams token by
	// token, more for one that batches (TGI), 0 for an event whose bytes
	// complete no token. Counting each event alone can differ by a token
	// from counting the whole text at once, where BPE merges across event
	// boundaries; OutputTokens.Client is the whole-text count. It is
	// empty when the output count equals the number of events: one token
	// per event, the common case, recorded without counting each event.
	EventTokens []int32 `json:"event_tokens,omitempty"`
}

// Error says why a request failed.
type Error struct {
	Class   string `json:"class"`
	Message string `json:"message"`
	// Detail tells apart failures of one class that other tools judge
	// differently (vLLM's benchmark counts some as successes): one of
	// the Detail constants, or empty.
	Detail string `json:"detail,omitempty"`
}

// Error details.
const (
	// DetailCleanEOF: a truncated stream whose body ended cleanly, without
	// data: [DONE] (rather than a connection closed mid-body).
	DetailCleanEOF = "eof"
	// DetailErrorEvent: a stream error sent as an SSE event of type
	// "error".
	DetailErrorEvent = "event"
	// DetailErrorData: a stream error sent as an ordinary data line
	// holding an error object.
	DetailErrorData = "data"
	// DetailClientFiles: a connection the client could not open because
	// its own process had no file descriptor left (EMFILE, ENFILE),
	// usually an open loop whose requests in flight piled up against a
	// server that could not keep up. The failure is the client's, not
	// the server's: the run's gate does not read it as the server
	// refusing, and the row is invalid (validity check client_files).
	DetailClientFiles = "client_files"
)

// Tokens counts one side of a request three ways, because tools disagree on
// which count is true and a reviewer should be able to see all of them.
type Tokens struct {
	Requested int  `json:"requested"`        // what the workload asked for
	Server    *int `json:"server,omitempty"` // the server's usage, when it reported one
	Client    int  `json:"client"`           // the client tokenizer's count of what was sent or received
	// Uncounted says Client is absent, not zero: the client's count of a
	// huge output, taken off the request's path (protocol/outcount.go),
	// was abandoned because the request was cancelled first (the run
	// interrupted past its grace period, or the row's cancel setting).
	Uncounted bool `json:"uncounted,omitempty"`
}

// Count is the count metrics use: the server's usage when present,
// otherwise the client tokenizer's.
func (t Tokens) Count() int {
	if t.Server != nil {
		return *t.Server
	}
	return t.Client
}

// OK reports whether the request succeeded.
func (r *Record) OK() bool { return r.Error == nil }

// Canceled reports whether the client ended the request on purpose, which
// says nothing about the server and so counts neither for nor against it.
func (r *Record) Canceled() bool { return r.Error != nil && r.Error.Class == ErrCanceled }

// EndToEndNS is the request's end-to-end latency: for a stream, to the last
// event carrying text (what a user sees as the end of the answer), and for a
// non-streamed response, or a stream that carried no text, to the end of the
// body. See docs/metrics.md.
func (r *Record) EndToEndNS() int64 {
	if r.Stream && r.LastTokenNS > 0 {
		return r.LastTokenNS
	}
	return r.EndNS
}

// TPOTms is (E2E - TTFT) / (output tokens - 1) in milliseconds, the mean time
// per output token after the first. ok is false when it is undefined: not
// streamed, or fewer than two output tokens.
func (r *Record) TPOTms() (v float64, ok bool) {
	if !r.Stream {
		return 0, false
	}
	return tpotMS(r.EndToEndNS(), r.FirstTokenNS, r.OutputTokens.Count())
}

// tpotMS is the TPOT formula, for every semantics: the decode time after
// the first token over the tokens after it. ok is false without a first
// token or with fewer than two tokens.
func tpotMS(e2e, ttft int64, n int) (v float64, ok bool) {
	if ttft == 0 || n < 2 {
		return 0, false
	}
	return float64(e2e-ttft) / 1e6 / float64(n-1), true
}

// MaxGapMS is the largest gap between consecutive text events, in ms, the
// worst stall a reader of this response saw.
func (r *Record) MaxGapMS() float64 {
	var max int64
	for i := 1; i < len(r.Events); i++ {
		if g := r.Events[i] - r.Events[i-1]; g > max {
			max = g
		}
	}
	return float64(max) / 1e6
}
