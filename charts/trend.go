package charts

import (
	"fmt"
	"image/color"
	"math"

	"github.com/infermatrix/infermatrix/internal/numfmt"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// TrendChart is one metric over a sequence of runs, one line per row:
// what `infermatrix history` draws. It is here, beside the decision
// record's charts, so that the trend reads in the same house style (fonts,
// palette, glyphs, ticks); package history fills it in.
type TrendChart struct {
	// Name is the file name without extension; Title and Subtitle head the
	// chart; YLabel names the metric and its unit.
	Name, Title, Subtitle, YLabel string
	// Runs labels the x axis: Runs[i] is the tick under run position i+1.
	// Runs are evenly spaced, whatever the time between them, so that a
	// burst of reruns on one afternoon stays readable beside a monthly run.
	Runs []string
	// XLabel names the x axis ("run", say, with how runs are labelled).
	XLabel string
	Series []TrendSeries
}

// TrendSeries is one row's values across the runs.
type TrendSeries struct {
	Label  string
	Points []TrendPoint
}

// TrendPoint is the value one run measured. Run is the position (1-based)
// on the x axis. Invalid marks a run in which the row's figures were not
// trusted (docs/validity.md): its point is drawn hollow, and the legend
// says what a hollow point means.
type TrendPoint struct {
	Run     int
	Value   float64
	Invalid bool
}

// RenderTrend draws a trend chart as PNG and SVG. A series without a
// finite value is left out; a run in which a row has no value breaks the
// row's line there rather than joining across it, so that a gap reads as
// a gap. At most as many rows as there are distinct colours are drawn,
// and a note says how many were left out.
func RenderTrend(c TrendChart) (Plot, error) {
	p := newPanel("", c.XLabel, c.YLabel)
	p.X.Tick.Marker = runTicks(c.Runs)
	n := len(c.Runs)
	p.X.Min, p.X.Max = 0.5, float64(n)+0.5

	var legend []legendItem
	anyInvalid, drawn, left := false, 0, 0
	ymax := math.Inf(-1)
	for _, s := range c.Series {
		var pts []TrendPoint
		for _, pt := range s.Points {
			if isFinite(pt.Value) && pt.Run >= 1 && pt.Run <= n {
				pts = append(pts, pt)
			}
		}
		if len(pts) == 0 {
			continue
		}
		if drawn == maxSeries {
			left++
			continue
		}
		col, shape := seriesColor(drawn), trendShapes[drawn%len(trendShapes)]
		drawn++
		line := lineStyle(col, 1.6)
		var seg plotter.XYs
		var solid, hollow plotter.XYs
		flush := func() {
			if len(seg) > 1 {
				p.Add(newLine(seg, line))
			}
			seg = nil
		}
		for i, pt := range pts {
			if i > 0 && pt.Run != pts[i-1].Run+1 {
				flush()
			}
			xy := plotter.XY{X: float64(pt.Run), Y: pt.Value}
			seg = append(seg, xy)
			if pt.Invalid {
				hollow, anyInvalid = append(hollow, xy), true
			} else {
				solid = append(solid, xy)
			}
			ymax = math.Max(ymax, pt.Value)
		}
		flush()
		g := draw.GlyphStyle{Color: col, Radius: 3.6, Shape: shape}
		if len(solid) > 0 {
			p.Add(newScatter(solid, g))
		}
		if len(hollow) > 0 {
			p.Add(newScatter(hollow, draw.GlyphStyle{Color: col, Radius: 3.6, Shape: hollowGlyph{shape}}))
		}
		legend = append(legend, legendItem{label: s.Label, thumbs: []plot.Thumbnailer{newLine(nil, line), newScatter(nil, g)}})
	}
	if drawn == 0 {
		return Plot{}, fmt.Errorf("plot %s: no run has a value to draw", c.Name)
	}
	// Latencies, throughputs and ratios are never negative: the axis
	// starts at zero, so that a change reads at its true proportion.
	p.Y.Min = 0
	p.Y.Max = ymax * 1.08
	if !(ymax > 0) {
		p.Y.Max = 1
	}
	if anyInvalid {
		legend = append(legend, legendItem{label: "hollow: row invalid",
			thumbs: []plot.Thumbnailer{newScatter(nil, draw.GlyphStyle{Color: mutedColor, Radius: 3.6, Shape: hollowGlyph{glyphCircle}})}})
	}
	f := &figure{name: c.Name, title: c.Title, subtitle: c.Subtitle, panels: []*plot.Plot{p}, legend: legend}
	var notes []string
	if anyInvalid {
		notes = append(notes, "A hollow point is a run in which the row was invalid: its figures are not trusted (see that run's decision record).")
	}
	if left > 0 {
		notes = append(notes, fmt.Sprintf("%d more row%s not drawn (at most %d lines tell apart); choose rows with --rows.", left, numfmt.Plural(left), maxSeries))
	}
	for i, s := range notes {
		if i > 0 {
			f.note += " "
		}
		f.note += s
	}
	return f.render()
}

// trendShapes are the series' glyphs: the filled shapes only, since an
// outline means a point that is not trusted (hollowGlyph).
var trendShapes = []shapeGlyph{glyphCircle, glyphSquare, glyphTriangle, glyphDiamond, glyphTriangleDown}

// runTicks labels every run position on the x axis, or every k-th where
// more than eight would crowd: the tick labels are start times.
type runTicks []string

func (r runTicks) Ticks(lo, hi float64) []plot.Tick {
	step := (len(r) + 7) / 8
	var ts []plot.Tick
	for i := range r {
		t := plot.Tick{Value: float64(i + 1)}
		if i%step == 0 {
			t.Label = r[i]
		}
		ts = append(ts, t)
	}
	return ts
}

// hollowGlyph is a series' own shape drawn as an outline filled with
// white, so that the line through it does not show through: a point that
// is there but not trusted, still telling its row by shape and colour.
type hollowGlyph struct{ shape shapeGlyph }

func (h hollowGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	p := shapePath(h.shape, sty.Radius, pt)
	c.SetColor(color.White)
	c.Fill(p)
	c.SetLineStyle(draw.LineStyle{Color: sty.Color, Width: 1.6})
	c.Stroke(p)
}

// shapePath is the outline of one of the filled shapes, with the same
// geometry as shapeGlyph's, so that a hollow point matches its series.
func shapePath(g shapeGlyph, r vg.Length, pt vg.Point) vg.Path {
	poly := func(pts ...vg.Point) vg.Path {
		var p vg.Path
		p.Move(pts[0])
		for _, q := range pts[1:] {
			p.Line(q)
		}
		p.Close()
		return p
	}
	switch g {
	case glyphSquare:
		h := r * 0.886
		return poly(vg.Point{X: pt.X - h, Y: pt.Y - h}, vg.Point{X: pt.X + h, Y: pt.Y - h}, vg.Point{X: pt.X + h, Y: pt.Y + h}, vg.Point{X: pt.X - h, Y: pt.Y + h})
	case glyphTriangle, glyphTriangleDown:
		h := r * 1.35
		s := vg.Length(1)
		if g == glyphTriangleDown {
			s = -1
		}
		return poly(vg.Point{X: pt.X, Y: pt.Y + s*h}, vg.Point{X: pt.X - h*0.866, Y: pt.Y - s*h/2}, vg.Point{X: pt.X + h*0.866, Y: pt.Y - s*h/2})
	case glyphDiamond:
		h := r * 1.25
		return poly(vg.Point{X: pt.X, Y: pt.Y + h}, vg.Point{X: pt.X + h, Y: pt.Y}, vg.Point{X: pt.X, Y: pt.Y - h}, vg.Point{X: pt.X - h, Y: pt.Y})
	}
	var p vg.Path
	p.Move(vg.Point{X: pt.X + r, Y: pt.Y})
	p.Arc(pt, r, 0, 2*math.Pi)
	p.Close()
	return p
}
