package metrics

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// spillRecords is a ramped, open-loop conversation row with failures,
// warmup, ties and long streams: every metric, turn, step, timeslice and
// the in-flight sweep get samples.
func spillRecords(n int) []*Record {
	rng := rand.New(rand.NewPCG(7, 8))
	var out []*Record
	for i := range n {
		start := int64(i) * 3 * msNS
		r := &Record{Stream: true, StartNS: start, ScheduledNS: start - int64(rng.IntN(3))*msNS, QueueNS: int64(rng.IntN(2)) * msNS,
			Step: 1 + i*3/n, Warmup: i < 5, Turn: intp(i % 4)}
		ev := int64(10+rng.IntN(40)) * msNS
		for k := range 1 + rng.IntN(12) {
			if k > 0 && rng.IntN(4) > 0 {
				ev += int64(rng.IntN(3000)) * 1000 // ties (zero gaps) and microsecond gaps
			}
			r.Events = append(r.Events, ev)
		}
		r.FirstTokenNS, r.FirstOutputNS = r.Events[0], r.Events[0]
		r.LastTokenNS = r.Events[len(r.Events)-1]
		r.EndNS = r.LastTokenNS + msNS
		k := len(r.Events)
		r.OutputTokens = Tokens{Requested: k, Server: intp(k), Client: k}
		r.InputTokens = Tokens{Requested: 100, Server: intp(100 + i%3), Client: 100}
		r.CachedTokens = intp(i % 50)
		if i%17 == 0 {
			r.Error = &Error{Class: ErrHTTP, Message: "HTTP 503"}
		}
		out = append(out, r)
	}
	return out
}

func spillSummary(recs []*Record, limit int, sem string) (RowSummary, *Aggregator) {
	return spillSummaryEvery(recs, limit, sem, 100*msNS)
}

func spillSummaryEvery(recs []*Record, limit int, sem string, slice int64) (RowSummary, *Aggregator) {
	a := NewAggregator(Options{Percentiles: []float64{75, 99.9}, OpenLoop: true, Semantics: sem, SpillLimit: limit, Timeslice: slice,
		SLO:  SLO{TTFTms: 40},
		Ramp: &Ramp{Dimension: "rate", Levels: []float64{1, 2, 3}, StepNS: 1000 * msNS}})
	for _, r := range recs {
		a.Add(r)
	}
	return a.Summary("r", "r", RowComplete), a
}

// TestSpilledSummaryMatchesInMemory: a row summarised with a spill limit
// of 64 samples a metric (4 a timeslice) writes the summary the same row writes in memory:
// every count, min, max, percentile (extra ones included), in-flight
// figure, timeslice, turn and step bit for bit, the means and deviations
// to the last digits; p(metric, q) answers any q from the spilled samples
// as from the in-memory ones, and Values returns the same samples.
func TestSpilledSummaryMatchesInMemory(t *testing.T) {
	recs := spillRecords(3000)
	for _, sem := range []string{SemInfermatrix, SemVLLM, SemAIPerf} {
		mem, _ := spillSummary(recs, 1<<30, sem)
		spilled, agg := spillSummary(recs, 64, sem)
		if !agg.itl.Spilled() || !agg.ttft.Spilled() || agg.store.Size() == 0 {
			t.Fatalf("%s: nothing spilled at a limit of 64", sem)
		}
		if _, inMem := agg.spans.InMemory(); inMem {
			t.Fatalf("%s: spans did not spill", sem)
		}
		if mem.Metrics.ITL.Count < 1000 {
			t.Fatalf("%s: %d ITL samples; want a row well past the limit", sem, mem.Metrics.ITL.Count)
		}
		compareSummaries(t, sem, mem, spilled)
		for _, d := range []struct {
			name     string
			mem, spl Dist
		}{{"itl", mem.Metrics.ITL, spilled.Metrics.ITL}, {"ttft", mem.Metrics.TTFT, spilled.Metrics.TTFT},
			{"lag", mem.SelfCheck.DispatchLag, spilled.SelfCheck.DispatchLag},
			{"turn 2 itl", mem.ByTurn[2].ITL, spilled.ByTurn[2].ITL}, {"step 3 e2e", mem.Steps[2].Metrics.E2E, spilled.Steps[2].Metrics.E2E}} {
			for _, q := range []float64{0, 12.5, 50, 99, 99.99, 100} {
				w, err1 := d.mem.Percentile(q)
				g, err2 := d.spl.Percentile(q)
				if err1 != nil || err2 != nil || math.Float64bits(w) != math.Float64bits(g) {
					t.Errorf("%s %s: p(%v) %v (%v) after spilling; want %v (%v)", sem, d.name, q, g, err2, w, err1)
				}
			}
			if !slices.Equal(d.mem.Values(), d.spl.Values()) {
				t.Errorf("%s %s: Values differ after spilling", sem, d.name)
			}
		}
	}
}

// compareSummaries requires the two summaries' JSON to match, numbers
// bit for bit but those named mean or std (and the AIPerf per-user mean,
// a mean too), which must agree to a relative 1e-12.
func compareSummaries(t *testing.T, what string, want, got RowSummary) {
	t.Helper()
	var w, g any
	for _, x := range []struct {
		s   RowSummary
		out *any
	}{{want, &w}, {got, &g}} {
		b, err := json.Marshal(x.s)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, x.out); err != nil {
			t.Fatal(err)
		}
	}
	diffJSON(t, what, "", w, g)
}

func diffJSON(t *testing.T, what, path string, w, g any) {
	t.Helper()
	switch wv := w.(type) {
	case map[string]any:
		gv, ok := g.(map[string]any)
		if !ok || len(gv) != len(wv) {
			t.Errorf("%s %s: %v; want %v", what, path, g, w)
			return
		}
		for k := range wv {
			diffJSON(t, what, path+"."+k, wv[k], gv[k])
		}
	case []any:
		gv, ok := g.([]any)
		if !ok || len(gv) != len(wv) {
			t.Errorf("%s %s: %d entries; want %d", what, path, len(gv), len(wv))
			return
		}
		for i := range wv {
			diffJSON(t, what, path+"["+strconv.Itoa(i)+"]", wv[i], gv[i])
		}
	case float64:
		gv, _ := g.(float64)
		mean := (strings.HasSuffix(path, ".mean") || strings.HasSuffix(path, ".std")) && !strings.Contains(path, "in_flight")
		if mean || strings.HasSuffix(path, ".throughput.output_tokens_per_s_per_user") {
			if math.Abs(gv-wv) > 1e-12*max(1, math.Abs(wv)) {
				t.Errorf("%s %s: %v; want %v within 1e-12", what, path, gv, wv)
			}
			return
		}
		if gv != wv {
			t.Errorf("%s %s: %v; want %v", what, path, gv, wv)
		}
	default:
		if !reflect.DeepEqual(w, g) {
			t.Errorf("%s %s: %v; want %v", what, path, g, w)
		}
	}
}

// TestSpilledTimeslicesCoarsen: a row longer than MaxTimeslices slices
// merges its slots, spilled or not, and its slices' TTFT stay those of the
// in-memory row.
func TestSpilledTimeslicesCoarsen(t *testing.T) {
	recs := spillRecords(6000)
	mem, _ := spillSummaryEvery(recs, 1<<30, SemInfermatrix, msNS/4)
	spl, agg := spillSummaryEvery(recs, 64, SemInfermatrix, msNS/4)
	if mem.Timeslices.WidthS <= 0.00025 {
		t.Fatalf("width %v s; want the slices coarsened", mem.Timeslices.WidthS)
	}
	spilled := 0
	for _, sl := range agg.slices.slots {
		if sl.ttft != nil && sl.ttft.Spilled() {
			spilled++
		}
	}
	if spilled == 0 {
		t.Fatal("no timeslice spilled its TTFT at a limit of 4")
	}
	compareSummaries(t, "coarsened", mem, spl)
}

// TestSpilledEdgeCases: one sample, a constant metric and a metric with
// no samples summarise alike with and without spilling.
func TestSpilledEdgeCases(t *testing.T) {
	for _, n := range []int{0, 1, 2, 50} {
		var recs []*Record
		for i := range n {
			recs = append(recs, stream(int64(i)*10, 5, 10, 15)) // a constant TTFT, ITL and TPOT
		}
		opts := func(limit int) Options { return Options{Percentiles: []float64{99.9}, SpillLimit: limit} }
		mem, spl := NewAggregator(opts(1<<30)), NewAggregator(opts(1))
		for _, r := range recs {
			mem.Add(r)
			spl.Add(r)
		}
		compareSummaries(t, "constant", mem.Summary("r", "r", RowComplete), spl.Summary("r", "r", RowComplete))
	}
}

// TestSpilledAcceptanceExpression: an acceptance rule's p(metric, q), for
// a q no summary holds, reads the spilled samples of the live row and
// gives what it gives on the in-memory row.
func TestSpilledAcceptanceExpression(t *testing.T) {
	recs := spillRecords(2000)
	mem, _ := spillSummary(recs, 1<<30, SemInfermatrix)
	spl, _ := spillSummary(recs, 64, SemInfermatrix)
	for _, src := range []string{"p(itl, 37.5)", "p(ttft, 99.95)", "p(e2e, 0.01)"} {
		w, err1 := Value(src, NewRowEnv(&mem))
		g, err2 := Value(src, NewRowEnv(&spl))
		if err1 != nil || err2 != nil || w != g {
			t.Errorf("%s = %v (%v) spilled; want %v (%v)", src, g, err2, w, err1)
		}
	}
}
