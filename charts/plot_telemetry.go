package charts

import (
	"image/color"
	"math"
	"sort"
	"strconv"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The charts of what the server and its GPUs said (package telemetry
// scrapes them): per row, its gauges over time under the client's
// timeslices, so a TTFT spike can be read against the queue and the KV
// cache at that moment; per sweep, the gauges against the load, so the
// load at which the cache fills or a queue forms can be read off.

const (
	// minTelemetryPoints is the fewest scrapes with a value that make a
	// series worth a line: one is a dot, not a course over time.
	minTelemetryPoints = 2
	// maxTelemetryPoints bounds the points of a series: beyond, runs of
	// consecutive scrapes are averaged into one, which at 960 px loses
	// nothing a reader could see and keeps the SVG small.
	maxTelemetryPoints = 1000
	// telemetryGap is how many times the usual spacing between scrapes a
	// gap must exceed for the lines to break there: failed scrapes leave
	// no point, and a line across them would claim values nobody read.
	telemetryGap = 3.0
	// telemetryPanelHeight is what each panel beyond the first two adds
	// to the chart's height, so that a panel of five stays readable.
	telemetryPanelHeight = vg.Length(1.35) * vg.Inch
)

// phaseBands are the shades of the phases outside the measured load, in
// legend order; scrapes while measured requests are dispatched are left
// white.
var phaseBands = []struct {
	phase, label string
	color        color.Color
}{
	{metrics.PhasePrime, "prime: warm prefixes", color.NRGBA{R: 0xB0, G: 0x7A, B: 0xA1, A: 0x30}},
	{metrics.PhaseWarmup, "warmup", color.NRGBA{R: 0xF2, G: 0xB0, B: 0x2B, A: 0x38}},
	{metrics.PhaseDrain, "drain: requests finishing", color.NRGBA{R: 0x4E, G: 0x79, B: 0xA7, A: 0x26}},
	{metrics.PhaseBetween, "no request of the row", color.NRGBA{R: 0x79, G: 0x70, B: 0x6E, A: 0x26}},
}

// windowEdgeStyle marks the measured window's first dispatch and last end.
var windowEdgeStyle = lineStyle(rgb(0x444444), 1, 4, 3)

// rowTelemetry is a row's scrapes made ready to draw: in time order, with
// the client's in-flight count at each where the records gave it.
type rowTelemetry struct {
	pts      []metrics.TelemetryPoint // finite times, ascending
	inFlight []float64                // as pts; nil when unknown
	// groups are the runs of consecutive scrapes drawn as one point: one
	// scrape each unless the row has more than maxTelemetryPoints.
	groups  []scrapeGroup
	perDot  int     // scrapes per group at most
	spacing float64 // the median time between scrapes, s
	window  struct {
		first, last float64
		ok          bool
	}
}

// scrapeGroup is pts[a:b], drawn as one point; breakBefore says a gap
// in the scrapes precedes it.
type scrapeGroup struct {
	a, b        int
	breakBefore bool
}

// newRowTelemetry returns nil when the row has no telemetry series worth
// a line.
func newRowTelemetry(rs *metrics.RowSummary, rec *rowRecords) *rowTelemetry {
	if len(rs.Telemetry) == 0 {
		return nil
	}
	var order []int
	for i, p := range rs.Telemetry {
		if isFinite(p.TS) {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return rs.Telemetry[order[a]].TS < rs.Telemetry[order[b]].TS })
	t := &rowTelemetry{}
	for _, i := range order {
		t.pts = append(t.pts, rs.Telemetry[i])
	}
	if rec != nil && len(rec.inFlight) == len(rs.Telemetry) {
		for _, i := range order {
			t.inFlight = append(t.inFlight, rec.inFlight[i])
		}
	}
	if sl := rs.Timeslices.Slices; len(sl) > 0 && isFinite(sl[0].StartS, sl[len(sl)-1].EndS) {
		t.window.first, t.window.last, t.window.ok = sl[0].StartS, sl[len(sl)-1].EndS, true
	} else if rec != nil && rec.window.ok && len(rs.Trials) == 0 {
		// A repeated row's records are several trials', each on its
		// own clock: their span is no window.
		t.window = rec.window
	}
	var gaps []float64
	for i := 1; i < len(t.pts); i++ {
		gaps = append(gaps, t.pts[i].TS-t.pts[i-1].TS)
	}
	if len(gaps) > 0 {
		sort.Float64s(gaps)
		t.spacing = gaps[len(gaps)/2]
	}
	t.perDot = max(1, (len(t.pts)+maxTelemetryPoints-1)/maxTelemetryPoints)
	for i := 0; i < len(t.pts); {
		g := scrapeGroup{a: i, b: i + 1, breakBefore: t.gapBefore(i)}
		for g.b < len(t.pts) && g.b-g.a < t.perDot && !t.gapBefore(g.b) {
			g.b++
		}
		t.groups = append(t.groups, g)
		i = g.b
	}
	for _, p := range t.panels() {
		for _, s := range p.series {
			if s.n >= minTelemetryPoints {
				return t
			}
		}
	}
	return nil
}

func (t *rowTelemetry) gapBefore(i int) bool {
	return i > 0 && t.spacing > 0 && t.pts[i].TS-t.pts[i-1].TS > telemetryGap*t.spacing
}

// gaugeSeries is one gauge over time, in runs the gaps break.
type gaugeSeries struct {
	label  string
	color  color.Color
	dashed bool
	runs   []plotter.XYs
	n      int // points in all runs
}

// series averages get over each group of scrapes that has it; a group
// without it, or a gap, ends a run.
func (t *rowTelemetry) series(label string, c color.Color, dashed bool, get func(i int) (float64, bool)) *gaugeSeries {
	s := &gaugeSeries{label: label, color: c, dashed: dashed}
	var run plotter.XYs
	flush := func() {
		if len(run) > 0 {
			s.runs = append(s.runs, run)
		}
		run = nil
	}
	for _, g := range t.groups {
		if g.breakBefore {
			flush()
		}
		var sx, sy float64
		n := 0
		for i := g.a; i < g.b; i++ {
			if v, ok := get(i); ok && isFinite(v) {
				sx, sy, n = sx+t.pts[i].TS, sy+v, n+1
			}
		}
		if n == 0 {
			flush()
			continue
		}
		run = append(run, plotter.XY{X: sx / float64(n), Y: sy / float64(n)})
		s.n++
	}
	flush()
	return s
}

// gaugePanel is one panel's worth of series, with its axis.
type gaugePanel struct {
	yLabel string
	// percent fixes the axis at 0–100.
	percent bool
	series  []*gaugeSeries
}

// gauge reads an optional figure, times scale.
func gauge(v *float64, scale float64) (float64, bool) {
	if v == nil {
		return 0, false
	}
	return *v * scale, true
}

// panels are the telemetry panels in drawing order: requests, then the
// two fractions (the KV cache and the GPUs' busy time share 0–100 %),
// then power in its own unit. Series without a point stay in; drawing
// leaves them out.
func (t *rowTelemetry) panels() []gaugePanel {
	reqs := []*gaugeSeries{
		t.series("running (server)", seriesPalette[6], false, func(i int) (float64, bool) { return gauge(t.pts[i].Running, 1) }),
		t.series("waiting (server)", seriesPalette[2], false, func(i int) (float64, bool) { return gauge(t.pts[i].Waiting, 1) }),
	}
	if t.inFlight != nil {
		reqs = append(reqs, t.series("in flight (client)", rgb(0x555555), true, func(i int) (float64, bool) { return t.inFlight[i], true }))
	}
	return []gaugePanel{
		{yLabel: "requests", series: reqs},
		{yLabel: "KV cache, GPU busy (%)", percent: true, series: []*gaugeSeries{
			t.series("KV cache usage", seriesPalette[1], false, func(i int) (float64, bool) { return gauge(t.pts[i].KVCacheUsage, 100) }),
			t.series("GPU utilization", rgb(0x2F8F83), false, func(i int) (float64, bool) { return gauge(t.pts[i].GPUUtilization, 100) }),
		}},
		{yLabel: "GPU power (W)", series: []*gaugeSeries{
			t.series("GPU power, all GPUs", seriesPalette[8], false, func(i int) (float64, bool) { return gauge(t.pts[i].PowerW, 1) }),
		}},
	}
}

// decor is what every panel of the row's chart draws under its data: a
// band per phase outside the measured load, and the measured window's
// edges. The legend gets an entry for each kind drawn; shaded says
// whether any band was.
func (t *rowTelemetry) decor() (out []plot.Plotter, legend []legendItem, shaded bool) {
	seen := map[string]bool{}
	for i := 0; i < len(t.pts); {
		j := i + 1
		for j < len(t.pts) && t.pts[j].Phase == t.pts[i].Phase {
			j++
		}
		// A phase spans from halfway after the scrape before it to
		// halfway before the scrape after it; the outer ends reach half
		// a spacing beyond the first and last scrapes.
		x0, x1 := t.pts[i].TS-t.spacing/2, t.pts[j-1].TS+t.spacing/2
		if i > 0 {
			x0 = (t.pts[i-1].TS + t.pts[i].TS) / 2
		}
		if j < len(t.pts) {
			x1 = (t.pts[j-1].TS + t.pts[j].TS) / 2
		}
		for _, b := range phaseBands {
			if b.phase == t.pts[i].Phase {
				out = append(out, &xBand{x0: x0, x1: x1, color: b.color})
				seen[b.phase] = true
			}
		}
		i = j
	}
	for _, b := range phaseBands {
		if seen[b.phase] {
			legend = append(legend, legendItem{b.label, []plot.Thumbnailer{swatch{b.color}}})
			shaded = true
		}
	}
	if t.window.ok {
		out = append(out, &vline{x: t.window.first, style: windowEdgeStyle}, &vline{x: t.window.last, style: windowEdgeStyle})
		legend = append(legend, legendItem{"measured window", []plot.Thumbnailer{&vline{style: windowEdgeStyle}}})
	}
	return out, legend, shaded
}

// xRange is the span the scrapes and the window cover, from the row's
// start at the latest.
func (t *rowTelemetry) xRange() (float64, float64) {
	lo, hi := 0.0, math.Inf(-1)
	if len(t.pts) > 0 {
		lo, hi = math.Min(lo, t.pts[0].TS), t.pts[len(t.pts)-1].TS
	}
	if t.window.ok {
		lo, hi = math.Min(lo, t.window.first), math.Max(hi, t.window.last)
	}
	return lo, hi
}

// telemetryFigure draws a row on its own clock, seconds from its start:
// the client's timeslices (when the row has enough) above the server's
// and the GPUs' gauges, every panel on one time axis, shaded where the
// scrapes fell outside the measured load. The client's panels keep to
// the measured window, which is all the timeslices cover; the gauges
// show the warmup before it and the drain after, so that what the
// window began with (a full cache, a queue left by the warmup) is seen.
func telemetryFigure(rs *metrics.RowSummary, slo float64, t *rowTelemetry, pooled bool) *figure {
	decor, phaseLegend, shaded := t.decor()
	var panels []*plot.Plot
	var legend []legendItem
	lo, hi := t.xRange()
	subtitle := "The server's and the GPUs' gauges at each scrape"
	if rs.Server != nil && rs.Server.IntervalS > 0 {
		subtitle += " (every " + fmtNum(rs.Server.IntervalS) + " s)"
	}
	subtitle += ", on the row's clock."
	if len(rs.Timeslices.Slices) >= minTimeslices {
		ps, lg, x0, x1 := slicePanels(rs, slo, 0, decor, pooled)
		if len(ps) > 0 {
			panels, legend = ps, lg
			lo, hi = math.Min(lo, x0), math.Max(hi, x1)
			subtitle = "Above, the client's slices of " + fmtNum(rs.Timeslices.WidthS) +
				" s: TTFT by first token, output tokens by arrival. Below, the server's and the GPUs' gauges at each scrape"
			if pooled {
				subtitle = "Above, the client's slices of " + fmtNum(rs.Timeslices.WidthS) +
					" s: requests by when they ended (an embeddings or rerank row has no TTFT or output tokens). Below, the server's and the GPUs' gauges at each scrape"
			}
			if rs.Server != nil && rs.Server.IntervalS > 0 {
				subtitle += " (every " + fmtNum(rs.Server.IntervalS) + " s)"
			}
			subtitle += "."
		}
	}
	for _, gp := range t.panels() {
		var drawn []*gaugeSeries
		for _, s := range gp.series {
			if s.n >= minTelemetryPoints {
				drawn = append(drawn, s)
			}
		}
		if len(drawn) == 0 {
			continue
		}
		p := newPanel("", "", gp.yLabel)
		p.Add(decor...)
		p.Y.Min = 0
		if gp.percent {
			p.Y.Max = 100
			p.Y.Tick.Marker = plot.ConstantTicks{{Value: 0, Label: "0"}, {Value: 25, Label: "25"}, {Value: 50, Label: "50"},
				{Value: 75, Label: "75"}, {Value: 100, Label: "100"}}
		}
		for _, s := range drawn {
			var thumb *plotter.Line
			for _, run := range s.runs {
				l, g := seriesLine(run, s.color, draw.CircleGlyph{}, s.dashed)
				if s.n > 200 {
					l.Width = min(l.Width, 1.1)
				}
				p.Add(l)
				if s.n <= 40 || len(run) == 1 {
					p.Add(g)
				}
				thumb = l
			}
			legend = append(legend, legendItem{s.label, []plot.Thumbnailer{thumb}})
		}
		if !gp.percent {
			// Headroom, so the top of a plateau does not ride the frame.
			top := 0.0
			for _, s := range drawn {
				for _, run := range s.runs {
					for _, xy := range run {
						top = math.Max(top, xy.Y)
					}
				}
			}
			if top > 0 {
				p.Y.Max = top * 1.08
			}
		}
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return nil
	}
	if !(hi > lo) {
		hi = lo + 1
	}
	for i, p := range panels {
		p.X.Min, p.X.Max = lo, hi
		if i < len(panels)-1 {
			p.X.Tick.Marker = unlabelledTicks{numberTicks{}}
		}
	}
	panels[len(panels)-1].X.Label.Text = "time since the row began (s)"
	legend = append(legend, phaseLegend...)
	var notes []string
	if t.window.ok {
		notes = append(notes, "Dashed lines: the measured window, from the first measured dispatch to the last measured end.")
	}
	if shaded {
		notes = append(notes, "Shaded: scrapes outside the measured load.")
	}
	if t.inFlight != nil {
		notes = append(notes, "In flight (client): the row's requests, warmup included, between their start and end at each scrape.")
	}
	if t.perDot > 1 {
		notes = append(notes, "Each point averages up to "+strconv.Itoa(t.perDot)+" consecutive scrapes.")
	}
	f := &figure{
		name:        "timeslices-" + fileSafe(rs.ID),
		title:       "Over time: " + rs.ID,
		subtitle:    subtitle,
		note:        joinNotes(notes...),
		panels:      panels,
		stack:       true,
		legend:      legend,
		legendBelow: true,
	}
	if n := len(panels); n > 2 {
		f.height = plotHeight + vg.Length(n-2)*telemetryPanelHeight
	}
	return f
}

// sweptLoad is the load a planned row offers, as its sweep varies it:
// users for a closed loop, requests per second for an open one; 0 for a
// trace, which has no single figure.
func sweptLoad(r *schema.PlannedRow) float64 {
	switch r.Load.Mode {
	case schema.ModeConcurrency:
		return float64(r.Load.Concurrency)
	case schema.ModeRate:
		return r.Load.Rate
	}
	return 0
}

// loadPoint is one swept row's server figures at the load it offered.
type loadPoint struct {
	x       float64
	srv     *metrics.ServerTelemetry
	invalid bool
}

// loadLine is one series of the sweep chart: the rows that have the
// figure, in increasing load, as indices into the points.
type loadLine struct {
	label  string
	color  color.Color
	dashed bool
	xys    plotter.XYs
	rows   []int
}

// loadPanel is one panel of the sweep chart and the lines it draws;
// percent fixes its axis at 0–100.
type loadPanel struct {
	title, yLabel string
	percent       bool
	lines         []loadLine
}

// serverLoadPoints are the sweep's rows with server telemetry, in
// increasing load, and the load mode ("" when the rows are not one
// mode's, and so have no common x).
func serverLoadPoints(in *Input, sw *analysis.SweepAnalysis) (string, []loadPoint) {
	mode := ""
	var pts []loadPoint
	for _, id := range sw.Rows {
		pr := in.Plan.Row(id)
		if pr == nil {
			continue
		}
		if mode != "" && pr.Load.Mode != mode {
			return "", nil
		}
		mode = pr.Load.Mode
		rs := in.Summary.Row(id)
		x := sweptLoad(pr)
		if rs == nil || rs.Status == metrics.RowNotRun || rs.Server == nil || !(x > 0) || !isFinite(x) {
			continue
		}
		invalid := false
		if in.Decision != nil {
			if rv := in.Decision.Row(id); rv != nil && !rv.Validity.Valid {
				invalid = true
			}
		}
		pts = append(pts, loadPoint{x: x, srv: rs.Server, invalid: invalid})
	}
	sort.SliceStable(pts, func(a, b int) bool { return pts[a].x < pts[b].x })
	return mode, pts
}

// serverLoadPanels lay the points out: the KV cache's mean and max,
// then the requests waiting (mean, max) and running (mean). A line has
// the rows that report its figure, a panel the lines that have a row.
func serverLoadPanels(pts []loadPoint) []loadPanel {
	fig := func(g *metrics.Gauge, max bool, scale float64) (float64, bool) {
		if g == nil || g.Samples == 0 {
			return 0, false
		}
		v := g.Mean
		if max {
			v = g.Max
		}
		return v * scale, isFinite(v)
	}
	type spec struct {
		label  string
		color  color.Color
		dashed bool
		get    func(*metrics.ServerTelemetry) (float64, bool)
	}
	kvColor, waitColor, runColor := seriesPalette[1], seriesPalette[2], seriesPalette[6]
	specs := []struct {
		title, yLabel string
		percent       bool
		series        []spec
	}{
		{"KV-cache usage", "KV cache in use (%)", true, []spec{
			{"KV cache, mean", kvColor, false, func(s *metrics.ServerTelemetry) (float64, bool) { return fig(s.KVCacheUsage, false, 100) }},
			{"KV cache, max", kvColor, true, func(s *metrics.ServerTelemetry) (float64, bool) { return fig(s.KVCacheUsage, true, 100) }},
		}},
		{"Requests on the server", "requests", false, []spec{
			{"waiting, mean", waitColor, false, func(s *metrics.ServerTelemetry) (float64, bool) { return fig(s.NumRequestsWaiting, false, 1) }},
			{"waiting, max", waitColor, true, func(s *metrics.ServerTelemetry) (float64, bool) { return fig(s.NumRequestsWaiting, true, 1) }},
			{"running, mean", runColor, false, func(s *metrics.ServerTelemetry) (float64, bool) { return fig(s.NumRequestsRunning, false, 1) }},
		}},
	}
	var out []loadPanel
	for _, sp := range specs {
		lp := loadPanel{title: sp.title, yLabel: sp.yLabel, percent: sp.percent}
		for _, s := range sp.series {
			l := loadLine{label: s.label, color: s.color, dashed: s.dashed}
			for i, pt := range pts {
				if v, ok := s.get(pt.srv); ok {
					l.xys = append(l.xys, plotter.XY{X: pt.x, Y: v})
					l.rows = append(l.rows, i)
				}
			}
			if len(l.xys) > 0 {
				lp.lines = append(lp.lines, l)
			}
		}
		if len(lp.lines) > 0 {
			out = append(out, lp)
		}
	}
	return out
}

// serverLoadFigure draws one sweep's server gauges against the load it
// swept, a point per row that has them: KV-cache usage beside the queue.
// The load at which the cache nears full and requests start to wait is
// the server's own account of the knee. Rows whose figures cannot be
// trusted are labelled so where drawn. A chart against load needs two
// loads: with fewer rows, none.
func serverLoadFigure(in *Input, sw *analysis.SweepAnalysis) *figure {
	if in.Summary == nil || in.Plan == nil {
		return nil
	}
	mode, pts := serverLoadPoints(in, sw)
	lps := serverLoadPanels(pts)
	drawn := map[int]bool{}
	for _, lp := range lps {
		for _, l := range lp.lines {
			for _, i := range l.rows {
				drawn[i] = true
			}
		}
	}
	if len(drawn) < 2 {
		return nil
	}
	xLabel := "concurrency (users)"
	if mode == schema.ModeRate {
		xLabel = "request rate (requests/s)"
	}
	// Ticks at the swept values on a log axis when they span decades
	// (1, 4, 16, 64 users), where the steps of a doubling sweep are
	// evenly spaced.
	var xs []float64
	for _, pt := range pts {
		if len(xs) == 0 || xs[len(xs)-1] != pt.x {
			xs = append(xs, pt.x)
		}
	}
	logX := xs[len(xs)-1]/xs[0] >= 16
	var panels []*plot.Plot
	var legend []legendItem
	for _, lp := range lps {
		p := newPanel(lp.title, xLabel, lp.yLabel)
		top := 0.0
		for k, l := range lp.lines {
			for _, xy := range l.xys {
				top = math.Max(top, xy.Y)
			}
			line, g := seriesLine(l.xys, l.color, seriesGlyph(k), l.dashed)
			p.Add(line, g)
			legend = append(legend, legendItem{l.label, []plot.Thumbnailer{line, g}})
		}
		p.Y.Min = 0
		if lp.percent {
			p.Y.Max = 100
			p.Y.Tick.Marker = plot.ConstantTicks{{Value: 0, Label: "0"}, {Value: 25, Label: "25"}, {Value: 50, Label: "50"},
				{Value: 75, Label: "75"}, {Value: 100, Label: "100"}}
		} else if top > 0 {
			p.Y.Max = top * 1.1
		}
		if logX {
			p.X.Scale = plot.LogScale{}
			p.X.Tick.Marker = logTicks{}
			if len(xs) <= 10 {
				var ticks plot.ConstantTicks
				for _, x := range xs {
					ticks = append(ticks, plot.Tick{Value: x, Label: fmtNum(x)})
				}
				p.X.Tick.Marker = ticks
			}
			p.X.Min, p.X.Max = xs[0]/1.25, xs[len(xs)-1]*1.25
		} else {
			p.X.Min, p.X.Max = 0, xs[len(xs)-1]*1.05
		}
		// The first line carries the invalid rows' labels.
		first := lp.lines[0]
		labels := make([]string, len(first.rows))
		for j, i := range first.rows {
			if pts[i].invalid {
				labels[j] = "invalid"
			}
		}
		p.Add(&pointLabels{xys: first.xys, labels: labels, style: pointStyle, avoid: []obstacle{{xys: first.xys, joined: true}}})
		panels = append(panels, p)
	}
	return &figure{
		name:        "server-load-" + fileSafe(sw.Base),
		title:       "Server load against offered load: " + sw.Base,
		subtitle:    "One point per swept row with server telemetry: the server's own gauges, over the row's measured window.",
		note:        "A KV cache near full with requests waiting is a server out of room: past that load, more load queues rather than being served.",
		panels:      panels,
		legend:      legend,
		legendBelow: true,
	}
}
