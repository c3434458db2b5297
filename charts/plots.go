package charts

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/metrics"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot is one rendered chart, in both formats.
type Plot struct {
	// Name is the file name without extension, e.g. "latency-throughput-saturation".
	Name  string
	Title string
	PNG   []byte
	SVG   []byte
}

// RenderPlots draws every chart the run supports, in this order, leaving
// out those it has no data for:
//
//   - latency-throughput-BASE: per sweep, TTFT and TPOT (p95, p50) against
//     output throughput, with the SLO, the knee and the operating point;
//   - server-load-BASE: per sweep, after its latency-throughput chart, the
//     server's KV-cache usage (mean, max) and requests waiting (mean,
//     max) and running (mean) against the swept concurrency or rate, one
//     point per row with server telemetry (needs two);
//   - ramp-ROW: per ramped row, each step's TTFT and TPOT above its output
//     throughput, against the step's load (ramp.go);
//   - pareto: output tokens/s per GPU against tokens/s per user, one
//     point per row, with the Pareto frontier (needs two rows);
//   - cdf-ttft, cdf-tpot: each row's distribution, from its records;
//   - timeslices-ROW: per row, TTFT and output throughput over its
//     measured window (needs three timeslices); for a row with telemetry,
//     on the row's clock and above the server's requests running and
//     waiting (with the client's in flight, from the records), KV-cache
//     usage and GPU utilization (%), and GPU power, each panel only for
//     the figures scraped, the warmup, drain and prime shaded and the
//     measured window marked, taller by a panel's height for each panel
//     past two;
//   - ttft-vs-input: each request's TTFT against its input length, from
//     the records (needs two distinct input lengths);
//   - tpot-predicted-vs-measured: with predictions, measured TPOT p50
//     against the bandwidth bound.
//
// Charts with a line or colour per row show ten rows at most, evenly
// spaced in plan order, and say so. Names are file-safe and unique
// regardless of case.
//
// The same input gives the same bytes: everything is drawn in a fixed
// order, samples are thinned deterministically, and neither format
// carries a timestamp.
func RenderPlots(in *Input) ([]Plot, error) {
	figs, err := plotFigures(in)
	if err != nil {
		return nil, err
	}
	// Figures are independent: render them on every core, each into its
	// own slot, so the result keeps the order above.
	out := make([]Plot, len(figs))
	errs := make([]error, len(figs))
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, f := range figs {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			out[i], errs[i] = f.render()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// plotFigures lays out the charts RenderPlots draws, in its order, with
// their final names.
func plotFigures(in *Input) ([]*figure, error) {
	var figs []*figure
	add := func(f *figure) {
		if f != nil {
			figs = append(figs, f)
		}
	}
	if in.Analysis != nil {
		for i := range in.Analysis.Sweeps {
			add(latencyThroughputFigure(in, &in.Analysis.Sweeps[i]))
			add(serverLoadFigure(in, &in.Analysis.Sweeps[i]))
		}
	}
	add(paretoFigure(in))
	for _, f := range rampFigures(in) { // ramp.go
		add(f)
	}
	recs, err := readRowRecords(in, plotRowIDs(in))
	if err != nil {
		return nil, err
	}
	sem := ""
	if in.Summary != nil && in.Summary.Semantics != "" && in.Summary.Semantics != metrics.SemInfermatrix {
		sem = in.Summary.Semantics
	}
	pooled := pooledIDs(in)
	add(cdfFigure("cdf-ttft", "TTFT distribution by row", "TTFT (ms, log scale)", "TTFT (ms)", joinNotes(semNote(sem), pooledNote(pooled, "TTFT")), recs,
		func(r *rowRecords) rowCDF { return r.ttft }))
	add(cdfFigure("cdf-tpot", "TPOT distribution by row", "TPOT (ms, log scale)", "TPOT (ms)", joinNotes(semNote(sem), pooledNote(pooled, "TPOT")), recs,
		func(r *rowRecords) rowCDF { return r.tpot }))
	for _, f := range timesliceFigures(in, recs) {
		add(f)
	}
	add(ttftInputFigure(recs, joinNotes(semNote(sem), pooledNote(pooled, "TTFT"))))
	add(predictionFigure(in))

	uniqueNames(figs)
	return figs, nil
}

// uniqueNames numbers figures whose names clash, "-2", "-3" and so on,
// ignoring case: the names become files, on file systems that may not
// tell case apart.
func uniqueNames(figs []*figure) {
	seen := map[string]bool{}
	for _, f := range figs {
		base := f.name
		for n := 2; seen[strings.ToLower(f.name)]; n++ {
			f.name = base + "-" + strconv.Itoa(n)
		}
		seen[strings.ToLower(f.name)] = true
	}
}

// plotRowIDs are the rows whose records the plots read: those that ran,
// in plan order.
func plotRowIDs(in *Input) []string {
	var ids []string
	if in.Summary != nil {
		for _, rs := range measuredRows(in.Summary) {
			ids = append(ids, rs.ID)
		}
		return ids
	}
	if in.Plan != nil {
		for _, r := range in.Plan.Rows {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// fileSafe makes s usable in a file name: letters, digits, '.', '_' and
// '-' stay, anything else becomes '-'.
func fileSafe(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	if b.Len() == 0 {
		return "row"
	}
	return b.String()
}

// sweptValue is what distinguishes a swept row within its sweep: "c=16"
// of "saturation/c=16". Other rows are their id.
func sweptValue(id, base string) string {
	if v, ok := strings.CutPrefix(id, base+"/"); ok && base != "" {
		return v
	}
	return id
}

// fmtNum writes a figure for a label without trailing zeros: whole
// from 100, one decimal from 10, three significant digits below.
func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	case a >= 10:
		return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// seriesLine is a solid series line with glyphs at its points.
func seriesLine(xys plotter.XYs, c color.Color, g draw.GlyphDrawer, dashed bool) (*plotter.Line, *plotter.Scatter) {
	ls := lineStyle(c, 1.6)
	r := vg.Length(3)
	if dashed {
		ls = lineStyle(c, 1.2, 5, 3)
		r = 2.2
	}
	return newLine(xys, ls), newScatter(xys, draw.GlyphStyle{Color: c, Radius: r, Shape: g})
}

// latencyThroughputFigure draws one sweep: TTFT and TPOT against output
// throughput, one point per swept row in sweep order. A sweep of
// embeddings or rerank rows, which generate no token, is drawn on its own
// figures: E2E against inputs per second.
func latencyThroughputFigure(in *Input, sw *analysis.SweepAnalysis) *figure {
	if in.Summary == nil {
		return nil
	}
	type point struct {
		id, label              string
		x                      float64
		ttft, tpot, e2e        metrics.Dist
		knee, opPoint, invalid bool
	}
	pooled := sweepPooled(in, sw)
	var pts []point
	for _, id := range sw.Rows {
		rs := in.Summary.Row(id)
		if rs == nil || rs.Status == metrics.RowNotRun || pooled != pooledRow(in, rs) {
			continue
		}
		x := rs.Throughput.OutputTokensPerS
		if pooled {
			x = rs.Throughput.InputsPerS
		}
		if !(x > 0) || !isFinite(x) {
			continue
		}
		invalid := false
		if in.Decision != nil {
			if rv := in.Decision.Row(id); rv != nil && !rv.Validity.Valid {
				invalid = true
			}
		}
		pts = append(pts, point{id: id, label: sweptValue(id, sw.Base), x: x,
			ttft: rs.Metrics.TTFT, tpot: rs.Metrics.TPOT, e2e: rs.Metrics.E2E, knee: id == sw.Knee, opPoint: id == sw.OperatingPoint, invalid: invalid})
	}
	var slo metrics.SLO
	if in.Plan != nil {
		slo = in.Plan.SLO
	}
	p95Color, p50Color := seriesPalette[0], rgb(0x8DB6D9)
	var legend []legendItem
	var sloShown, kneeShown, opShown bool
	var kneeLabel, opLabel string
	panel := func(title, yLabel, metric string, get func(point) metrics.Dist, sloMS float64) *plot.Plot {
		var p95, p50 plotter.XYs
		var labels []string
		var first []bool
		var knee, op plotter.XYs
		for _, pt := range pts {
			d := get(pt)
			if d.Count == 0 || !isFinite(d.P95, d.P50) {
				continue
			}
			p95 = append(p95, plotter.XY{X: pt.x, Y: d.P95})
			p50 = append(p50, plotter.XY{X: pt.x, Y: d.P50})
			l := pt.label
			var marks []string
			if pt.knee {
				knee = append(knee, plotter.XY{X: pt.x, Y: d.P95})
				marks = append(marks, "knee")
				kneeLabel = pt.label
			}
			if pt.opPoint {
				op = append(op, plotter.XY{X: pt.x, Y: d.P95})
				marks = append(marks, "operating point")
				opLabel = pt.label
			}
			if pt.invalid {
				// Its figures cannot be trusted: say so where it is drawn.
				marks = append(marks, "invalid")
			}
			if len(marks) > 0 {
				l += " (" + strings.Join(marks, ", ") + ")"
			}
			labels = append(labels, l)
			first = append(first, len(marks) > 0)
		}
		if len(p95) == 0 {
			return nil
		}
		xLabel := "output throughput (tokens/s)"
		if pooled {
			xLabel = "throughput (inputs/s)"
		}
		p := newPanel(title, xLabel, yLabel)
		top := 0.0
		for _, xy := range p95 {
			top = math.Max(top, xy.Y)
		}
		if sloMS > 0 {
			// An SLO far above the data would flatten it; it is named
			// instead.
			if sloMS <= 4*top {
				p.Add(&hline{y: sloMS, style: lineStyle(sloColor, 1.2, 6, 3), label: metric + " SLO " + fmtNum(sloMS) + " ms", color: sloColor})
				top = math.Max(top, sloMS)
			} else {
				top *= 1.1
				p.Add(&hline{y: top, label: metric + " SLO " + fmtNum(sloMS) + " ms: far above", color: sloColor})
			}
			sloShown = true
		}
		// Headroom over the top point, for its label.
		p.X.Min, p.Y.Min, p.Y.Max = 0, 0, top*1.08
		l50, s50 := seriesLine(p50, p50Color, draw.CircleGlyph{}, true)
		l95, s95 := seriesLine(p95, p95Color, draw.CircleGlyph{}, false)
		p.Add(l50, s50, l95, s95)
		if len(knee) > 0 {
			p.Add(newScatter(knee, draw.GlyphStyle{Color: kneeColor, Radius: 7, Shape: markGlyph{}}))
			kneeShown = true
		}
		if len(op) > 0 {
			p.Add(newScatter(op, draw.GlyphStyle{Color: opColor, Radius: 6, Shape: markGlyph{square: true}}))
			opShown = true
		}
		avoid := []obstacle{{xys: p95, joined: true}, {xys: p50, pad: 3, joined: true}, {xys: knee, pad: 10}, {xys: op, pad: 10}}
		if sloMS > 0 {
			avoid = append(avoid, obstacle{ys: []float64{sloMS}})
		}
		p.Add(&pointLabels{xys: p95, labels: labels, first: first, avoid: avoid, style: pointStyle})
		if len(legend) == 0 {
			legend = append(legend,
				legendItem{"p95", []plot.Thumbnailer{l95, s95}},
				legendItem{"p50", []plot.Thumbnailer{l50, s50}})
		}
		return p
	}
	var panels []*plot.Plot
	note := "Each point is one swept row, in sweep order; latencies over successful measured requests, throughput over the row's measured window."
	if pooled {
		// No first token and no token gaps: the whole request is the
		// latency, and the inputs it carried are the work.
		if p := panel("End-to-end latency", "E2E (ms)", "E2E", func(pt point) metrics.Dist { return pt.e2e }, slo.E2Ems); p != nil {
			panels = append(panels, p)
		}
		note += " Embeddings and rerank generate no token: latency is end to end, throughput in inputs (texts embedded, documents scored) per second."
	} else {
		if p := panel("Time to first token", "TTFT (ms)", "TTFT", func(pt point) metrics.Dist { return pt.ttft }, slo.TTFTms); p != nil {
			panels = append(panels, p)
		}
		if p := panel("Time per output token", "TPOT (ms)", "TPOT", func(pt point) metrics.Dist { return pt.tpot }, slo.TPOTms); p != nil {
			panels = append(panels, p)
		}
	}
	if len(panels) == 0 {
		return nil
	}
	if sloShown {
		legend = append(legend, legendItem{"SLO", []plot.Thumbnailer{&hline{style: lineStyle(sloColor, 1.2, 6, 3)}}})
	}
	if kneeShown {
		legend = append(legend, legendItem{"knee: " + kneeLabel, []plot.Thumbnailer{
			newScatter(nil, draw.GlyphStyle{Color: kneeColor, Radius: 6, Shape: markGlyph{}})}})
	}
	if opShown {
		legend = append(legend, legendItem{"operating point: " + opLabel, []plot.Thumbnailer{
			newScatter(nil, draw.GlyphStyle{Color: opColor, Radius: 5, Shape: markGlyph{square: true}})}})
	}
	return &figure{
		name:        "latency-throughput-" + fileSafe(sw.Base),
		title:       "Latency against throughput: " + sw.Base,
		subtitle:    strings.ReplaceAll(sw.Why, "`", ""), // Markdown in decision.md, noise here
		note:        note,
		panels:      panels,
		legend:      legend,
		legendBelow: true,
	}
}

// paretoFigure puts every row on the throughput-interactivity plane:
// output tokens/s per GPU against output tokens/s per user. Embeddings
// and rerank rows have neither figure: they are left out, and named.
func paretoFigure(in *Input) *figure {
	var rows []*metrics.RowSummary
	for _, rs := range measuredRows(in.Summary) {
		t := rs.Throughput
		if !pooledRow(in, rs) && t.OutputTokensPerS > 0 && t.OutputTokensPerSU > 0 && isFinite(t.OutputTokensPerS, t.OutputTokensPerSU) {
			rows = append(rows, rs)
		}
	}
	if len(rows) < 2 {
		return nil
	}
	gpus := 0
	if in.Plan != nil {
		gpus = in.Plan.Server.Hardware.Count
	}
	yLabel := "output tokens/s per GPU (GPU count not set: taken as 1)"
	div := 1.0
	switch {
	case gpus == 1:
		yLabel = "output tokens/s per GPU (1 GPU)"
	case gpus > 1:
		yLabel = fmt.Sprintf("output tokens/s per GPU (server total ÷ %d GPUs)", gpus)
		div = float64(gpus)
	}
	ops := map[string]bool{}
	if in.Analysis != nil {
		for _, sw := range in.Analysis.Sweeps {
			if sw.OperatingPoint != "" {
				ops[sw.OperatingPoint] = true
			}
		}
	}
	// Group by base, in plan order: a sweep is one colour.
	var bases []string
	group := map[string]int{}
	var all plotter.XYs
	var labels []string
	var first []bool
	var opXYs plotter.XYs
	byBase := map[string]plotter.XYs{}
	for _, rs := range rows {
		base := rs.Base
		if base == "" {
			base = rs.ID
		}
		if _, ok := group[base]; !ok {
			group[base] = len(bases)
			bases = append(bases, base)
		}
		xy := plotter.XY{X: rs.Throughput.OutputTokensPerSU, Y: rs.Throughput.OutputTokensPerS / div}
		all = append(all, xy)
		byBase[base] = append(byBase[base], xy)
		labels = append(labels, sweptValue(rs.ID, rs.Base))
		first = append(first, ops[rs.ID])
		if ops[rs.ID] {
			opXYs = append(opXYs, xy)
		}
	}
	p := newPanel("", "output tokens/s per user (mean of 1000 ÷ TPOT)", yLabel)
	// Headroom above and to the right, for the labels of the points
	// that matter most: the ends of the frontier.
	var xmax, ymax float64
	for _, xy := range all {
		xmax, ymax = math.Max(xmax, xy.X), math.Max(ymax, xy.Y)
	}
	p.X.Min, p.Y.Min, p.X.Max, p.Y.Max = 0, 0, xmax*1.04, ymax*1.08
	var front plotter.XYs
	for _, i := range paretoFrontier(all) {
		front = append(front, all[i])
		first[i] = first[i] || all[i].X == xmax || all[i].Y == ymax
	}
	p.Add(newLine(front, lineStyle(rgb(0x444444), 1.4)))
	var legend []legendItem
	legend = append(legend, legendItem{"Pareto frontier", []plot.Thumbnailer{newLine(nil, lineStyle(rgb(0x444444), 1.4))}})
	for i, base := range bases {
		g := draw.GlyphStyle{Color: seriesColor(i), Radius: 3.5, Shape: seriesGlyph(i)}
		if i >= len(seriesGlyphs) {
			g.Shape = draw.CircleGlyph{}
		}
		s := newScatter(byBase[base], g)
		p.Add(s)
		legend = append(legend, legendItem{base, []plot.Thumbnailer{s}})
	}
	if len(opXYs) > 0 {
		s := newScatter(opXYs, draw.GlyphStyle{Color: opColor, Radius: 7, Shape: markGlyph{square: true}})
		p.Add(s)
		legend = append(legend, legendItem{"operating point", []plot.Thumbnailer{
			newScatter(nil, draw.GlyphStyle{Color: opColor, Radius: 5, Shape: markGlyph{square: true}})}})
	}
	p.Add(&pointLabels{xys: all, labels: labels, first: first, style: pointStyle,
		avoid: []obstacle{{xys: front, joined: true}, {xys: opXYs, pad: 10}}})
	return &figure{
		name:     "pareto",
		title:    "Throughput per GPU against speed per user",
		subtitle: "One point per row; the frontier joins the rows no other row beats on both axes. Up and to the right is better.",
		note:     pooledNote(pooledIDs(in), "output tokens/s"),
		panels:   []*plot.Plot{p},
		legend:   legend,
	}
}

// shownNote says which rows a chart with a line per row left out.
func shownNote(shown, total int) string {
	if shown == total {
		return ""
	}
	return fmt.Sprintf("Showing %d of %d rows, evenly spaced in plan order.", shown, total)
}

// semNote says that record-based charts keep infermatrix's definitions
// when the summaries follow another tool's.
func semNote(sem string) string {
	if sem == "" {
		return ""
	}
	return "The summaries follow semantics " + sem + "; this chart uses infermatrix's definitions, from each record's stamps."
}

func joinNotes(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, " ")
}

// cdfFigure draws one metric's empirical CDF, a line per row; notes
// (semNote, pooledNote) close its caption.
func cdfFigure(name, title, logLabel, linLabel, notes string, recs []*rowRecords, get func(*rowRecords) rowCDF) *figure {
	var have []*rowRecords
	for _, r := range recs {
		if len(get(r).xys) > 0 {
			have = append(have, r)
		}
	}
	if len(have) == 0 {
		return nil
	}
	type series struct {
		id string
		rowCDF
	}
	var ss []series
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, i := range pickEvenly(len(have), maxSeries) {
		r := have[i]
		cdf := get(r)
		lo, hi = math.Min(lo, cdf.xys[0].X), math.Max(hi, cdf.xys[len(cdf.xys)-1].X)
		ss = append(ss, series{r.id, cdf})
	}
	logX := lo > 0 && hi/lo >= 30
	xLabel := linLabel
	if logX {
		xLabel = logLabel
	}
	p := newPanel("", xLabel, "requests at or below (%)")
	p.Y.Min, p.Y.Max = 0, 100
	p.Y.Tick.Marker = plot.ConstantTicks{{Value: 0, Label: "0"}, {Value: 25, Label: "25"}, {Value: 50, Label: "50"},
		{Value: 75, Label: "75"}, {Value: 95, Label: "95"}, {Value: 100, Label: "100"}}
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = logTicks{}
	} else {
		p.X.Min = 0
	}
	p.Add(&hline{y: 95, style: lineStyle(mutedColor, 0.8, 2, 2)})
	var legend []legendItem
	for i, s := range ss {
		l := newLine(s.xys, lineStyle(seriesColor(i), 1.6))
		if s.exact {
			l.StepStyle = plotter.PostStep
		}
		p.Add(l)
		legend = append(legend, legendItem{fmt.Sprintf("%s (n=%d)", s.id, s.n), []plot.Thumbnailer{l}})
	}
	return &figure{
		name:     name,
		title:    title,
		subtitle: "Successful measured requests; warmup excluded. A curve further left is faster; its top shows the tail.",
		note:     joinNotes(shownNote(len(ss), len(have)), notes),
		panels:   []*plot.Plot{p},
		legend:   legend,
	}
}

// minTimeslices is the fewest slices a row needs for a chart over time:
// fewer, and the first and last, cut to the window, are all there is.
const minTimeslices = 3

// timesliceFigures draw each row over time: TTFT p95 and p50 over its
// measured window above, output throughput below, and under them the
// server's and the GPUs' gauges at each scrape when the row has
// telemetry. A chart per row rather than one for all: rows of a sweep
// last from seconds to hours, and on one time axis the short ones are
// lost.
func timesliceFigures(in *Input, recs []*rowRecords) []*figure {
	var slo float64
	if in.Plan != nil {
		slo = in.Plan.SLO.TTFTms
	}
	byID := map[string]*rowRecords{}
	for _, r := range recs {
		byID[r.id] = r
	}
	var figs []*figure
	for _, rs := range measuredRows(in.Summary) {
		if f := timesliceFigure(rs, slo, byID[rs.ID], pooledRow(in, rs)); f != nil {
			figs = append(figs, f)
		}
	}
	return figs
}

// timesliceFigure draws one row over time; rec, its records' reduction,
// may be nil. A row with telemetry gets the telemetry chart, on the
// row's own clock (see telemetryFigure); one without, its measured
// window alone. pooled says the row is an embeddings or rerank row
// (pooledRow), drawn on requests per second.
func timesliceFigure(rs *metrics.RowSummary, slo float64, rec *rowRecords, pooled bool) *figure {
	if tel := newRowTelemetry(rs, rec); tel != nil {
		return telemetryFigure(rs, slo, tel, pooled)
	}
	sl := rs.Timeslices.Slices
	if len(sl) < minTimeslices {
		return nil
	}
	panels, legend, _, xmax := slicePanels(rs, slo, sl[0].StartS, nil, pooled)
	if len(panels) == 0 {
		return nil
	}
	panels[len(panels)-1].X.Label.Text = "time since the row's measured window began (s)"
	for _, p := range panels {
		p.X.Min, p.X.Max = 0, xmax
	}
	return &figure{
		name:        "timeslices-" + fileSafe(rs.ID),
		title:       "Over time: " + rs.ID,
		subtitle:    sliceSubtitle(rs, pooled),
		panels:      panels,
		stack:       true,
		legend:      legend,
		legendBelow: true,
	}
}

func sliceSubtitle(rs *metrics.RowSummary, pooled bool) string {
	if pooled {
		return "Slices of " + fmtNum(rs.Timeslices.WidthS) + " s. An embeddings or rerank row generates no token: no TTFT or output tokens, requests by when they ended."
	}
	return "Slices of " + fmtNum(rs.Timeslices.WidthS) + " s. TTFT of the requests whose first token came in each slice; output tokens by when they arrived."
}

// slicePanels draw a row's timeslices, TTFT above output throughput,
// each slice at its middle less t0, and return the panels, their legend
// and the x range the slices span. decor, when set, is drawn on each
// panel before the data, to lie under it. Either panel is left out when
// no slice has its figure. A pooled row has no TTFT and no output: its
// throughput panel is requests per second, not a line at 0 tokens/s.
func slicePanels(rs *metrics.RowSummary, slo, t0 float64, decor []plot.Plotter, pooled bool) (panels []*plot.Plot, legend []legendItem, xmin, xmax float64) {
	sl := rs.Timeslices.Slices
	var tput, p95, p50 plotter.XYs
	var runs95, runs50 []plotter.XYs // runs of slices with a TTFT
	flush := func() {
		if len(p95) > 0 {
			runs95, runs50 = append(runs95, p95), append(runs50, p50)
		}
		p95, p50 = nil, nil
	}
	xmin, xmax = math.Inf(1), math.Inf(-1)
	top := 0.0
	for _, s := range sl {
		x := (s.StartS+s.EndS)/2 - t0
		if !isFinite(x, s.EndS, s.StartS) {
			continue
		}
		xmin, xmax = math.Min(xmin, s.StartS-t0), math.Max(xmax, s.EndS-t0)
		switch {
		case pooled && isFinite(s.RequestsPerS):
			tput = append(tput, plotter.XY{X: x, Y: s.RequestsPerS})
		case !pooled && isFinite(s.OutputTokensPerS):
			tput = append(tput, plotter.XY{X: x, Y: s.OutputTokensPerS})
		}
		if s.TTFT.Count > 0 && isFinite(s.TTFT.P95, s.TTFT.P50) {
			p95 = append(p95, plotter.XY{X: x, Y: s.TTFT.P95})
			p50 = append(p50, plotter.XY{X: x, Y: s.TTFT.P50})
			top = math.Max(top, s.TTFT.P95)
		} else {
			flush()
		}
	}
	flush()
	if len(tput) == 0 && len(runs95) == 0 {
		return nil, nil, 0, 0
	}
	p95Color, p50Color, tputColor := seriesPalette[0], rgb(0x8DB6D9), seriesPalette[4]
	dots := len(sl) <= 40
	thin := len(sl) > 200 // dense lines drawn thinner, to stay apart
	if len(runs95) > 0 {
		p := newPanel("", "", "TTFT (ms)")
		p.Add(decor...)
		p.Y.Min = 0
		var sloLine *hline
		if slo > 0 && slo <= 4*top {
			sloLine = &hline{y: slo, style: lineStyle(sloColor, 1.2, 6, 3), label: "TTFT SLO " + fmtNum(slo) + " ms", color: sloColor}
			p.Add(sloLine)
		}
		var l95, l50 *plotter.Line
		var s95, s50 *plotter.Scatter
		for j := range runs95 {
			l50, s50 = seriesLine(runs50[j], p50Color, draw.CircleGlyph{}, true)
			l95, s95 = seriesLine(runs95[j], p95Color, draw.CircleGlyph{}, false)
			if thin {
				l50.Width, l95.Width = 0.8, 1
			}
			p.Add(l50, l95)
			if dots || len(runs95[j]) == 1 {
				p.Add(s50, s95)
			}
		}
		legend = append(legend, legendItem{"TTFT p95", []plot.Thumbnailer{l95}}, legendItem{"TTFT p50", []plot.Thumbnailer{l50}})
		if sloLine != nil {
			legend = append(legend, legendItem{"TTFT SLO", []plot.Thumbnailer{sloLine}})
		}
		panels = append(panels, p)
	}
	if len(tput) > 0 {
		tputLabel := "output tokens/s"
		if pooled {
			tputLabel = "requests/s"
		}
		p := newPanel("", "", tputLabel)
		p.Add(decor...)
		p.Y.Min = 0
		l, s := seriesLine(tput, tputColor, draw.CircleGlyph{}, false)
		if thin {
			l.Width = 1
		}
		p.Add(l)
		if dots || len(tput) == 1 {
			p.Add(s)
		}
		legend = append(legend, legendItem{tputLabel, []plot.Thumbnailer{l}})
		panels = append(panels, p)
	}
	return panels, legend, xmin, xmax
}

// ttftInputFigure scatters each request's TTFT against its input length,
// coloured by row; notes (semNote, pooledNote) close its caption.
func ttftInputFigure(recs []*rowRecords, notes string) *figure {
	var have []*rowRecords
	distinct := map[float64]bool{}
	for _, r := range recs {
		if len(r.inTTFT.vals) > 0 {
			have = append(have, r)
			for _, xy := range r.inTTFT.vals {
				distinct[xy.X] = true
			}
		}
	}
	if len(distinct) < 2 {
		return nil
	}
	p := newPanel("", "input tokens (server's count, else the client's)", "TTFT (ms)")
	p.X.Min, p.Y.Min = 0, 0
	var legend []legendItem
	thinned := false
	sel := pickEvenly(len(have), maxSeries)
	for k, i := range sel {
		r := have[i]
		var xys plotter.XYs
		for _, xy := range r.inTTFT.vals {
			if isFinite(xy.X, xy.Y) {
				xys = append(xys, xy)
			}
		}
		thinned = thinned || r.inTTFT.stride > 1
		s := newScatter(xys, draw.GlyphStyle{Color: faded(seriesColor(k), 190), Radius: 2.4, Shape: seriesGlyph(k)})
		p.Add(s)
		thumb := newScatter(nil, draw.GlyphStyle{Color: seriesColor(k), Radius: 3, Shape: seriesGlyph(k)})
		legend = append(legend, legendItem{r.id, []plot.Thumbnailer{thumb}})
	}
	note := ""
	if thinned {
		note = "Large rows are thinned to an evenly spaced sample of their requests."
	}
	return &figure{
		name:     "ttft-vs-input",
		title:    "TTFT against input length",
		subtitle: "One point per successful measured request; warmup excluded.",
		note:     joinNotes(shownNote(len(sel), len(have)), note, notes),
		panels:   []*plot.Plot{p},
		legend:   legend,
	}
}

// regimeColors colour the prediction chart by regime, in this order.
var regimeColors = []struct {
	regime string
	color  color.Color
}{
	{analysis.RegimeBandwidth, seriesPalette[0]},
	{analysis.RegimeOverhead, seriesPalette[1]},
	{analysis.RegimePrefill, seriesPalette[6]},
	{analysis.RegimeQueueing, seriesPalette[2]},
}

// predictionFigure scatters each row's measured TPOT p50 against the
// bandwidth-bound prediction, with the line where they are equal.
func predictionFigure(in *Input) *figure {
	if in.Analysis == nil || in.Analysis.Predictions == nil {
		return nil
	}
	byRegime := map[string]plotter.XYs{}
	var all plotter.XYs
	var labels []string
	top := 0.0
	var pooled []string // no TPOT to set against the bound: named
	for _, pr := range in.Analysis.Predictions {
		if in.Summary != nil {
			if rs := in.Summary.Row(pr.Row); rs != nil && rs.Status != metrics.RowNotRun && pooledRow(in, rs) {
				pooled = append(pooled, pr.Row)
				continue
			}
		}
		measured := pr.MeasuredTPOTMS
		if measured <= 0 && in.Summary != nil {
			if rs := in.Summary.Row(pr.Row); rs != nil && rs.Metrics.TPOT.Count > 0 {
				measured = rs.Metrics.TPOT.P50
			}
		}
		if !(pr.TPOTBoundMS > 0) || !(measured > 0) || !isFinite(pr.TPOTBoundMS, measured) {
			continue
		}
		xy := plotter.XY{X: pr.TPOTBoundMS, Y: measured}
		byRegime[pr.Regime] = append(byRegime[pr.Regime], xy)
		all = append(all, xy)
		labels = append(labels, pr.Row)
		top = math.Max(top, math.Max(xy.X, xy.Y))
	}
	if len(all) == 0 {
		return nil
	}
	// Known regimes in a fixed order, then any others by name.
	type group struct {
		name  string
		color color.Color
	}
	var groups []group
	for _, rc := range regimeColors {
		if len(byRegime[rc.regime]) > 0 {
			groups = append(groups, group{rc.regime, rc.color})
		}
	}
	var others []string
	for name := range byRegime {
		known := false
		for _, rc := range regimeColors {
			known = known || rc.regime == name
		}
		if !known {
			others = append(others, name)
		}
	}
	sort.Strings(others)
	for _, name := range others {
		groups = append(groups, group{name, seriesPalette[9]})
	}
	p := newPanel("", "predicted TPOT lower bound at batch one (ms)", "measured TPOT p50 (ms)")
	p.X.Min, p.Y.Min = 0, 0
	p.X.Max, p.Y.Max = top*1.08, top*1.08
	diag := &diagonal{style: lineStyle(mutedColor, 1, 5, 3)}
	p.Add(diag)
	legend := []legendItem{{"measured = bound (y = x)", []plot.Thumbnailer{diag}}}
	for i, g := range groups {
		s := newScatter(byRegime[g.name], draw.GlyphStyle{Color: g.color, Radius: 3.5, Shape: seriesGlyph(i)})
		p.Add(s)
		name := g.name
		if name == "" {
			name = "regime not given"
		}
		legend = append(legend, legendItem{name, []plot.Thumbnailer{s}})
	}
	p.Add(&pointLabels{xys: all, labels: labels, style: pointStyle,
		avoid: []obstacle{{xys: plotter.XYs{{X: 0, Y: 0}, {X: p.X.Max, Y: p.Y.Max}}, joined: true}}})
	return &figure{
		name:     "tpot-predicted-vs-measured",
		title:    "TPOT: measured against the bandwidth bound",
		subtitle: "The bound is one stream's decode time from memory bandwidth alone; the height above the diagonal is what batching, overheads and queueing add.",
		note:     pooledNote(pooled, "TPOT"),
		panels:   []*plot.Plot{p},
		legend:   legend,
	}
}
