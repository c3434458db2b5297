package metrics

import (
	"strings"
	"testing"
	"unicode/utf8"
)

const msNS = int64(1e6) // a millisecond in nanoseconds

func intp(v int) *int { return &v }

// stream is a successful streamed request starting at startMS (row time),
// with one text event per token at the given offsets (ms from its start).
func stream(startMS int64, events ...int64) *Record {
	r := &Record{Stream: true, StartNS: startMS * msNS}
	for _, e := range events {
		r.Events = append(r.Events, e*msNS)
	}
	r.FirstTokenNS = r.Events[0]
	r.FirstOutputNS = r.Events[0]
	r.LastTokenNS = r.Events[len(r.Events)-1]
	r.EndNS = r.LastTokenNS + 1*msNS // [DONE] a millisecond after the last token
	n := len(events)
	r.OutputTokens = Tokens{Requested: n, Server: intp(n), Client: n}
	r.InputTokens = Tokens{Requested: 100, Server: intp(100), Client: 100}
	return r
}

// TestAggregatorDefinitions checks each metric against docs/metrics.md on
// hand-made records whose answers are known.
func TestAggregatorDefinitions(t *testing.T) {
	a := NewAggregator(Options{SLO: SLO{TTFTms: 150}})
	warm := stream(0, 500, 510)
	warm.Warmup = true
	a.Add(warm)
	a.Add(stream(1000, 100, 110, 120, 130)) // TTFT 100, gaps 10, TPOT 10, E2E 130
	a.Add(stream(1100, 200, 220, 260))      // TTFT 200 (misses the SLO), gaps 20 40, TPOT 30, E2E 260
	failed := &Record{Stream: true, StartNS: 1200 * msNS, EndNS: 5 * msNS, Status: 503,
		Error: &Error{Class: ErrHTTP, Message: "503"}}
	a.Add(failed)
	canceled := &Record{Stream: true, StartNS: 1300 * msNS, EndNS: 50 * msNS, Error: &Error{Class: ErrCanceled}}
	a.Add(canceled)
	s := a.Summary("r", "r", RowComplete)

	if s.Requests != (Requests{Sent: 4, Completed: 2, Failed: 2, Canceled: 1, Warmup: 1}) {
		t.Errorf("Requests = %+v", s.Requests)
	}
	m := s.Metrics
	checks := []struct {
		name string
		d    Dist
		n    int
		mean float64
	}{
		{"ttft", m.TTFT, 2, 150},
		{"ttst", m.TTST, 2, 15},
		{"itl (pooled gaps)", m.ITL, 5, (10 + 10 + 10 + 20 + 40) / 5.0},
		{"tpot", m.TPOT, 2, 20},
		{"e2e (to the last token, not [DONE])", m.E2E, 2, 195},
		{"output tokens", m.OutputTokens, 2, 3.5},
		{"queue (successful requests)", m.Queue, 2, 0},
	}
	for _, c := range checks {
		if c.d.Count != c.n || !near(c.d.Mean, c.mean) {
			t.Errorf("%s: count %d mean %v; want %d and %v", c.name, c.d.Count, c.d.Mean, c.n, c.mean)
		}
	}
	// Window: first measured dispatch (1000 ms) to the last end (the
	// second request's [DONE] at 1100 + 261 ms).
	const w = 0.361
	if !near(s.WindowS, w) {
		t.Errorf("WindowS = %v; want %v", s.WindowS, w)
	}
	if !near(s.Throughput.OutputTokensPerS, 7/w) || !near(s.Throughput.RequestsPerS, 2/w) {
		t.Errorf("Throughput = %+v", s.Throughput)
	}
	if !near(s.Throughput.InputTokensPerS, 200/w) || !near(s.Throughput.TotalTokensPerS, 207/w) {
		t.Errorf("Throughput = %+v", s.Throughput)
	}
	// Per user: mean of 1000/TPOT = (100 + 33.33)/2.
	if !near(s.Throughput.OutputTokensPerSU, (100+1000.0/30)/2) {
		t.Errorf("OutputTokensPerSU = %v", s.Throughput.OutputTokensPerSU)
	}
	// Goodput: one good (TTFT 100 ≤ 150) of three that count: the
	// 503 counts against, the deliberate cancellation does not.
	if s.Goodput.Good != 1 || !near(s.Goodput.Ratio, 1.0/3) {
		t.Errorf("Goodput = %+v; want 1 good, ratio 1/3", s.Goodput)
	}
	// Errors are the server's: the deliberate cancellation is counted in
	// requests.canceled, not as an error.
	if s.Errors.Total != 1 || s.Errors.ByClass[ErrHTTP] != 1 || len(s.Errors.ByClass) != 1 || !near(s.Errors.Ratio, 1.0/3) {
		t.Errorf("Errors = %+v; want the one 503 of three requests", s.Errors)
	}
}

func TestTokenCountsPreferServerUsage(t *testing.T) {
	r := stream(0, 10, 20)
	r.OutputTokens = Tokens{Requested: 2, Client: 3} // no usage: the client's count is used
	if r.OutputTokens.Count() != 3 {
		t.Errorf("Count without usage = %d; want the client's 3", r.OutputTokens.Count())
	}
	r.OutputTokens.Server = intp(2)
	if r.OutputTokens.Count() != 2 {
		t.Errorf("Count with usage = %d; want the server's 2", r.OutputTokens.Count())
	}
}

func TestNonStreamedRequests(t *testing.T) {
	a := NewAggregator(Options{SLO: SLO{TTFTms: 100}})
	r := &Record{StartNS: 0, EndNS: 150 * msNS, OutputTokens: Tokens{Server: intp(50)}, InputTokens: Tokens{Server: intp(10)}}
	a.Add(r)
	s := a.Summary("r", "r", RowComplete)
	if s.Metrics.TTFT.Count != 0 || s.Metrics.TPOT.Count != 0 || s.Metrics.ITL.Count != 0 {
		t.Errorf("non-streamed request produced TTFT/TPOT/ITL samples: %+v", s.Metrics)
	}
	if s.Metrics.E2E.Mean != 150 {
		t.Errorf("E2E = %v; want 150 (the whole body)", s.Metrics.E2E.Mean)
	}
	if s.Goodput.Good != 0 {
		t.Error("a non-streamed response arriving after the TTFT SLO counted as good; its first token arrives with the body")
	}
}

func TestTPOTNeedsTwoTokens(t *testing.T) {
	r := stream(0, 40)
	if _, ok := r.TPOTms(); ok {
		t.Error("TPOT defined for a one-token response")
	}
	r = stream(0, 40, 45, 60)
	if v, ok := r.TPOTms(); !ok || v != 10 {
		t.Errorf("TPOT = %v, %v; want 10", v, ok)
	}
	if g := r.MaxGapMS(); g != 15 {
		t.Errorf("MaxGapMS = %v; want 15", g)
	}
}

// TestSelfCheck checks that a client falling behind an open-loop schedule
// is flagged, and one keeping up is not.
func TestSelfCheck(t *testing.T) {
	run := func(lateMS int64) SelfCheck {
		a := NewAggregator(Options{RequestedRate: 100})
		for i := int64(0); i < 50; i++ {
			r := stream(0, 10, 20)
			r.ScheduledNS = i * 10 * msNS // every 10 ms
			r.StartNS = r.ScheduledNS + (i%2)*lateMS*msNS
			a.Add(r)
		}
		return a.Summary("r", "r", RowComplete).SelfCheck
	}
	ok := run(0)
	if ok.ClientBound || ok.RequestedRate != 100 || !near(ok.ScheduledRate, 100) || !near(ok.AchievedRate, 100) || ok.DispatchLag.Count != 50 {
		t.Errorf("on time: %+v", ok)
	}
	late := run(5) // half the requests leave 5 ms late: p99 lag 5 ms > max(1 ms, 1 ms)
	if !late.ClientBound || len(late.Notes) != 1 || late.DispatchLag.P99 != 5 {
		t.Errorf("late: %+v; want client-bound with a note", late)
	}
	// A trace row has no requested rate: its schedule's own rate sets
	// the limit, and lag is still measured.
	trace := NewAggregator(Options{OpenLoop: true})
	for i := int64(0); i < 50; i++ {
		r := stream(0, 10, 20)
		r.ScheduledNS = i * 10 * msNS
		r.StartNS = r.ScheduledNS + (i%2)*5*msNS
		trace.Add(r)
	}
	if c := trace.Summary("r", "r", RowComplete).SelfCheck; c.RequestedRate != 0 || !near(c.ScheduledRate, 100) || c.DispatchLag.Count != 50 || !c.ClientBound {
		t.Errorf("trace: %+v; want lag measured against the schedule's own rate", c)
	}
	closed := NewAggregator(Options{})
	closed.Add(stream(0, 10))
	if c := closed.Summary("r", "r", RowComplete).SelfCheck; c.RequestedRate != 0 || c.DispatchLag.Count != 0 || c.ClientBound {
		t.Errorf("closed loop: %+v; want no schedule to check", c)
	}
}

// BenchmarkAggregatorAdd measures folding one 128-token streamed record into
// a row summary, the collector's per-request cost.
func BenchmarkAggregatorAdd(b *testing.B) {
	events := make([]int64, 128)
	for i := range events {
		events[i] = int64(20+i*5) * 1000
	}
	r := stream(0, events...)
	a := NewAggregator(Options{SLO: SLO{TTFTms: 100, TPOTms: 10}})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		a.Add(r)
	}
}

// TestErrorExamples: a row's summary keeps, per class, the first failed
// request's message, clipped, so the decision record can say what went
// wrong; deliberate cancellations are not errors and give no example.
func TestErrorExamples(t *testing.T) {
	a := NewAggregator(Options{})
	long := strings.Repeat("é", MaxErrorExample) // two bytes a rune: the cut falls inside one
	for _, e := range []*Error{
		{Class: ErrHTTP, Message: "HTTP 503: overloaded"},
		{Class: ErrHTTP, Message: "HTTP 500: later"},
		{Class: ErrRedirect, Message: long},
		{Class: ErrCanceled, Message: "cancelled on purpose"},
	} {
		a.Add(&Record{Stream: true, StartNS: msNS, EndNS: 2 * msNS, Error: e})
	}
	s := a.Summary("r", "r", RowComplete)
	if got := s.Errors.Examples[ErrHTTP]; got != "HTTP 503: overloaded" {
		t.Errorf("http example %q; want the first message", got)
	}
	got := s.Errors.Examples[ErrRedirect]
	if len(got) > MaxErrorExample+len("…") || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("long example: %d bytes, valid UTF-8 %v: %q", len(got), utf8.ValidString(got), got)
	}
	if _, ok := s.Errors.Examples[ErrCanceled]; ok || len(s.Errors.Examples) != 2 {
		t.Errorf("examples %v; want http and redirect only", s.Errors.Examples)
	}
}
