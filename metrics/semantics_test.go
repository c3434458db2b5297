package metrics

import (
	"strings"
	"testing"
)

// Hand-built chat streams on which the three semantics disagree. Times are
// ms after each request's start; every request starts at a row time given
// in ms.

// earlyRole is a stream whose server sent its role chunk (empty content)
// 50 ms before the first token, as vLLM does under chunked prefill, put the
// finish on the last token, and sent usage 5 ms after it. The server's
// prompt count includes 10 chat-template tokens.
func earlyRole() *Record {
	r := stream(1000, 100, 110, 120)
	r.FirstChoiceNS, r.LastChoiceNS, r.UsageNS = 50*msNS, 120*msNS, 125*msNS
	r.EndNS = 126 * msNS
	r.InputTokens = Tokens{Requested: 100, Server: intp(110), Client: 100}
	return r
}

// batched is a TGI-like stream: three events of four tokens each, then a
// finish chunk with no text at 290 ms and the usage-only chunk at 292 ms.
// The client's tokenizer counts 11 tokens where the server generated 12.
func batched() *Record {
	r := stream(1010, 200, 240, 280)
	r.EventTokens = []int32{4, 4, 4}
	r.FirstChoiceNS, r.LastChoiceNS, r.UsageNS = 200*msNS, 290*msNS, 292*msNS
	r.EndNS = 295 * msNS
	r.OutputTokens = Tokens{Requested: 12, Server: intp(12), Client: 11}
	return r
}

// reasoning is a reasoning model's stream: two reasoning events, then the
// answer at 60 ms.
func reasoning() *Record {
	r := stream(1020, 30, 40, 60)
	r.FirstOutputNS = 60 * msNS
	r.FirstChoiceNS, r.LastChoiceNS, r.UsageNS = 30*msNS, 60*msNS, 62*msNS
	r.EndNS = 63 * msNS
	return r
}

// TestSemantics summarises the same records under each semantics and
// checks every figure against the definitions in docs/metrics.md, worked
// out by hand in the comments.
func TestSemantics(t *testing.T) {
	slo := SLO{TTFTms: 250, TPOTms: 12, ITLms: 30}
	canceled := &Record{Stream: true, StartNS: 1030 * msNS, EndNS: 20 * msNS, Error: &Error{Class: ErrCanceled}}
	type want struct {
		ttft, e2e, itlMean, tpotMean, inSum, outSum float64
		itlCount                                    int
		window                                      float64
		good                                        int
		ratio                                       float64
	}
	tests := []struct {
		sem  string
		want want
	}{
		{SemInfermatrix, want{
			ttft:     (100 + 200 + 30) / 3.0, // first text events
			e2e:      (120 + 280 + 60) / 3.0, // last text events
			itlCount: 6, itlMean: (10 + 10 + 40 + 40 + 10 + 20) / 6.0,
			tpotMean: (20.0/2 + 80.0/11 + 30.0/2) / 3, // usage counts
			inSum:    310, outSum: 18,                 // server usage
			window: 0.305, // dispatch 1000 ms to batched's [DONE] at 1305 ms
			// earlyRole is good; batched's largest gap (40) misses itl_ms;
			// reasoning's TPOT (15) misses tpot_ms. The cancellation
			// counts neither way.
			good: 1, ratio: 1.0 / 3,
		}},
		{SemVLLM, want{
			ttft: (50 + 200 + 30) / 3.0, // the role chunk counts
			// The last chunk with choices ends E2E (since vLLM PR
			// #55508, the usage chunk after it no longer does).
			e2e: (120 + 290 + 60) / 3.0,
			// Gaps between choice chunks: role→first token, and the last
			// token→finish chunk, join the text gaps.
			itlCount: 8, itlMean: (50 + 10 + 10 + 40 + 40 + 10 + 10 + 20) / 8.0,
			tpotMean: ((120-50)/2.0 + (290-200)/11.0 + (60-30)/2.0) / 3,
			// usage.prompt_tokens from the usage chunk (earlyRole's 110),
			// else prompt_len; usage's completion_tokens.
			inSum: 310, outSum: 18,
			window: 0.305,
			// earlyRole's TPOT (35) and reasoning's (15) miss tpot_ms;
			// batched is good, as vLLM takes no ITL objective.
			good: 1, ratio: 1.0 / 3,
		}},
		{SemAIPerf, want{
			ttft: (100 + 200 + 30) / 3.0,
			e2e:  (120 + 280 + 60) / 3.0,
			// inter_token_latency, one per request, with the client's
			// output counts (3, 11, 3).
			itlCount: 3, itlMean: (20.0/2 + 80.0/10 + 30.0/2) / 3,
			tpotMean: (20.0/2 + 80.0/10 + 30.0/2) / 3,
			inSum:    300, outSum: 17,
			// First successful start (1000 ms) to the last content
			// response (batched's at 1010 + 280 ms).
			window: 0.29,
			// earlyRole (10) and batched (8) meet both objectives on
			// inter_token_latency; reasoning (15) does not. The ratio
			// counts the cancellation as an error.
			good: 2, ratio: 2.0 / 4,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.sem, func(t *testing.T) {
			a := NewAggregator(Options{Semantics: tt.sem, API: "chat", SLO: slo})
			for _, r := range []*Record{earlyRole(), batched(), reasoning(), canceled} {
				a.Add(r)
			}
			s := a.Summary("r", "r", RowComplete)
			w, m := tt.want, s.Metrics
			for _, c := range []struct {
				name      string
				got, want float64
			}{
				{"ttft mean", m.TTFT.Mean, w.ttft},
				{"ttfo mean (the answer's first text, in every semantics)", m.TTFO.Mean, (100 + 200 + 60) / 3.0},
				{"e2e mean", m.E2E.Mean, w.e2e},
				{"itl mean", m.ITL.Mean, w.itlMean},
				{"itl count", float64(m.ITL.Count), float64(w.itlCount)},
				{"tpot mean", m.TPOT.Mean, w.tpotMean},
				{"input tokens", m.InputTokens.Mean * 3, w.inSum},
				{"output tokens", m.OutputTokens.Mean * 3, w.outSum},
				{"window_s", s.WindowS, w.window},
				{"output tokens/s", s.Throughput.OutputTokensPerS, w.outSum / w.window},
				{"total tokens/s", s.Throughput.TotalTokensPerS, (w.inSum + w.outSum) / w.window},
				{"requests/s", s.Throughput.RequestsPerS, 3 / w.window},
				{"good", float64(s.Goodput.Good), float64(w.good)},
				{"goodput ratio", s.Goodput.Ratio, w.ratio},
			} {
				if !near(c.got, c.want) {
					t.Errorf("%s = %v; want %v", c.name, c.got, c.want)
				}
			}
			if s.Semantics != tt.sem || len(s.SemanticsNotes) != 0 {
				t.Errorf("semantics %q, notes %q; want %q and no notes", s.Semantics, s.SemanticsNotes, tt.sem)
			}
		})
	}
}

// TestVLLMCompletionsEndAtTheLastChoice: vLLM's completions function does
// not stamp the usage chunk, so E2E ends at the last chunk with choices.
func TestVLLMCompletionsEndAtTheLastChoice(t *testing.T) {
	a := NewAggregator(Options{Semantics: SemVLLM, API: "completions"})
	a.Add(earlyRole())
	s := a.Summary("r", "r", RowComplete)
	if s.Metrics.E2E.Mean != 120 || s.Metrics.TPOT.Mean != (120-50)/2.0 {
		t.Errorf("e2e %v, tpot %v; want 120 and 35", s.Metrics.E2E.Mean, s.Metrics.TPOT.Mean)
	}
}

// TestVLLMWithoutChoiceStamps: a record from a client that did not stamp
// choice chunks falls back to text events, and the summary says so.
func TestVLLMWithoutChoiceStamps(t *testing.T) {
	r := earlyRole()
	r.FirstChoiceNS, r.LastChoiceNS, r.UsageNS = 0, 0, 0
	a := NewAggregator(Options{Semantics: SemVLLM, API: "chat"})
	a.Add(r)
	s := a.Summary("r", "r", RowComplete)
	if s.Metrics.TTFT.Mean != 100 || s.Metrics.E2E.Mean != 120 || s.Metrics.ITL.Count != 2 {
		t.Errorf("ttft %v, e2e %v, %d ITL samples; want the text events' 100, 120 and 2", s.Metrics.TTFT.Mean, s.Metrics.E2E.Mean, s.Metrics.ITL.Count)
	}
	if len(s.SemanticsNotes) != 1 || !strings.Contains(s.SemanticsNotes[0], "1 of 1 successful requests have no choice-chunk stamps") {
		t.Errorf("notes = %q; want one on the missing stamps", s.SemanticsNotes)
	}
}

// TestAIPerfGoodputCountsMissingMetricsAsMisses: a non-streamed response
// has no TTFT. Infermatrix judges its TTFT objective on E2E; AIPerf counts
// the missing metric as a miss.
func TestAIPerfGoodputCountsMissingMetricsAsMisses(t *testing.T) {
	for _, tt := range []struct {
		sem  string
		good int
	}{{SemInfermatrix, 1}, {SemVLLM, 1}, {SemAIPerf, 0}} {
		a := NewAggregator(Options{Semantics: tt.sem, SLO: SLO{TTFTms: 1000}})
		a.Add(&Record{EndNS: 150 * msNS, OutputTokens: Tokens{Server: intp(50), Client: 50}, InputTokens: Tokens{Server: intp(10), Client: 10}})
		if s := a.Summary("r", "r", RowComplete); s.Goodput.Good != tt.good {
			t.Errorf("%s: %d good; want %d", tt.sem, s.Goodput.Good, tt.good)
		}
	}
}

// TestSemanticsNotes: each tool's semantics names what it keeps of
// infermatrix's, and an objective the tool cannot take.
func TestSemanticsNotes(t *testing.T) {
	if n := SemanticsNotes(SemInfermatrix, SLO{ITLms: 50}); len(n) != 0 {
		t.Errorf("infermatrix notes = %q; want none", n)
	}
	vllm := strings.Join(SemanticsNotes(SemVLLM, SLO{ITLms: 50}), "\n")
	if !strings.Contains(vllm, "slo.itl_ms is not applied") || !strings.Contains(vllm, "ttfo, ttst") {
		t.Errorf("vllm notes = %q", vllm)
	}
	if strings.Contains(strings.Join(SemanticsNotes(SemVLLM, SLO{}), "\n"), "itl_ms") {
		t.Error("vllm notes mention itl_ms without an ITL objective")
	}
}

// TestUncountedClientCountIsNotZero: a record whose client count was
// abandoned (Tokens.Uncounted) gives AIPerf's and vLLM's output the
// server's count, the only one it holds, not the 0 in Client.
func TestUncountedClientCountIsNotZero(t *testing.T) {
	server := 7
	r := &Record{Stream: true, OutputTokens: Tokens{Requested: 8, Server: &server, Uncounted: true}}
	for _, sem := range []string{SemAIPerf, SemVLLM, SemInfermatrix} {
		if v := measure(sem, "chat", r); v.out != 7 {
			t.Errorf("%s: output %d; want the server's 7", sem, v.out)
		}
	}
	r.OutputTokens.Uncounted = false
	r.OutputTokens.Client = 9
	if v := measure(SemAIPerf, "chat", r); v.out != 9 {
		t.Errorf("aiperf with a client count: output %d; want the client's 9", v.out)
	}
}

// TestOutputCountedByNoOneIsLeftOut: a successful request whose output
// neither the server (no usage) nor the client (its count abandoned)
// counted adds no zero to output_tokens or the token throughput; the
// summary says how many such requests there were.
func TestOutputCountedByNoOneIsLeftOut(t *testing.T) {
	for _, sem := range []string{SemAIPerf, SemVLLM, SemInfermatrix} {
		a := NewAggregator(Options{Semantics: sem, API: "chat"})
		counted := &Record{Stream: true, StartNS: 0, FirstTokenNS: 10e6, LastTokenNS: 90e6, EndNS: 100e6, Status: 200,
			Events: []int64{10e6, 90e6}, OutputTokens: Tokens{Requested: 8, Client: 8}, InputTokens: Tokens{Client: 4}}
		lost := &Record{Stream: true, StartNS: 0, FirstTokenNS: 10e6, LastTokenNS: 90e6, EndNS: 100e6, Status: 200,
			Events: []int64{10e6, 90e6}, OutputTokens: Tokens{Requested: 8, Uncounted: true}, InputTokens: Tokens{Client: 4}}
		a.Add(counted)
		a.Add(lost)
		s := a.Summary("r", "r", RowComplete)
		if s.Metrics.OutputTokens.Count != 1 || s.Metrics.OutputTokens.Mean != 8 {
			t.Errorf("%s: output_tokens %+v; want the one counted request's 8", sem, s.Metrics.OutputTokens)
		}
		if s.Metrics.TPOT.Count != 1 {
			t.Errorf("%s: TPOT from %d requests; want 1", sem, s.Metrics.TPOT.Count)
		}
		found := false
		for _, n := range s.SemanticsNotes {
			found = found || strings.Contains(n, "1 of 2 successful requests have no count of their output")
		}
		if !found {
			t.Errorf("%s: notes %q say nothing of the uncounted output", sem, s.SemanticsNotes)
		}
	}
}
