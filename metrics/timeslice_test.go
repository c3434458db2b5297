package metrics

import (
	"strings"
	"testing"
)

// TestTimeslices buckets hand-made records into 100 ms slices: requests by
// when they ended, tokens by when their events arrived (weighted by the
// tokens each event carried, or evenly), TTFT by when the first token came.
func TestTimeslices(t *testing.T) {
	a := NewAggregator(Options{Timeslice: 100 * msNS})
	// Starts at 50 ms; events at 80, 140 and 210 ms carrying 1, 2 and 1
	// of its 8 tokens (usage): 2, 4 and 2. Ends at 220 ms.
	weighted := stream(50, 30, 90, 160)
	weighted.EventTokens = []int32{1, 2, 1}
	weighted.OutputTokens = Tokens{Requested: 8, Server: intp(8), Client: 8}
	weighted.EndNS = 170 * msNS
	a.Add(weighted)
	// Starts at 120 ms; events at 130 and 140 ms without per-event counts:
	// its 4 tokens split evenly. Ends at 150 ms.
	even := stream(120, 10, 20)
	even.OutputTokens = Tokens{Requested: 4, Server: intp(4), Client: 4}
	even.EndNS = 30 * msNS
	a.Add(even)
	// A server error ending at 210 ms counts; a deliberate cancellation
	// does not.
	a.Add(&Record{Stream: true, StartNS: 160 * msNS, EndNS: 50 * msNS, Error: &Error{Class: ErrHTTP}})
	a.Add(&Record{Stream: true, StartNS: 170 * msNS, EndNS: 10 * msNS, Error: &Error{Class: ErrCanceled}})
	// Not streamed: its 5 tokens arrive with the body at 300 ms, the end
	// of the window, which belongs to the last slice.
	a.Add(&Record{StartNS: 200 * msNS, EndNS: 100 * msNS, OutputTokens: Tokens{Server: intp(5)}})
	// Warmup is left out.
	warm := stream(0, 5)
	warm.Warmup = true
	a.Add(warm)

	ts := a.Summary("r", "r", RowComplete).Timeslices
	want := []Timeslice{
		{StartS: 0.05, EndS: 0.1, OutputTokens: 2, OutputTokensPerS: 40},
		{StartS: 0.1, EndS: 0.2, Completed: 1, OutputTokens: 4 + 2 + 2, RequestsPerS: 10, OutputTokensPerS: 80},
		{StartS: 0.2, EndS: 0.3, Completed: 2, Errors: 1, OutputTokens: 2 + 5, RequestsPerS: 20, OutputTokensPerS: 70},
	}
	ttft := [][]float64{{30}, {10}, nil}
	if ts.WidthS != 0.1 || len(ts.Slices) != len(want) {
		t.Fatalf("width %v, %d slices; want 0.1 and %d: %+v", ts.WidthS, len(ts.Slices), len(want), ts.Slices)
	}
	for i, got := range ts.Slices {
		w := want[i]
		if got.StartS != w.StartS || got.EndS != w.EndS || got.Completed != w.Completed || got.Errors != w.Errors ||
			!near(got.OutputTokens, w.OutputTokens) || !near(got.RequestsPerS, w.RequestsPerS) || !near(got.OutputTokensPerS, w.OutputTokensPerS) {
			t.Errorf("slice %d = %+v; want %+v", i, got, w)
		}
		if got.TTFT.Count != len(ttft[i]) || (len(ttft[i]) > 0 && got.TTFT.P50 != ttft[i][0]) {
			t.Errorf("slice %d TTFT = %+v; want %v", i, got.TTFT, ttft[i])
		}
	}
}

// TestTimeslicesStayBounded: a row far longer than MaxTimeslices slices
// doubles the width until it fits, and the slices still add up to the row.
func TestTimeslicesStayBounded(t *testing.T) {
	a := NewAggregator(Options{Timeslice: msNS})
	var tokens int
	for i := int64(0); i < 50; i++ {
		// Each request streams 100 tokens over 100 ms; together they
		// cover 5 s, 5000 slices of 1 ms.
		events := make([]int64, 100)
		for j := range events {
			events[j] = int64(j + 1)
		}
		r := stream(i*100, events...)
		a.Add(r)
		tokens += r.OutputTokens.Count()
	}
	s := a.Summary("r", "r", RowComplete)
	ts := s.Timeslices
	if ts.WidthS != 0.008 || len(ts.Slices) > MaxTimeslices {
		t.Errorf("width %v s, %d slices; want 8 ms, the first doubling of 1 ms that fits %d slices", ts.WidthS, len(ts.Slices), MaxTimeslices)
	}
	var done int
	var got float64
	for i, sl := range ts.Slices {
		done += sl.Completed
		got += sl.OutputTokens
		if i > 0 && sl.StartS != ts.Slices[i-1].EndS {
			t.Errorf("slice %d starts at %v; the one before ends at %v", i, sl.StartS, ts.Slices[i-1].EndS)
		}
	}
	if done != 50 || !near(got, float64(tokens)) {
		t.Errorf("slices hold %d requests and %v tokens; want 50 and %d", done, got, tokens)
	}
	if first, last := ts.Slices[0], ts.Slices[len(ts.Slices)-1]; first.StartS != 0 || !near(last.EndS, s.WindowS) {
		t.Errorf("slices span %v to %v; want the window, 0 to %v", first.StartS, last.EndS, s.WindowS)
	}
}

// TestTokenMismatch checks the 5% limit on the mean, either way, and what
// the check counts.
func TestTokenMismatch(t *testing.T) {
	check := func(in, out int, usage bool) TokenCheck {
		a := NewAggregator(Options{})
		for range 10 {
			r := stream(0, 10, 20)
			r.InputTokens = Tokens{Requested: 100, Server: intp(in), Client: 100}
			r.OutputTokens = Tokens{Requested: 200, Server: intp(out), Client: out}
			if !usage {
				r.InputTokens.Server, r.OutputTokens.Server = nil, nil
			}
			a.Add(r)
		}
		// A failed request's lengths say nothing about the workload.
		a.Add(&Record{Error: &Error{Class: ErrHTTP}, InputTokens: Tokens{Requested: 100, Server: intp(1)}})
		return a.Summary("r", "r", RowComplete).Tokens
	}
	if c := check(105, 190, true); c.Mismatch || c.Input.Diff != 0.05 || c.Output.Diff != -0.05 || c.Input.Requests != 10 {
		t.Errorf("exactly 5%% either way: %+v; want no mismatch", c)
	}
	c := check(106, 200, true)
	if !c.Mismatch || !c.Input.Mismatch || c.Output.Mismatch || c.Input.Diff != 0.06 || c.Input.Over != 10 ||
		c.Input.RequestedMean != 100 || c.Input.ServerMean != 106 {
		t.Errorf("input 6%% over: %+v; want the input flagged", c)
	}
	if len(c.Notes) != 1 || !strings.Contains(c.Notes[0], "input: the server counted 106.0 tokens on average against 100.0 requested (+6.0%") {
		t.Errorf("notes = %q", c.Notes)
	}
	if c := check(100, 180, true); !c.Mismatch || !c.Output.Mismatch || c.Output.Diff != -0.1 {
		t.Errorf("output 10%% short: %+v; want the output flagged", c)
	}
	if c := check(200, 400, false); c.Mismatch || c.Input.Requests != 0 || len(c.Notes) != 2 {
		t.Errorf("no usage: %+v; want nothing checked, and notes saying so", c)
	}
}

// TestTokenMismatchAllowsKnownTemplate: a chat template's tokens the client
// knows of (the built-in server's) are allowed, and only they: a server
// that also counts the contents otherwise is still flagged, and a template
// the client does not know of is flagged as before.
func TestTokenMismatchAllowsKnownTemplate(t *testing.T) {
	check := func(server, template int) TokenCheck {
		a := NewAggregator(Options{})
		for range 10 {
			r := stream(0, 10, 20)
			r.InputTokens = Tokens{Requested: 100, Server: intp(server), Client: 100}
			r.OutputTokens = Tokens{Requested: 2, Server: intp(2), Client: 2}
			r.TemplateTokens = template
			a.Add(r)
		}
		return a.Summary("r", "r", RowComplete).Tokens
	}
	if c := check(135, 35); c.Mismatch || c.Input.Diff != 0 || c.Input.Over != 0 || c.Input.ServerMean != 135 || c.Input.TemplateMean != 35 {
		t.Errorf("Llama's 35 template tokens, known: %+v; want no mismatch, the server's 135 and the template's 35 reported", c)
	}
	c := check(145, 35)
	if !c.Mismatch || c.Input.Diff != 0.1 || c.Input.Over != 10 {
		t.Errorf("contents counted 10%% over besides the template: %+v; want flagged", c)
	}
	if len(c.Notes) != 1 || !strings.Contains(c.Notes[0], "145.0 tokens on average (35.0 of them its chat template's, allowed) against 100.0 requested (+10.0%") {
		t.Errorf("notes = %q", c.Notes)
	}
	if c := check(135, 0); !c.Mismatch || c.Input.Diff != 0.35 {
		t.Errorf("a template the client does not know of: %+v; want flagged, as on a real server", c)
	}
}

// TestClientLoad checks the CPU share, the client-bound limit and the
// measurement error the self-check derives from the runner's figures.
func TestClientLoad(t *testing.T) {
	check := func(l ClientLoad) SelfCheck {
		a := NewAggregator(Options{})
		a.Add(stream(0, 10))
		a.SetClientLoad(l)
		return a.Summary("r", "r", RowComplete).SelfCheck
	}
	c := check(ClientLoad{CPUSeconds: 1, WallSeconds: 2, Cores: 2, ClockResolutionNS: 50, SchedDelayP99NS: 200_000})
	if c.ClientCPU != 0.25 || c.Cores != 2 || c.ClientBound || c.MeasurementErrorMS != 0.20005 || c.ClockResolutionMS != 0.00005 || c.SchedDelayP99MS != 0.2 {
		t.Errorf("a quarter of two cores: %+v", c)
	}
	c = check(ClientLoad{CPUSeconds: 1.8, WallSeconds: 1, Cores: 2})
	if !c.ClientBound || len(c.Notes) != 1 || !strings.Contains(c.Notes[0], "90% of its 2 cores") {
		t.Errorf("90%% of the cores: %+v; want client-bound with a note", c)
	}
	c = check(ClientLoad{CPUSeconds: 0.2, WallSeconds: 1, Cores: 2, HostCPU: 0.97, SharedWithServer: true})
	if c.ClientBound || c.HostCPU != 0.97 || !c.SharedWithServer || len(c.Notes) != 1 || !strings.Contains(c.Notes[0], "97% busy") {
		t.Errorf("a busy machine: %+v; want a note, not client-bound", c)
	}
	if c := check(ClientLoad{ClockResolutionNS: 40}); c.Cores != 0 || c.ClientCPU != 0 || c.MeasurementErrorMS != 0.00004 {
		t.Errorf("no CPU figure: %+v; want the measurement error alone", c)
	}
}
