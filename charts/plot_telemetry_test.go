package charts

import (
	"bytes"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/validity"
	"github.com/infermatrix/infermatrix/verdict"
)

func ptr(v float64) *float64 { return &v }

// addTelemetry gives a row scrapes every 0.25 s from its start to two
// seconds past its window, phased as the runner would (warmup before the
// window, load until the last measured dispatch, drain after, between
// at the end), with the gauges following the load; and the window
// figures the sweep chart reads. with picks the gauges reported.
func addTelemetry(rs *metrics.RowSummary, conc float64, with map[string]bool) {
	sl := rs.Timeslices.Slices
	first, last := sl[0].StartS, sl[len(sl)-1].EndS
	loadEnd := last - 0.4*(last-first)/float64(len(sl))
	rs.Telemetry = nil
	for k := 0; ; k++ {
		t := 0.25 * float64(k)
		if t > last+2 {
			break
		}
		if k == 9 { // a failed scrape: no point
			continue
		}
		p := metrics.TelemetryPoint{TS: t}
		switch {
		case t < first:
			p.Phase = metrics.PhaseWarmup
		case t < loadEnd:
			p.Phase = metrics.PhaseLoad
		case t < last+1:
			p.Phase = metrics.PhaseDrain
		default:
			p.Phase = metrics.PhaseBetween
		}
		busy := 0.0
		if t >= 0.1 && t < last {
			busy = 1
		}
		run := math.Min(conc, 24) * busy
		wait := math.Max(0, conc-24) * busy * (0.8 + 0.2*math.Sin(t))
		if with["running"] {
			p.Running = ptr(run)
		}
		if with["waiting"] {
			p.Waiting = ptr(math.Round(wait))
		}
		if with["kv"] {
			p.KVCacheUsage = ptr(math.Min(0.97, 0.05+0.03*run+0.002*wait) * busy)
		}
		if with["gpu"] {
			p.GPUUtilization = ptr(math.Min(1, 0.15+0.05*run) * busy)
			p.PowerW = ptr(2 * (90 + 500*math.Min(1, 0.15+0.05*run)*busy))
		}
		rs.Telemetry = append(rs.Telemetry, p)
	}
	srv := &metrics.ServerTelemetry{Mapping: "vllm", IntervalS: 0.25, Scrapes: len(rs.Telemetry)}
	if with["kv"] {
		kv := math.Min(0.97, 0.05+0.03*math.Min(conc, 24)+0.002*math.Max(0, conc-24))
		srv.KVCacheUsage = &metrics.Gauge{Mean: kv * 0.9, Min: 0, Max: kv, Samples: 40}
	}
	if with["waiting"] {
		w := math.Max(0, conc-24)
		srv.NumRequestsWaiting = &metrics.Gauge{Mean: w * 0.8, Max: w, Samples: 40}
	}
	if with["running"] {
		srv.NumRequestsRunning = &metrics.Gauge{Mean: math.Min(conc, 24) * 0.95, Max: math.Min(conc, 24), Samples: 40}
	}
	rs.Server = srv
}

var allGauges = map[string]bool{"running": true, "waiting": true, "kv": true, "gpu": true}

// telemetryInput is plotInput with telemetry: every gauge on the sweep's
// rows, the server's alone on single_user (whose timeslices are dropped:
// its chart is the gauges alone), none on long_prefill.
func telemetryInput() *Input {
	in := plotInput()
	conc := map[string]float64{"saturation/c=1": 1, "saturation/c=4": 4, "saturation/c=16": 16, "saturation/c=64": 64}
	for i := range in.Summary.Rows {
		rs := &in.Summary.Rows[i]
		switch {
		case rs.Base == "saturation":
			addTelemetry(rs, conc[rs.ID], allGauges)
		case rs.ID == "single_user":
			addTelemetry(rs, 1, map[string]bool{"running": true, "waiting": true})
			rs.Timeslices = metrics.Timeslices{}
		}
	}
	return in
}

// TestTelemetryPlots lays out the whole set, then renders the charts
// telemetry changes: rendering all of them is slow under the race
// detector, and TestRenderPlots does that already.
func TestTelemetryPlots(t *testing.T) {
	figs, err := plotFigures(telemetryInput())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"latency-throughput-saturation", "server-load-saturation", "pareto", "cdf-ttft", "cdf-tpot",
		"timeslices-single_user", "timeslices-long_prefill", "timeslices-saturation-c-1", "timeslices-saturation-c-4",
		"timeslices-saturation-c-16", "timeslices-saturation-c-64", "ttft-vs-input", "tpot-predicted-vs-measured"}
	var got []string
	var ps []Plot
	for _, f := range figs {
		got = append(got, f.name)
		switch f.name {
		case "server-load-saturation", "timeslices-single_user", "timeslices-long_prefill", "timeslices-saturation-c-16":
			p, err := f.render()
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("RenderPlots names = %q; want %q", got, want)
	}
	byName := map[string]Plot{}
	for _, p := range ps {
		byName[p.Name] = p
	}
	texts := map[string]string{}
	for _, p := range ps {
		texts[p.Name] = svgText(t, p.Name, p.SVG)
		if !strings.Contains(texts[p.Name], p.Title) {
			t.Errorf("%s.svg does not contain its title %q", p.Name, p.Title)
		}
	}
	for name, wants := range map[string][]string{
		"timeslices-saturation-c-16": {"TTFT p95", "output tokens/s", "running (server)", "waiting (server)", "in flight (client)",
			"KV cache usage", "GPU utilization", "GPU power, all GPUs", "warmup", "drain: requests finishing", "measured window",
			"time since the row began (s)", "every 0.25 s"},
		"timeslices-single_user": {"running (server)", "waiting (server)", "in flight (client)", "time since the row began (s)"},
		"server-load-saturation": {"concurrency (users)", "KV cache, mean", "KV cache, max", "waiting, mean", "waiting, max", "running, mean", "64"},
	} {
		for _, w := range wants {
			if !strings.Contains(texts[name], w) {
				t.Errorf("%s.svg lacks %q", name, w)
			}
		}
	}
	for _, w := range []string{"TTFT p95", "KV cache usage", "GPU power"} {
		if strings.Contains(texts["timeslices-single_user"], w) {
			t.Errorf("timeslices-single_user.svg has %q, which the row lacks", w)
		}
	}
	for _, w := range []string{"running (server)", "warmup", "row began"} {
		if strings.Contains(texts["timeslices-long_prefill"], w) {
			t.Errorf("timeslices-long_prefill.svg, a row without telemetry, has %q", w)
		}
	}
	// Five panels make a taller chart, as wide as every other.
	img, err := png.Decode(bytes.NewReader(byName["timeslices-saturation-c-16"].PNG))
	if err != nil {
		t.Fatal(err)
	}
	wantW, wantH := int(plotWidth.Dots(plotDPI)+0.5), int((plotHeight+3*telemetryPanelHeight).Dots(plotDPI)+0.5)
	if b := img.Bounds(); b.Dx() != wantW || b.Dy() != wantH {
		t.Errorf("timeslices-saturation-c-16.png is %d×%d; want %d×%d", b.Dx(), b.Dy(), wantW, wantH)
	}
	if dir := os.Getenv("INFERMATRIX_PLOT_SAMPLES"); dir != "" {
		for _, p := range ps {
			if err := os.WriteFile(filepath.Join(dir, "tel-"+p.Name+".png"), p.PNG, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestTelemetryPlotPanels counts the panels of a row's chart: one for
// each kind of figure it has, none for what it lacks.
func TestTelemetryPlotPanels(t *testing.T) {
	base := plotInput().Summary.Row("saturation/c=16")
	for _, c := range []struct {
		name   string
		with   map[string]bool
		slices bool
		panels int
	}{
		{"everything", allGauges, true, 5},
		{"server only", map[string]bool{"running": true, "waiting": true, "kv": true}, true, 4},
		{"gpu only, no slices", map[string]bool{"gpu": true}, false, 2},
		{"kv only, no slices", map[string]bool{"kv": true}, false, 1},
		{"no gauges", map[string]bool{}, true, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			rs := *base
			addTelemetry(&rs, 16, c.with)
			if !c.slices {
				rs.Timeslices = metrics.Timeslices{}
			}
			f := timesliceFigure(&rs, 400, nil, false)
			if f == nil {
				t.Fatal("no chart")
			}
			if len(f.panels) != c.panels {
				t.Errorf("%d panels; want %d", len(f.panels), c.panels)
			}
			if f.name != "timeslices-saturation-c-16" {
				t.Errorf("name %q", f.name)
			}
		})
	}
	t.Run("neither slices nor gauges", func(t *testing.T) {
		rs := *base
		addTelemetry(&rs, 16, map[string]bool{})
		rs.Timeslices = metrics.Timeslices{}
		if f := timesliceFigure(&rs, 400, nil, false); f != nil {
			t.Errorf("chart %q with %d panels; want none", f.name, len(f.panels))
		}
	})
}

func TestServerLoadFigure(t *testing.T) {
	t.Run("rows without server telemetry", func(t *testing.T) {
		in := plotInput()
		if f := serverLoadFigure(in, &in.Analysis.Sweeps[0]); f != nil {
			t.Errorf("chart %q for a sweep without telemetry", f.name)
		}
		// One row with figures: no line against load.
		addTelemetry(in.Summary.Row("saturation/c=4"), 4, allGauges)
		if f := serverLoadFigure(in, &in.Analysis.Sweeps[0]); f != nil {
			t.Errorf("chart %q for one row with telemetry", f.name)
		}
	})
	t.Run("only the rows with the figures", func(t *testing.T) {
		in := telemetryInput()
		in.Summary.Row("saturation/c=4").Server = nil
		// c=1 has the KV cache only.
		in.Summary.Row("saturation/c=1").Server.NumRequestsWaiting = nil
		in.Summary.Row("saturation/c=1").Server.NumRequestsRunning = nil
		_, pts := serverLoadPoints(in, &in.Analysis.Sweeps[0])
		var got [][]string
		for _, lp := range serverLoadPanels(pts) {
			var lines []string
			for _, l := range lp.lines {
				var xs []string
				for _, xy := range l.xys {
					xs = append(xs, fmtNum(xy.X))
				}
				lines = append(lines, l.label+": "+strings.Join(xs, " "))
			}
			got = append(got, lines)
		}
		want := [][]string{
			{"KV cache, mean: 1 16 64", "KV cache, max: 1 16 64"},
			{"waiting, mean: 16 64", "waiting, max: 16 64", "running, mean: 16 64"},
		}
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("lines = %q; want %q", got, want)
		}
		if f := serverLoadFigure(in, &in.Analysis.Sweeps[0]); f == nil || len(f.panels) != 2 {
			t.Errorf("chart %v; want one of two panels", f)
		}
	})
	t.Run("invalid row labelled", func(t *testing.T) {
		in := telemetryInput()
		in.Decision = &verdict.Decision{}
		for _, rs := range in.Summary.Rows {
			in.Decision.Rows = append(in.Decision.Rows, verdict.RowVerdict{ID: rs.ID, Validity: validity.Verdict{Valid: rs.ID != "saturation/c=64"}})
		}
		f := serverLoadFigure(in, &in.Analysis.Sweeps[0])
		if f == nil {
			t.Fatal("no chart")
		}
		p, err := f.render()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(svgText(t, p.Name, p.SVG), "invalid") {
			t.Error("the invalid row is not labelled")
		}
	})
	t.Run("rate sweep", func(t *testing.T) {
		in := telemetryInput()
		for i := range in.Plan.Rows {
			if r := &in.Plan.Rows[i]; r.Base == "saturation" {
				r.Load.Mode, r.Load.Rate = "rate", float64(r.Load.Concurrency)/2
			}
		}
		f := serverLoadFigure(in, &in.Analysis.Sweeps[0])
		if f == nil || f.panels[0].X.Label.Text != "request rate (requests/s)" {
			t.Errorf("rate sweep: chart %v; want one against the request rate", f)
		}
	})
}

// TestTelemetryPlotsDeterministic renders the telemetry charts twice,
// each from fresh input: the same bytes. (The whole set is rendered
// twice by TestRenderPlotsDeterministic; these alone keep it quick.)
func TestTelemetryPlotsDeterministic(t *testing.T) {
	render := func() []Plot {
		in := telemetryInput()
		recs, err := readRowRecords(in, []string{"saturation/c=16"})
		if err != nil {
			t.Fatal(err)
		}
		figs := []*figure{serverLoadFigure(in, &in.Analysis.Sweeps[0])}
		figs = append(figs, timesliceFigure(in.Summary.Row("saturation/c=16"), in.Plan.SLO.TTFTms, recs[0], false))
		var ps []Plot
		for _, f := range figs {
			if f == nil {
				t.Fatal("a chart is missing")
			}
			p, err := f.render()
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		return ps
	}
	a, b := render(), render()
	for i := range a {
		if !bytes.Equal(a[i].PNG, b[i].PNG) || !bytes.Equal(a[i].SVG, b[i].SVG) {
			t.Errorf("%s differs between renders", a[i].Name)
		}
	}
}

// TestScrapeInFlight counts requests in flight at each scrape: a request
// is in flight from its start up to, not including, its end.
func TestScrapeInFlight(t *testing.T) {
	pts := []metrics.TelemetryPoint{{TS: 2}, {TS: 0}, {TS: math.NaN()}, {TS: 1}, {TS: 3}}
	f := newScrapeInFlight(pts)
	s := int64(1e9)
	f.add(0, 2*s)     // at 0 and 1
	f.add(1*s, 1*s+1) // at 1
	f.add(s/2, 3*s)   // at 1 and 2
	f.add(3*s+1, 4*s) // at none
	f.add(-s, s/2)    // at 0
	got := f.counts()
	want := []float64{1, 2, math.NaN(), 3, 0}
	for i := range want {
		if !(got[i] == want[i] || math.IsNaN(got[i]) && math.IsNaN(want[i])) {
			t.Fatalf("counts = %v; want %v", got, want)
		}
	}
}

// TestRowTelemetrySeries checks how scrapes become lines: a gap in the
// scrapes or a missing figure breaks the line, and a long row is
// averaged down to maxTelemetryPoints.
func TestRowTelemetrySeries(t *testing.T) {
	var rs metrics.RowSummary
	for k := range 20 {
		ts := float64(k)
		if k >= 10 {
			ts += 10 // ten seconds without a scrape
		}
		p := metrics.TelemetryPoint{TS: ts, Phase: metrics.PhaseLoad, Running: ptr(float64(k))}
		if k == 4 {
			p.Running = nil
		}
		rs.Telemetry = append(rs.Telemetry, p)
	}
	tel := newRowTelemetry(&rs, nil)
	if tel == nil {
		t.Fatal("no telemetry")
	}
	s := tel.panels()[0].series[0]
	var lens []int
	for _, r := range s.runs {
		lens = append(lens, len(r))
	}
	if !slices.Equal(lens, []int{4, 5, 10}) {
		t.Errorf("runs of %v points; want [4 5 10]", lens)
	}

	rs.Telemetry = nil
	for k := range 2500 {
		rs.Telemetry = append(rs.Telemetry, metrics.TelemetryPoint{TS: float64(k), Phase: metrics.PhaseLoad, Running: ptr(float64(k % 3))})
	}
	tel = newRowTelemetry(&rs, nil)
	s = tel.panels()[0].series[0]
	if tel.perDot != 3 || s.n > maxTelemetryPoints || len(s.runs) != 1 {
		t.Errorf("2500 scrapes: %d per point, %d points in %d runs; want 3 per point, at most %d, one run", tel.perDot, s.n, len(s.runs), maxTelemetryPoints)
	}
	if y := s.runs[0][0].Y; y != 1 {
		t.Errorf("first point %v; want the mean of 0, 1, 2", y)
	}
}
