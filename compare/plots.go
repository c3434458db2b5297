package compare

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"sort"

	"github.com/infermatrix/infermatrix/internal/textsafe"
	"github.com/infermatrix/infermatrix/metrics"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The overlays are drawn small (7 × 3.6 in at 96 dpi) since a comparison
// has one per row; base in blue, new in orange (the decision records'
// first two series colours), new dashed too, so the two stay apart in grey
// print and for colour-blind readers.
const (
	plotW, plotH = 7 * vg.Inch, 3.6 * vg.Inch
	plotDPI      = 96
	// maxCDFRows bounds the rows given CDF overlays: a sweep of fifty
	// points would make the page unreadable; the regressed rows come
	// first.
	maxCDFRows = 24
	cdfPoints  = 400
)

var (
	baseColor = color.RGBA{0x4E, 0x79, 0xA7, 0xFF}
	newColor  = color.RGBA{0xF2, 0x8E, 0x2B, 0xFF}
	gridColor = color.RGBA{0xE4, 0xE4, 0xE4, 0xFF}
)

// Figure is one rendered overlay.
type Figure struct {
	Title string
	PNG   []byte
}

// Figures draws the overlays: for each swept row, latency against output
// throughput of both runs' points on one chart (TTFT p95 and TPOT p95);
// for each compared row, the TTFT and TPOT CDFs of both runs.
func (c *Comparison) Figures() ([]Figure, error) {
	var out []Figure
	for _, base := range c.sweeps() {
		for _, m := range []struct {
			key, label string
			get        func(*metrics.RowSummary) float64
		}{
			{"tpot.p95", "TPOT p95 (ms)", func(rs *metrics.RowSummary) float64 { return rs.Metrics.TPOT.P95 }},
			{"ttft.p95", "TTFT p95 (ms)", func(rs *metrics.RowSummary) float64 { return rs.Metrics.TTFT.P95 }},
		} {
			f, err := c.sweepFigure(base, m.key, m.label, m.get)
			if err != nil {
				return nil, err
			}
			if f != nil {
				out = append(out, *f)
			}
		}
	}
	for _, id := range c.cdfRows() {
		s := c.samples[id]
		for _, m := range []struct{ name, label string }{{"ttft", "TTFT (ms)"}, {"tpot", "TPOT (ms)"}} {
			bv, nv := s.base.Metrics.TTFT.Values(), s.new.Metrics.TTFT.Values()
			if m.name == "tpot" {
				bv, nv = s.base.Metrics.TPOT.Values(), s.new.Metrics.TPOT.Values()
			}
			if len(bv) == 0 || len(nv) == 0 {
				continue
			}
			f, err := cdfFigure(fmt.Sprintf("%s CDF: %s", m.name, id), m.label, bv, nv)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		}
	}
	return out, nil
}

// sweeps lists the swept rows' ids as written, in the new run's order.
func (c *Comparison) sweeps() []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range c.new.Manifest.Rows {
		if len(r.SweepPoint) > 0 && !seen[r.Base] {
			seen[r.Base] = true
			out = append(out, r.Base)
		}
	}
	return out
}

// cdfRows are the compared rows that get CDFs: rows with a regression
// first, then the others in order, at most maxCDFRows.
func (c *Comparison) cdfRows() []string {
	regressed := map[string]bool{}
	for _, f := range c.Regressions {
		regressed[f.Row] = true
	}
	var first, rest []string
	for _, rc := range c.Rows {
		if _, ok := c.samples[rc.ID]; !ok {
			continue
		}
		if regressed[rc.ID] {
			first = append(first, rc.ID)
		} else {
			rest = append(rest, rc.ID)
		}
	}
	out := append(first, rest...)
	if len(out) > maxCDFRows {
		out = out[:maxCDFRows]
	}
	return out
}

// sweepPoints are one run's points of a sweep, by output throughput.
func sweepPoints(r *Run, base string, get func(*metrics.RowSummary) float64) plotter.XYs {
	var xys plotter.XYs
	for _, pr := range r.Manifest.Rows {
		if pr.Base != base || len(pr.SweepPoint) == 0 {
			continue
		}
		rs := r.Summary.Row(pr.ID)
		if rs == nil || rs.Status != metrics.RowComplete {
			continue
		}
		x, y := rs.Throughput.OutputTokensPerS, get(rs)
		if x > 0 && y > 0 && !math.IsInf(y, 0) && !math.IsNaN(y) {
			xys = append(xys, plotter.XY{X: x, Y: y})
		}
	}
	sort.Slice(xys, func(i, j int) bool { return xys[i].X < xys[j].X })
	return xys
}

func (c *Comparison) sweepFigure(base, key, label string, get func(*metrics.RowSummary) float64) (*Figure, error) {
	b, n := sweepPoints(c.base, base, get), sweepPoints(c.new, base, get)
	if len(b) == 0 || len(n) == 0 {
		return nil, nil
	}
	title := fmt.Sprintf("%s against output throughput: %s", key, base)
	p := newPlot(title, "output throughput (tok/s)", label)
	p.Legend.Top, p.Legend.Left = true, true // latency rises to the right
	if err := addSeries(p, b, n); err != nil {
		return nil, err
	}
	png, err := renderPNG(p)
	if err != nil {
		return nil, err
	}
	return &Figure{Title: title, PNG: png}, nil
}

// cdfFigure overlays two empirical CDFs.
func cdfFigure(title, label string, base, new []float64) (Figure, error) {
	p := newPlot(title, label, "requests at or below (%)") // legend bottom right, below the curves' tops
	if err := addSeries(p, ecdf(base), ecdf(new)); err != nil {
		return Figure{}, err
	}
	p.Y.Min, p.Y.Max = 0, 100
	png, err := renderPNG(p)
	if err != nil {
		return Figure{}, err
	}
	return Figure{Title: title, PNG: png}, nil
}

// ecdf is the empirical CDF of sorted values through at most cdfPoints
// order statistics.
func ecdf(sorted []float64) plotter.XYs {
	n := len(sorted)
	k := min(n, cdfPoints)
	xys := make(plotter.XYs, 0, k)
	for j := range k {
		i := j
		if n > cdfPoints {
			i = int(math.Round(float64(j) * float64(n-1) / float64(cdfPoints-1)))
		}
		xys = append(xys, plotter.XY{X: sorted[i], Y: 100 * float64(i+1) / float64(n)})
	}
	return xys
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = textsafe.TerminalLine(title)
	p.Title.TextStyle.Font = font.From(font.Font{Typeface: "Liberation", Variant: "Sans", Weight: 700}, 11)
	p.X.Label.Text, p.Y.Label.Text = x, y
	// Liberation Sans, as the decision records' charts: gonum/plot embeds
	// it, so the PNG looks the same on every machine.
	sans := font.Font{Typeface: "Liberation", Variant: "Sans"}
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, 10)
		a.Tick.Label.Font = font.From(sans, 9)
	}
	p.Legend.TextStyle.Font = font.From(sans, 10)
	g := plotter.NewGrid()
	g.Vertical.Color, g.Horizontal.Color = gridColor, gridColor
	p.Add(g)
	return p
}

func addSeries(p *plot.Plot, base, new plotter.XYs) error {
	for i, s := range []struct {
		name string
		xys  plotter.XYs
		c    color.Color
		dash []vg.Length
	}{{"base", base, baseColor, nil}, {"new", new, newColor, []vg.Length{vg.Points(5), vg.Points(3)}}} {
		l, pts, err := plotter.NewLinePoints(s.xys)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		l.Color, l.Width, l.Dashes = s.c, vg.Points(1.6), s.dash
		pts.Color = s.c
		pts.Shape = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}}[i]
		pts.Radius = vg.Points(2)
		if len(s.xys) > 40 {
			pts.Radius = 0
		}
		p.Add(l, pts)
		p.Legend.Add(s.name, l, pts)
	}
	return nil
}

// renderPNG draws p; gonum/plot panics on some inputs, which becomes an
// error.
func renderPNG(p *plot.Plot) (b []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("plot %s: %v", p.Title.Text, r)
		}
	}()
	img := vgimg.NewWith(vgimg.UseWH(plotW, plotH), vgimg.UseDPI(plotDPI), vgimg.UseBackgroundColor(color.White))
	p.Draw(draw.New(img))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("plot %s: png: %w", p.Title.Text, err)
	}
	return buf.Bytes(), nil
}
