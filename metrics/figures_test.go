package metrics

import (
	"strings"
	"testing"
)

// TestClientBoundReadsP99: three of fifty requests leaving 5 ms late is a
// client that falls behind at its tail, though its median is on time.
func TestClientBoundReadsP99(t *testing.T) {
	a := NewAggregator(Options{RequestedRate: 100})
	for i := int64(0); i < 50; i++ {
		r := stream(0, 10, 20)
		r.ScheduledNS = i * 10 * msNS
		r.StartNS = r.ScheduledNS
		if i%17 == 3 {
			r.StartNS += 5 * msNS
		}
		a.Add(r)
	}
	c := a.Summary("r", "r", RowComplete).SelfCheck
	if c.DispatchLag.P50 != 0 || c.DispatchLag.P99 < 4 || !c.ClientBound {
		t.Errorf("p50 %v, p99 %v, client-bound %v; want the p99 to flag the row", c.DispatchLag.P50, c.DispatchLag.P99, c.ClientBound)
	}
}

// TestGoodputE2EObjective: a request over the end-to-end objective is not
// good, whatever its TTFT and TPOT.
func TestGoodputE2EObjective(t *testing.T) {
	for _, sem := range []string{SemInfermatrix, SemVLLM, SemAIPerf} {
		a := NewAggregator(Options{Semantics: sem, SLO: SLO{TTFTms: 1000, TPOTms: 100, E2Ems: 150}})
		fast := stream(0, 10, 20, 30)          // E2E 30 ms
		slow := stream(100, 10, 100, 190, 200) // E2E 200 ms, TPOT 63 ms
		for _, r := range []*Record{fast, slow} {
			r.FirstChoiceNS, r.LastChoiceNS = r.FirstTokenNS, r.LastTokenNS
			r.OutputTokens.Client = len(r.Events)
		}
		a.Add(fast)
		a.Add(slow)
		if g := a.Summary("r", "r", RowComplete).Goodput; g.Good != 1 {
			t.Errorf("%s: %d good; want 1: the 200 ms request misses e2e_ms 150", sem, g.Good)
		}
	}
}

// TestTokenCheckCountsShortOutputs: outputs shorter than asked for (a
// server stopping at EOS) count against the limit as longer ones do.
func TestTokenCheckCountsShortOutputs(t *testing.T) {
	a := NewAggregator(Options{})
	for i := 0; i < 10; i++ {
		r := stream(0, 10, 20)
		n := 100
		if i < 3 {
			n = 50 // stopped early
		}
		r.OutputTokens = Tokens{Requested: 100, Server: intp(n), Client: n}
		a.Add(r)
	}
	c := a.Summary("r", "r", RowComplete).Tokens
	if c.Output.Over != 3 || !c.Mismatch || c.Output.Diff >= 0 {
		t.Errorf("output check %+v; want 3 requests over the limit, short, flagged", c.Output)
	}
}

// TestInFlight: the mean is weighted by time over the measured window,
// warmup requests in flight during it included; a request that ends as
// another starts at the same instant is one in flight, not two.
func TestInFlight(t *testing.T) {
	a := NewAggregator(Options{})
	warm := &Record{Warmup: true, Stream: true, StartNS: 0, EndNS: 150 * msNS}
	a.Add(warm) // in flight for the window's first 50 ms
	for _, r := range []*Record{
		{Stream: true, StartNS: 100 * msNS, EndNS: 100 * msNS, Events: []int64{50 * msNS}, FirstTokenNS: 50 * msNS, LastTokenNS: 50 * msNS},
		{Stream: true, StartNS: 200 * msNS, EndNS: 100 * msNS, Events: []int64{50 * msNS}, FirstTokenNS: 50 * msNS, LastTokenNS: 50 * msNS},
		{Stream: true, StartNS: 100 * msNS, EndNS: 200 * msNS, Events: []int64{50 * msNS}, FirstTokenNS: 50 * msNS, LastTokenNS: 50 * msNS},
	} {
		a.Add(r)
	}
	// Window 100–300 ms: 100–150 three in flight, 150–300 two.
	got := a.Summary("r", "r", RowComplete).InFlight
	if want := (3*50 + 2*150) / 200.0; !near(got.Mean, want) || got.Max != 3 {
		t.Errorf("in flight %+v; want mean %v, max 3", got, want)
	}
}

// TestZeroGaps counts token events read together with the one before.
func TestZeroGaps(t *testing.T) {
	a := NewAggregator(Options{})
	a.Add(stream(0, 10, 10, 10, 20, 30)) // two zero gaps of four
	a.Add(stream(0, 10, 20, 30))         // none of two
	c := a.Summary("r", "r", RowComplete).SelfCheck
	if c.Gaps != 6 || c.ZeroGaps != 2 || c.ZeroGapShare != round6(2.0/6) {
		t.Errorf("gaps %d, zero %d, share %v; want 6, 2, 1/3", c.Gaps, c.ZeroGaps, c.ZeroGapShare)
	}
}

// TestCacheFigures: hit ratio over the requests that reported one; cached
// tokens beyond the declared shared prefix and the server's own template
// tokens are unexpected.
func TestCacheFigures(t *testing.T) {
	a := NewAggregator(Options{})
	add := func(prompt, client, shared int, cached *int) {
		r := stream(0, 10, 20)
		r.InputTokens = Tokens{Requested: client, Server: intp(prompt), Client: client}
		r.SharedTokens, r.CachedTokens = shared, cached
		a.Add(r)
	}
	add(1030, 1000, 0, intp(16))    // a chat template's 30 tokens, one block cached: expected
	add(1030, 1000, 512, intp(528)) // a shared prefix of 512 plus the template: expected
	add(1030, 1000, 0, intp(1008))  // 978 tokens nobody meant to repeat
	// No count, from a server that counts others: none cached (SGLang
	// reports cached tokens only when there are some).
	add(1030, 1000, 0, nil)
	c := a.Summary("r", "r", RowComplete).Cache
	want := Cache{Requests: 4, PromptTokens: 4120, CachedTokens: 1552, UnexpectedTokens: 1008 - 30, UnexpectedRequests: 1}
	want.HitRatio = round6(1552.0 / 4120)
	want.UnexpectedRatio = round6(978.0 / 4120)
	if c != want {
		t.Errorf("cache %+v; want %+v", c, want)
	}
	if (Cache{}).Known() || !c.Known() {
		t.Error("Known")
	}
	// A server that never counts leaves the figures unknown.
	b := NewAggregator(Options{})
	b.Add(stream(0, 10, 20))
	if c := b.Summary("r", "r", RowComplete).Cache; c.Known() || c != (Cache{}) {
		t.Errorf("no counts at all: %+v; want unknown", c)
	}
}

// TestPerUserSpeedIsTheMedian: one request whose tokens came in a burst
// (TPOT near zero, thousands of tokens a second) does not move it.
func TestPerUserSpeedIsTheMedian(t *testing.T) {
	a := NewAggregator(Options{})
	for _, r := range []*Record{stream(0, 10, 20, 30), stream(0, 10, 20, 30), stream(0, 10, 10, 10)} {
		r.OutputTokens.Client = 3
		a.Add(r)
	}
	if got := a.Summary("r", "r", RowComplete).Throughput.OutputTokensPerSU; got != 100 {
		t.Errorf("per-user speed %v; want the median request's 100 tok/s", got)
	}
}

// TestVLLMSuccessRule: vllm bench serve counts a stream that ends cleanly
// without [DONE], or carries an error as a plain data line after its first
// choices, as a success; an "event: error", a broken body, a reset, or a
// stream without choices fails.
func TestVLLMSuccessRule(t *testing.T) {
	with := func(class, detail string) *Record {
		r := stream(0, 10, 20, 30)
		r.FirstChoiceNS, r.LastChoiceNS = 10*msNS, 30*msNS
		r.OutputTokens.Client = 3
		if class != "" {
			r.Error = &Error{Class: class, Message: "x", Detail: detail}
		}
		return r
	}
	usageOnly := &Record{Stream: true, EndNS: 5 * msNS, UsageNS: 4 * msNS, InputTokens: Tokens{Server: intp(3)}, OutputTokens: Tokens{Server: intp(0)}}
	tests := []struct {
		name string
		r    *Record
		ok   bool
	}{
		{"clean", with("", ""), true},
		{"no [DONE], clean end of body", with(ErrTruncated, DetailCleanEOF), true},
		{"closed mid-body", with(ErrTruncated, ""), false},
		{"error data line after choices", with(ErrStream, DetailErrorData), true},
		{"event: error", with(ErrStream, DetailErrorEvent), false},
		{"reset", with(ErrReset, ""), false},
		{"timeout", with(ErrTimeout, ""), false},
		{"no chunk with choices", usageOnly, false},
	}
	for _, tt := range tests {
		a := NewAggregator(Options{Semantics: SemVLLM, API: "chat"})
		a.Add(tt.r)
		s := a.Summary("r", "r", RowComplete)
		if got := s.Requests.Completed == 1; got != tt.ok {
			t.Errorf("%s: success %v; want %v (%+v)", tt.name, got, tt.ok, s.Requests)
		}
		if !tt.ok && s.Errors.Total != 1 {
			t.Errorf("%s: errors %+v; want it counted as vLLM's failure", tt.name, s.Errors)
		}
		// infermatrix's own rule is stricter: anything with an error fails.
		b := NewAggregator(Options{API: "chat"})
		b.Add(tt.r)
		if got := b.Summary("r", "r", RowComplete).Requests.Completed == 1; got != (tt.r.Error == nil) {
			t.Errorf("%s under infermatrix: success %v", tt.name, got)
		}
	}
	// The success after an error data line ends E2E at its last choices.
	a := NewAggregator(Options{Semantics: SemVLLM, API: "chat"})
	r := with(ErrStream, DetailErrorData)
	r.EndNS = 500 * msNS
	a.Add(r)
	if e := a.Summary("r", "r", RowComplete).Metrics.E2E.Mean; e != 30 {
		t.Errorf("e2e %v; want 30, the last chunk with choices", e)
	}
	if n := SemanticsNotes(SemVLLM, SLO{}); !strings.Contains(strings.Join(n, " "), "02cfb534") {
		t.Errorf("notes %q do not name the vLLM commit followed", n)
	}
}
