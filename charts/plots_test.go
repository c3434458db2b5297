package charts

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image/png"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"gonum.org/v1/plot/plotter"
)

const plotsExperiment = `apiVersion: infermatrix/v1
name: plots
server:
  target: builtin
  hardware: {gpu: H100-SXM, count: 2}
defaults: {requests: 120, warmup: 2, output_tokens: 128}
slo: {ttft_ms: 400, tpot_ms: 30}
rows:
  - id: single_user
    concurrency: 1
    input_tokens: 256
  - id: long_prefill
    input_tokens: {mean: 2048, stddev: 600, min: 256}
    concurrency: 4
  - id: saturation
    input_tokens: 512
    sweep: {concurrency: [1, 4, 16, 64]}
`

// plotRecords simulates a row against a server whose TTFT grows with the
// input length and the load, and whose TPOT grows with the batch: a
// closed loop of `conc` users, one request after another, deterministic
// for a given seed. It adds warmup and failed records the plots must skip.
func plotRecords(id string, conc, n int, inMean, inStd float64, seed uint64) []metrics.Record {
	rng := rand.New(rand.NewPCG(seed, 7))
	free := make([]int64, conc) // when each user is next free, ns
	var out []metrics.Record
	const outTokens = 128
	for i := range n + 2 {
		u := i % conc
		start := free[u]
		in := max(64, int(inMean+inStd*rng.NormFloat64()))
		c := float64(conc)
		ttft := (20 + 0.04*float64(in)*(1+c/24) + 4*c*rng.ExpFloat64()) * 1e6
		tpot := (6.5 + 0.35*c + 0.8*rng.NormFloat64()*math.Sqrt(c)/4) * 1e6
		tpot = math.Max(tpot, 4e6)
		events := make([]int64, outTokens)
		for k := range events {
			events[k] = int64(ttft + float64(k)*tpot)
		}
		last := events[outTokens-1]
		server := outTokens
		r := metrics.Record{
			ID: fmt.Sprintf("%s-%d", id, i), Row: id, Seq: int64(i), Warmup: i < 2, Stream: true,
			ScheduledNS: start, StartNS: start,
			FirstTokenNS: events[0], LastTokenNS: last, EndNS: last + 1e5,
			InputTokens:  metrics.Tokens{Requested: in, Client: in, Server: &in},
			OutputTokens: metrics.Tokens{Requested: outTokens, Client: outTokens, Server: &server},
			Events:       events,
		}
		if i == 7 {
			r.Error = &metrics.Error{Class: metrics.ErrHTTP, Message: "503"}
			r.FirstTokenNS, r.LastTokenNS, r.Events = 0, 0, nil
			r.EndNS = 2e6
		}
		free[u] = start + r.EndNS + 2e6
		out = append(out, r)
	}
	return out
}

// plotInput builds a run: the plan, summaries aggregated from simulated
// records, the records, and an analysis with a knee, an operating point
// and predictions.
func plotInput() *Input {
	plan, err := schema.Parse("plots.yaml", []byte(plotsExperiment), schema.Options{})
	if err != nil {
		panic(err) // the fixture is ours: a test of the plots cannot go on without it
	}
	recs := map[string][]metrics.Record{}
	sum := &metrics.Summary{Format: metrics.SummaryFormat, Experiment: "plots", SLO: plan.SLO, Semantics: metrics.SemInfermatrix}
	for i, r := range plan.Rows {
		inMean, inStd := float64(r.Input.Mean), float64(r.Input.Stddev)
		rr := plotRecords(r.ID, r.Load.Concurrency, r.Requests, inMean, inStd, uint64(i+1))
		recs[r.ID] = rr
		agg := metrics.NewAggregator(metrics.Options{SLO: plan.SLO, Timeslice: 2e9})
		for k := range rr {
			agg.Add(&rr[k])
		}
		sum.Rows = append(sum.Rows, agg.Summary(r.ID, r.Base, metrics.RowComplete))
	}
	an := &analysis.Analysis{Sweeps: []analysis.SweepAnalysis{{
		Base:           "saturation",
		Rows:           []string{"saturation/c=1", "saturation/c=4", "saturation/c=16", "saturation/c=64"},
		OperatingPoint: "saturation/c=4",
		Knee:           "saturation/c=16",
		Why:            "Throughput gains flatten after c=16 (+12% to c=64) while TTFT p95 grows 3.1×; c=4 is the highest-throughput row that passes acceptance.",
	}}}
	regimes := []string{analysis.RegimeOverhead, analysis.RegimePrefill, analysis.RegimeBandwidth, analysis.RegimeBandwidth, analysis.RegimeQueueing, analysis.RegimeQueueing}
	for i, rs := range sum.Rows {
		an.Predictions = append(an.Predictions, analysis.RowPrediction{
			Row: rs.ID, TPOTBoundMS: 6.2 + 0.1*float64(i%2), MeasuredTPOTMS: rs.Metrics.TPOT.P50, Regime: regimes[i],
		})
	}
	return &Input{
		Plan:     plan,
		Summary:  sum,
		Analysis: an,
		Records: func(id string, fn func(*metrics.Record) error) error {
			rr, ok := recs[id]
			if !ok {
				return fmt.Errorf("read records: %w", fs.ErrNotExist)
			}
			for i := range rr {
				if err := fn(&rr[i]); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

var plotNames = []string{
	"latency-throughput-saturation",
	"pareto",
	"cdf-ttft",
	"cdf-tpot",
	"timeslices-single_user",
	"timeslices-long_prefill",
	"timeslices-saturation-c-1",
	"timeslices-saturation-c-4",
	"timeslices-saturation-c-16",
	"timeslices-saturation-c-64",
	"ttft-vs-input",
	"tpot-predicted-vs-measured",
}

func plotNameList(ps []Plot) []string {
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	return names
}

// svgText returns every piece of character data in an SVG, failing the
// test if it is not well-formed XML.
func svgText(t *testing.T, name string, b []byte) string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	var sb strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s.svg: not XML: %v", name, err)
		}
		if cd, ok := tok.(xml.CharData); ok {
			sb.Write(cd)
			sb.WriteByte('\n')
		}
	}
	return sb.String()
}

// renderedPlots renders plotInput once for the tests that only look at
// the result: rendering is slow under the race detector.
var renderedPlots = sync.OnceValues(func() ([]Plot, error) {
	return RenderPlots(plotInput())
})

func TestRenderPlots(t *testing.T) {
	ps, err := renderedPlots()
	if err != nil {
		t.Fatal(err)
	}
	if got := plotNameList(ps); !slices.Equal(got, plotNames) {
		t.Fatalf("RenderPlots names = %q; want %q", got, plotNames)
	}
	wantW, wantH := int(plotWidth.Dots(plotDPI)+0.5), int(plotHeight.Dots(plotDPI)+0.5)
	for _, p := range ps {
		if p.Title == "" {
			t.Errorf("%s: empty title", p.Name)
		}
		img, err := png.Decode(bytes.NewReader(p.PNG))
		if err != nil {
			t.Fatalf("%s.png: %v", p.Name, err)
		}
		if b := img.Bounds(); b.Dx() != wantW || b.Dy() != wantH {
			t.Errorf("%s.png is %d×%d; want %d×%d", p.Name, b.Dx(), b.Dy(), wantW, wantH)
		}
		txt := svgText(t, p.Name, p.SVG)
		if !strings.Contains(txt, p.Title) {
			t.Errorf("%s.svg does not contain its title %q", p.Name, p.Title)
		}
		if bytes.Contains(p.SVG, []byte("font-family:Liberation Sans;")) {
			t.Errorf("%s.svg names its font without fallbacks", p.Name)
		}
	}
	if dir := os.Getenv("INFERMATRIX_PLOT_SAMPLES"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			for ext, b := range map[string][]byte{".png": p.PNG, ".svg": p.SVG} {
				if err := os.WriteFile(filepath.Join(dir, p.Name+ext), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestRenderPlotsContent checks what the charts say, through their SVG
// text: the swept values, the knee and operating point, the SLOs, the GPU
// count and the rows in the legends.
func TestRenderPlotsContent(t *testing.T) {
	ps, err := renderedPlots()
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{}
	for _, p := range ps {
		texts[p.Name] = svgText(t, p.Name, p.SVG)
	}
	for name, wants := range map[string][]string{
		"latency-throughput-saturation": {"c=1", "c=64", "c=16 (knee)", "c=4 (operating point)", "TTFT SLO 400 ms", "TPOT SLO 30 ms", "p95", "p50", "output throughput (tokens/s)", "TTFT (ms)"},
		"pareto":                        {"÷ 2 GPUs", "Pareto frontier", "single_user", "saturation", "c=16"},
		"cdf-ttft":                      {"single_user (n=119)", "saturation/c=64 (n=119)", "requests at or below (%)"},
		"cdf-tpot":                      {"long_prefill (n=119)"},
		"timeslices-saturation-c-16":    {"Over time: saturation/c=16", "TTFT (ms)", "output tokens/s", "Slices of 2 s", "TTFT p95", "TTFT p50", "TTFT SLO 400 ms"},
		"ttft-vs-input":                 {"input tokens", "long_prefill"},
		"tpot-predicted-vs-measured":    {analysis.RegimeBandwidth, analysis.RegimeQueueing, "y = x", "saturation/c=64"},
	} {
		for _, w := range wants {
			if !strings.Contains(texts[name], w) {
				t.Errorf("%s.svg lacks %q", name, w)
			}
		}
	}
}

func TestRenderPlotsDeterministic(t *testing.T) {
	a, err := renderedPlots()
	if err != nil {
		t.Fatal(err)
	}
	b, err := RenderPlots(plotInput())
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Fatalf("%d plots, then %d", len(a), len(b))
	}
	for i := range a {
		if !bytes.Equal(a[i].PNG, b[i].PNG) {
			t.Errorf("%s.png differs between renders", a[i].Name)
		}
		if !bytes.Equal(a[i].SVG, b[i].SVG) {
			t.Errorf("%s.svg differs between renders", a[i].Name)
		}
	}
}

func TestRenderPlotsSkipsWhatHasNoData(t *testing.T) {
	t.Run("nothing", func(t *testing.T) {
		in := plotInput()
		in.Summary, in.Analysis, in.Records = nil, nil, nil
		ps, err := RenderPlots(in)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 0 {
			t.Errorf("RenderPlots with no data = %q; want none", plotNameList(ps))
		}
	})
	t.Run("no records, no predictions", func(t *testing.T) {
		in := plotInput()
		in.Records = nil
		in.Analysis.Predictions = nil
		ps, err := RenderPlots(in)
		if err != nil {
			t.Fatal(err)
		}
		want := append([]string{"latency-throughput-saturation", "pareto"}, plotNames[4:10]...)
		if got := plotNameList(ps); !slices.Equal(got, want) {
			t.Errorf("RenderPlots = %q; want %q", got, want)
		}
	})
	t.Run("rows not run", func(t *testing.T) {
		in := plotInput()
		for i := range in.Summary.Rows {
			if in.Summary.Rows[i].Base == "saturation" || in.Summary.Rows[i].ID == "long_prefill" {
				in.Summary.Rows[i] = metrics.RowSummary{ID: in.Summary.Rows[i].ID, Base: in.Summary.Rows[i].Base, Status: metrics.RowNotRun}
			}
		}
		in.Analysis.Predictions = []analysis.RowPrediction{{Row: "saturation/c=4", TPOTBoundMS: 6}}
		ps, err := RenderPlots(in)
		if err != nil {
			t.Fatal(err)
		}
		// One row left: no sweep, no Pareto, a single input length, no
		// measured TPOT to compare; the rows that did not run have no
		// records read.
		want := []string{"cdf-ttft", "cdf-tpot", "timeslices-single_user"}
		if got := plotNameList(ps); !slices.Equal(got, want) {
			t.Errorf("RenderPlots = %q; want %q", got, want)
		}
	})
	t.Run("missing records file", func(t *testing.T) {
		in := plotInput()
		read := in.Records
		in.Records = func(id string, fn func(*metrics.Record) error) error {
			if id == "single_user" {
				return fmt.Errorf("read records: %w", fs.ErrNotExist)
			}
			return read(id, fn)
		}
		recs, err := readRowRecords(in, plotRowIDs(in))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range recs {
			got = append(got, r.id)
		}
		want := []string{"long_prefill", "saturation/c=1", "saturation/c=4", "saturation/c=16", "saturation/c=64"}
		if !slices.Equal(got, want) {
			t.Errorf("rows read = %q; want %q", got, want)
		}
	})
	t.Run("unreadable records", func(t *testing.T) {
		in := plotInput()
		in.Records = func(string, func(*metrics.Record) error) error { return fmt.Errorf("read records: line 3: bad JSON") }
		if _, err := RenderPlots(in); err == nil || !strings.Contains(err.Error(), "bad JSON") {
			t.Errorf("RenderPlots with unreadable records: err = %v; want the read error", err)
		}
	})
}

func TestPlotNames(t *testing.T) {
	figs := []*figure{{name: "latency-throughput-" + fileSafe("saturation")}, {name: "latency-throughput-" + fileSafe("Saturation")},
		{name: "latency-throughput-" + fileSafe("a b/c=1")}, {name: "latency-throughput-saturation"}, {name: "timeslices-" + fileSafe("é")}}
	uniqueNames(figs)
	var got []string
	for _, f := range figs {
		got = append(got, f.name)
	}
	want := []string{"latency-throughput-saturation", "latency-throughput-Saturation-2", "latency-throughput-a-b-c-1",
		"latency-throughput-saturation-3", "timeslices--"}
	if !slices.Equal(got, want) {
		t.Errorf("names = %q; want %q", got, want)
	}
}

func TestSampler(t *testing.T) {
	for _, n := range []int{0, 1, 99, 100, 101, 1000, 12345} {
		s := newSampler[int](100)
		for i := range n {
			s.add(i)
		}
		if len(s.vals) >= 100 {
			t.Errorf("n=%d: kept %d; want < 100", n, len(s.vals))
		}
		if n > 0 && (len(s.vals) == 0 || s.vals[0] != 0) {
			t.Errorf("n=%d: sample %v does not start at the first value", n, s.vals[:min(3, len(s.vals))])
		}
		for i, v := range s.vals {
			if v != i*s.stride {
				t.Fatalf("n=%d: vals[%d] = %d; want %d (stride %d)", n, i, v, i*s.stride, s.stride)
			}
		}
		if n < 100 && len(s.vals) != n {
			t.Errorf("n=%d: kept %d; want all", n, len(s.vals))
		}
		if n >= 100 && len(s.vals) < 50 {
			t.Errorf("n=%d: kept %d; want at least half the capacity", n, len(s.vals))
		}
	}
}

func TestECDF(t *testing.T) {
	xys, exact := ecdf([]float64{3, 1, 2, math.NaN()})
	want := plotter.XYs{{X: 1, Y: 0}, {X: 1, Y: 100.0 / 3}, {X: 2, Y: 200.0 / 3}, {X: 3, Y: 100}}
	if !exact || !slices.Equal(xys, want) {
		t.Errorf("ecdf(3, 1, 2, NaN) = %v, %v; want %v, true", xys, exact, want)
	}
	big := make([]float64, 50000)
	for i := range big {
		big[i] = float64(len(big) - i)
	}
	xys, exact = ecdf(big)
	if exact || len(xys) > cdfPoints {
		t.Errorf("ecdf of 50000 values: %d points, exact %v; want at most %d, not exact", len(xys), exact, cdfPoints)
	}
	if first, last := xys[0], xys[len(xys)-1]; first.X != 1 || last.X != 50000 || last.Y != 100 {
		t.Errorf("ecdf of 1..50000 runs from %v to %v; want (1, …) to (50000, 100)", first, last)
	}
}

func TestParetoFrontier(t *testing.T) {
	xys := plotter.XYs{{X: 1, Y: 10}, {X: 2, Y: 8}, {X: 2, Y: 9}, {X: 3, Y: 5}, {X: 1.5, Y: 7}, {X: 4, Y: 1}}
	got := paretoFrontier(xys)
	want := []int{0, 2, 3, 5}
	if !slices.Equal(got, want) {
		t.Errorf("paretoFrontier = %v; want %v", got, want)
	}
}

func TestPickEvenly(t *testing.T) {
	for _, c := range []struct {
		total, n int
		want     []int
	}{
		{3, 10, []int{0, 1, 2}},
		{12, 4, []int{0, 4, 7, 11}},
		{11, 3, []int{0, 5, 10}},
	} {
		if got := pickEvenly(c.total, c.n); !slices.Equal(got, c.want) {
			t.Errorf("pickEvenly(%d, %d) = %v; want %v", c.total, c.n, got, c.want)
		}
	}
}

func TestFormatTick(t *testing.T) {
	for _, c := range []struct {
		v, step float64
		kilo    bool
		want    string
	}{
		{0, 50, false, "0"},
		{150, 50, false, "150"},
		{0.25, 0.25, false, "0.25"},
		{1.5, 0.5, false, "1.5"},
		{12000, 2000, true, "12k"},
		{5000, 5000, true, "5k"},
		{12500, 2500, true, "12.5k"},
		{20, 5, false, "20"},
	} {
		if got := formatTick(c.v, c.step, c.kilo); got != c.want {
			t.Errorf("formatTick(%g, %g, %v) = %q; want %q", c.v, c.step, c.kilo, got, c.want)
		}
	}
}

func BenchmarkRenderPlots(b *testing.B) {
	in := plotInput()
	for b.Loop() {
		if _, err := RenderPlots(in); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRenderPlotsManyLargeRows renders a 14-row sweep of 6,000 requests
// a row: the charts with a line per row show ten and say so, the CDFs and
// the scatter are thinned, and no SVG grows past a size a browser opens
// at once.
func TestRenderPlotsManyLargeRows(t *testing.T) {
	var conc []string
	for c := 1; c <= 14; c++ {
		conc = append(conc, strconv.Itoa(c*c))
	}
	src := `apiVersion: infermatrix/v1
name: big
server: {target: builtin}
defaults: {requests: 6000, input_tokens: {mean: 1024, stddev: 300, min: 64}, output_tokens: 128}
slo: {ttft_ms: 5000, tpot_ms: 20}
rows:
  - id: ramp
    sweep: {concurrency: [` + strings.Join(conc, ", ") + `]}
`
	plan, err := schema.Parse("big.yaml", []byte(src), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gen := func(i int, fn func(*metrics.Record) error) error {
		r := plan.Rows[i]
		for _, rec := range plotRecords(r.ID, r.Load.Concurrency, r.Requests, 1024, 300, uint64(100+i)) {
			rec.Events = nil
			if err := fn(&rec); err != nil {
				return err
			}
		}
		return nil
	}
	sum := &metrics.Summary{Format: metrics.SummaryFormat, Experiment: "big", SLO: plan.SLO}
	sw := analysis.SweepAnalysis{Base: "ramp"}
	for i, r := range plan.Rows {
		agg := metrics.NewAggregator(metrics.Options{SLO: plan.SLO})
		_ = gen(i, func(rec *metrics.Record) error { agg.Add(rec); return nil })
		rs := agg.Summary(r.ID, r.Base, metrics.RowComplete)
		rs.Timeslices = metrics.Timeslices{} // fourteen charts not under test here
		sum.Rows = append(sum.Rows, rs)
		sw.Rows = append(sw.Rows, r.ID)
	}
	in := &Input{Plan: plan, Summary: sum, Analysis: &analysis.Analysis{Sweeps: []analysis.SweepAnalysis{sw}},
		Records: func(id string, fn func(*metrics.Record) error) error {
			for i, r := range plan.Rows {
				if r.ID == id {
					return gen(i, fn)
				}
			}
			return fs.ErrNotExist
		}}
	ps, err := RenderPlots(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"latency-throughput-ramp", "pareto", "cdf-ttft", "cdf-tpot", "ttft-vs-input"}
	if got := plotNameList(ps); !slices.Equal(got, want) {
		t.Fatalf("RenderPlots = %q; want %q", got, want)
	}
	for _, p := range ps {
		if len(p.SVG) > 1<<20 {
			t.Errorf("%s.svg is %d bytes; want at most 1 MiB", p.Name, len(p.SVG))
		}
		txt := svgText(t, p.Name, p.SVG)
		switch p.Name {
		case "cdf-ttft", "cdf-tpot", "ttft-vs-input":
			if !strings.Contains(txt, "Showing 10 of 14 rows") {
				t.Errorf("%s.svg does not say it shows 10 of the 14 rows", p.Name)
			}
		}
		if p.Name == "cdf-ttft" && !strings.Contains(txt, "ramp/c=196 (n=5999)") {
			t.Errorf("cdf-ttft.svg does not show the last row with its full count")
		}
	}
	if dir := os.Getenv("INFERMATRIX_PLOT_SAMPLES"); dir != "" {
		for _, p := range ps {
			if err := os.WriteFile(filepath.Join(dir, "big-"+p.Name+".png"), p.PNG, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestLatencyThroughputSLOFarAbove checks that an SLO far above the data
// is named rather than drawn, which would flatten the curve against the
// axis, and that a sweep without TTFT (not streamed) keeps its TPOT panel.
func TestLatencyThroughputSLOFarAbove(t *testing.T) {
	in := plotInput()
	in.Records = nil
	in.Analysis.Predictions = nil
	in.Plan.SLO.TTFTms = 100000
	for i := range in.Summary.Rows {
		if in.Summary.Rows[i].Base == "saturation" {
			in.Summary.Rows[i].Metrics.TPOT = metrics.Dist{}
		}
	}
	ps, err := RenderPlots(in)
	if err != nil {
		t.Fatal(err)
	}
	if ps[0].Name != "latency-throughput-saturation" {
		t.Fatalf("first plot is %s; want the sweep's", ps[0].Name)
	}
	txt := svgText(t, ps[0].Name, ps[0].SVG)
	for _, w := range []string{"TTFT SLO 100000 ms: far above", "Time to first token"} {
		if !strings.Contains(txt, w) {
			t.Errorf("%s.svg lacks %q", ps[0].Name, w)
		}
	}
	if strings.Contains(txt, "Time per output token") {
		t.Errorf("%s.svg has a TPOT panel without TPOT data", ps[0].Name)
	}
	if dir := os.Getenv("INFERMATRIX_PLOT_SAMPLES"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "far-slo-"+ps[0].Name+".png"), ps[0].PNG, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
