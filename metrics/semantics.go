package metrics

// Semantics name whose metric definitions a summary follows
// (report.semantics). Benchmark tools give the same names different
// meanings; summarising the same records with another tool's definitions
// lets a user put infermatrix's numbers beside that tool's and see where a
// difference comes from the definitions rather than from the server. The
// definitions are in docs/metrics.md, taken from
// ../shared/reference/peer-metrics.md; where that is silent, infermatrix's
// own definition stands.
const (
	SemInfermatrix = "infermatrix" // docs/metrics.md
	SemVLLM        = "vllm"        // vllm bench serve
	SemAIPerf      = "aiperf"      // NVIDIA AIPerf, default options
)

// measured is one successful request's values under a semantics. Times are
// nanoseconds after the request's t0.
type measured struct {
	ttft    int64 // 0: no first token (not streamed, or no text)
	e2e     int64
	in, out int
	hasIn   bool // the input count this semantics reads was recorded
	tpot    float64
	hasTPOT bool
	// noOut: the output was counted by no one (Tokens.Uncounted and no
	// usage), so out is unknown, not zero.
	noOut bool
	// fallback is set when a vLLM figure had to be taken at text events
	// because the record lacks choice-chunk stamps.
	fallback bool
}

// measure computes r's values under sem; api ("chat" or "completions")
// matters to vLLM, whose two request functions end E2E differently.
func measure(sem, api string, r *Record) measured {
	v := measured{e2e: r.EndToEndNS(), in: r.InputTokens.Count(), out: r.OutputTokens.Count(), hasIn: true}
	if r.Stream {
		v.ttft = r.FirstTokenNS
	}
	switch sem {
	case SemVLLM:
		// Usage counts only from a chunk without choices (UsageNS); the
		// prompt is then the server's count, else the dataset's own
		// prompt_len (what the row asked for); the output is the
		// server's completion_tokens unless absent or zero, else the
		// client's count of the text.
		fromUsage := !r.Stream || r.UsageNS > 0
		v.in, v.hasIn = r.InputTokens.Requested, r.InputTokens.Requested > 0
		if !v.hasIn {
			v.in, v.hasIn = r.InputTokens.Client, r.InputTokens.Client > 0
		}
		if fromUsage && r.InputTokens.Server != nil {
			v.in, v.hasIn = *r.InputTokens.Server, true
		}
		v.out = clientOut(r)
		if fromUsage && r.OutputTokens.Server != nil && *r.OutputTokens.Server > 0 {
			v.out = *r.OutputTokens.Server
		}
		if r.Stream {
			v.ttft, v.e2e, v.fallback = vllmTimes(api, r)
		}
	case SemAIPerf:
		// AIPerf counts both sides with its tokenizer unless told to use
		// the server's usage (--use-server-token-count).
		v.in, v.hasIn = r.InputTokens.Client, r.InputTokens.Client > 0
		v.out = clientOut(r)
	}
	if r.OutputTokens.Uncounted && r.OutputTokens.Server == nil {
		v.noOut = true
		return v
	}
	// TPOT, and AIPerf's inter_token_latency, which is the same formula.
	v.tpot, v.hasTPOT = tpotMS(v.e2e, v.ttft, v.out)
	return v
}

// clientOut is the client's output count, or where it is absent
// (Tokens.Uncounted: an interrupted run abandoned it) the server's, the
// only count the record holds; with neither it is 0, and TPOT undefined.
func clientOut(r *Record) int {
	if r.OutputTokens.Uncounted {
		return r.OutputTokens.Count()
	}
	return r.OutputTokens.Client
}

// missingChoiceStamps reports whether a streamed record carries text but
// not the choice-chunk stamps vLLM's definitions need: it was written by a
// client that did not record them.
func missingChoiceStamps(r *Record) bool {
	return r.FirstTokenNS > 0 && (r.FirstChoiceNS == 0 || r.LastChoiceNS == 0)
}

// vllmTimes returns a stream's TTFT and E2E as vllm bench serve takes them
// (benchmarks/lib/endpoint_request_func.py at 02cfb534, after vLLM PR
// #55508): TTFT at the first chunk with choices, even an empty role chunk;
// E2E at the last chunk with choices, for chat and completions alike (the
// usage chunk after it no longer counts). Without the stamps it falls back
// to the text events and says so.
func vllmTimes(api string, r *Record) (ttft, e2e int64, fallback bool) {
	if missingChoiceStamps(r) {
		return r.FirstTokenNS, r.EndToEndNS(), true
	}
	ttft = r.FirstChoiceNS
	if r.FirstTokenNS > 0 && r.FirstTokenNS < ttft {
		ttft = r.FirstTokenNS // a text event is a choice chunk
	}
	e2e = max(r.LastChoiceNS, r.LastTokenNS)
	if e2e == 0 {
		e2e = r.EndNS // no choice chunk at all
	}
	return ttft, e2e, false
}

// vllmGaps calls f with each gap between consecutive chunks with choices,
// as vLLM's ITL list holds them: the text events, preceded by a separate
// role chunk and followed by a separate finish chunk where the stream had
// them. A choice chunk without text in the middle of a stream is not
// stamped and so not seen; such chunks are rare (vLLM sends none).
func vllmGaps(r *Record, f func(ns int64)) {
	if missingChoiceStamps(r) || len(r.Events) == 0 {
		eventGaps(r.Events, f)
		return
	}
	if r.FirstChoiceNS > 0 && r.FirstChoiceNS < r.Events[0] {
		f(r.Events[0] - r.FirstChoiceNS)
	}
	eventGaps(r.Events, f)
	if last := r.Events[len(r.Events)-1]; r.LastChoiceNS > last {
		f(r.LastChoiceNS - last)
	}
}

func eventGaps(events []int64, f func(ns int64)) {
	for i := 1; i < len(events); i++ {
		f(events[i] - events[i-1])
	}
}

// vllmSucceeded applies vllm bench serve's success rule to a record: HTTP
// 200, at least one chunk with choices, and no exception until the stream
// ends. [DONE] is never required, so a stream that ends cleanly without it
// succeeds; an error sent as a plain data line after the first choices is
// not even seen (it has no choices and no usage) and the request succeeds
// with what came before; an error sent as an "event: error" SSE event
// breaks its JSON parsing and fails it, as do resets, timeouts and broken
// bodies. Non-streamed requests (vLLM's benchmark always streams) keep
// infermatrix's rule.
func vllmSucceeded(r *Record) bool {
	if !r.Stream {
		return r.OK()
	}
	choices := r.FirstChoiceNS > 0 || (r.FirstChoiceNS == 0 && r.FirstTokenNS > 0)
	switch {
	case r.Error == nil:
		return choices
	case r.Error.Class == ErrTruncated && r.Error.Detail == DetailCleanEOF:
		return choices
	case r.Error.Class == ErrStream && r.Error.Detail == DetailErrorData:
		return choices
	}
	return false
}

// SemanticsNotes says, for a run, where a semantics' summary departs from
// the tool it follows or from infermatrix's own definitions: what it could
// not follow and what it kept of ours. decision.md shows them.
func SemanticsNotes(sem string, slo SLO) []string {
	var notes []string
	switch sem {
	case SemVLLM:
		notes = append(notes,
			"follows vllm bench serve at vLLM commit 02cfb534 (benchmarks/lib/endpoint_request_func.py, after PR #55508; docs/metrics.md lists what differs)",
			"success is vLLM's: a stream that ends without [DONE] but cleanly, or carries an error as a plain data line after its first choices, succeeds; errors.* count vLLM's failures",
			"ttft, itl, tpot and e2e: TTFT at the first chunk with choices (an empty role chunk counts), ITL between chunks with choices, E2E to the last chunk with choices",
			"input_tokens is the server's usage.prompt_tokens from a usage chunk, else the prompt length asked for (vLLM's prompt_len); output_tokens is usage.completion_tokens from a usage chunk unless zero, else the client's count of the text",
			"window_s runs from the first measured dispatch to the end of the last measured request, where vLLM's duration starts just before its first dispatch: infermatrix's warmup requests run under the row's load, vLLM's before its clock starts",
			"ttfo, ttst, queue, goodput.ratio and throughput.output_tokens_per_s_per_user are not vLLM metrics: they are infermatrix's, the last computed from vLLM's TPOT")
		if slo.ITLms > 0 {
			notes = append(notes, "vLLM's goodput takes only ttft, tpot and e2el objectives: slo.itl_ms is not applied")
		}
	case SemAIPerf:
		notes = append(notes,
			"input and output tokens are the client tokenizer's counts, AIPerf's default (without --use-server-token-count)",
			"itl and tpot both hold AIPerf's inter_token_latency, (E2E − TTFT) ÷ (OSL − 1) per request; AIPerf's inter_chunk_latency is infermatrix's itl",
			"window_s is AIPerf's benchmark_duration: from the first successful request's start to the last content response; every throughput divides by it",
			"goodput: a request missing a metric an objective needs is not good; goodput.ratio is AIPerf's good_request_fraction, over every measured request, cancellations included",
			"throughput.input_tokens_per_s is not an AIPerf metric: Σ ISL over AIPerf's duration")
		if slo.ITLms > 0 {
			notes = append(notes, "slo.itl_ms judges AIPerf's inter_token_latency (a per-request mean), not the request's largest gap")
		}
	}
	return notes
}
