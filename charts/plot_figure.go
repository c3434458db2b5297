package charts

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	imagepng "image/png"
	"math"
	"strconv"
	"strings"
	"sync"

	"git.sr.ht/~sbinet/gg"
	"github.com/infermatrix/infermatrix/internal/textsafe"
	xfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Every plot is 8 × 5 in; its PNG is drawn at 120 dpi (960 × 600 px), a
// size that reads well on a screen and in a pull request.
const (
	plotWidth  = 8 * vg.Inch
	plotHeight = 5 * vg.Inch
	plotDPI    = 120
)

// The fonts: Liberation Sans, which gonum/plot embeds, so the PNG looks
// the same on every machine. The SVG names it with metric-compatible
// fallbacks (see svgFonts).
var (
	sansFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	boldFont = font.Font{Typeface: "Liberation", Variant: "Sans", Weight: xfont.WeightBold}
)

// Colours. The series palette is Tableau 10 with its yellow and grey
// darkened to read as lines on white; ink and the greys are for text,
// axes and grid.
var (
	seriesPalette = []color.Color{
		rgb(0x4E79A7), rgb(0xF28E2B), rgb(0xE15759), rgb(0x76B7B2), rgb(0x59A14F),
		rgb(0xB6992D), rgb(0xB07AA1), rgb(0xFF9DA7), rgb(0x9C755F), rgb(0x79706E),
	}
	inkColor   = rgb(0x222222)
	mutedColor = rgb(0x666666)
	gridColor  = rgb(0xE4E4E4)
	sloColor   = rgb(0xC62828)
	kneeColor  = rgb(0xE8590C)
	opColor    = rgb(0x2B8A3E)
)

// seriesGlyphs give each series a shape as well as a colour, so that
// points stay apart in grey print and for colour-blind readers.
var seriesGlyphs = []draw.GlyphDrawer{
	shapeGlyph(glyphCircle), shapeGlyph(glyphSquare), shapeGlyph(glyphTriangle), shapeGlyph(glyphDiamond),
	shapeGlyph(glyphTriangleDown), shapeGlyph(glyphRing), shapeGlyph(glyphOpenSquare), shapeGlyph(glyphCross),
}

// shapeGlyph draws filled shapes of about the same area as a circle of
// the glyph's radius, and outlines thick enough to see (gonum's own
// outlines are half a point wide).
type shapeGlyph int

const (
	glyphCircle shapeGlyph = iota
	glyphSquare
	glyphTriangle
	glyphDiamond
	glyphTriangleDown
	glyphRing
	glyphOpenSquare
	glyphCross
)

func (g shapeGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	r := sty.Radius
	outline := draw.LineStyle{Color: sty.Color, Width: max(1.1, r/3)}
	switch g {
	case glyphRing:
		c.SetLineStyle(outline)
		c.Stroke(shapePath(glyphCircle, r, pt))
	case glyphOpenSquare:
		c.SetLineStyle(outline)
		c.Stroke(shapePath(glyphSquare, r, pt))
	case glyphCross:
		c.SetLineStyle(outline)
		h := r * 1.1
		var p vg.Path
		p.Move(vg.Point{X: pt.X - h, Y: pt.Y - h})
		p.Line(vg.Point{X: pt.X + h, Y: pt.Y + h})
		p.Move(vg.Point{X: pt.X - h, Y: pt.Y + h})
		p.Line(vg.Point{X: pt.X + h, Y: pt.Y - h})
		c.Stroke(p)
	default:
		c.Fill(shapePath(g, r, pt))
	}
}

// maxSeries bounds the rows one chart draws a series for: more lines than
// distinct colours cannot be told apart.
var maxSeries = len(seriesPalette)

func rgb(v uint32) color.Color {
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 0xFF}
}

// faded returns c with opacity a (0–255), for dense scatters.
func faded(c color.Color, a uint8) color.Color {
	r, g, b, _ := c.RGBA()
	return color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: a}
}

func seriesColor(i int) color.Color      { return seriesPalette[i%len(seriesPalette)] }
func seriesGlyph(i int) draw.GlyphDrawer { return seriesGlyphs[i%len(seriesGlyphs)] }
func textStyle(f font.Font, size vg.Length, c color.Color) text.Style {
	return text.Style{Color: c, Font: font.From(f, size), Handler: plot.DefaultTextHandler}
}

// figure is one chart: a title, an optional subtitle and footnote, one or
// more panels and a legend kept outside the data.
type figure struct {
	name     string
	title    string
	subtitle string // grey, under the title; wrapped to two lines at most
	note     string // grey, at the bottom left
	panels   []*plot.Plot
	stack    bool // panels top to bottom rather than side by side
	// height overrides plotHeight, for a stack of panels too many to
	// read at the usual height; the width never changes, so every chart
	// shows at the same scale beside the others.
	height vg.Length
	legend []legendItem
	// legendBelow puts the legend in rows under the panels rather than in
	// a column to their right.
	legendBelow bool
}

// legendItem is one legend entry: a label and the thumbnails drawn
// beside it.
type legendItem struct {
	label  string
	thumbs []plot.Thumbnailer
}

// Layout lengths.
const (
	figMargin    = vg.Length(12)
	legendThumb  = vg.Length(22)
	legendGap    = vg.Length(6)
	legendRowGap = vg.Length(4)
	maxLabelLen  = 34
)

var (
	titleStyle    = textStyle(boldFont, 14, inkColor)
	subtitleStyle = textStyle(sansFont, 9.5, mutedColor)
	noteStyle     = textStyle(sansFont, 8.5, mutedColor)
	legendStyle   = textStyle(sansFont, 9.5, inkColor)
	pointStyle    = textStyle(sansFont, 8.5, rgb(0x333333))
)

// render draws the figure as PNG and SVG. gonum/plot panics on some
// inputs (a log axis over zero, say); the data is cleaned before it gets
// here, and a panic that still happens becomes an error.
func (f *figure) render() (p Plot, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("plot %s: %v", f.name, r)
		}
	}()
	h := plotHeight
	if f.height > 0 {
		h = f.height
	}
	img, rgba := pngCanvas(plotWidth, h)
	defer canvases.Put(rgba)
	f.draw(draw.New(safeText{img}), false)
	var png bytes.Buffer
	if err := encodePNG(&png, rgba); err != nil {
		return Plot{}, fmt.Errorf("plot %s: png: %w", f.name, err)
	}
	svg := vgsvg.New(plotWidth, h)
	f.draw(draw.New(safeText{svg}), true)
	var sb bytes.Buffer
	if _, err := svg.WriteTo(&sb); err != nil {
		return Plot{}, fmt.Errorf("plot %s: svg: %w", f.name, err)
	}
	return Plot{Name: f.name, Title: f.title, PNG: png.Bytes(), SVG: svgFonts(sb.Bytes())}, nil
}

// canvases keeps the images the PNGs are drawn on, for the next figure.
// A figure at 120 dpi is a 2.3 MB image, and vgimg.NewWith makes one and
// then a copy of it (gg.NewContextForImage): drawing a run's figures on
// fresh memory cost more in page faults than the drawing did on a
// virtual machine (issue 16).
var canvases sync.Pool

// pngCanvas is a white canvas of w × h at plotDPI, and the image under it
// to give back to canvases once it is encoded.
func pngCanvas(w, h vg.Length) (*vgimg.Canvas, *image.RGBA) {
	rect := image.Rect(0, 0, int(w/vg.Inch*plotDPI+0.5), int(h/vg.Inch*plotDPI+0.5))
	rgba, _ := canvases.Get().(*image.RGBA)
	if rgba == nil || rgba.Rect != rect {
		rgba = image.NewRGBA(rect)
	}
	// As vgimg.NewWith sets up a context of its own, without the copy.
	ctx := gg.NewContextForRGBA(rgba)
	ctx.SetLineCapButt()
	ctx.InvertY()
	// NewWith paints the whole image white first.
	return vgimg.NewWith(vgimg.UseImageWithContext(rgba, ctx), vgimg.UseDPI(plotDPI)), rgba
}

// pngEncoder compresses the PNGs encodePNG leaves to image/png at flate's
// fastest level. The default level took 2.4 times as long for files 3%
// smaller, and was a fifth of what a small run's reports cost (issue 16);
// the pixels are the same.
var pngEncoder = imagepng.Encoder{CompressionLevel: imagepng.BestSpeed}

// safeText draws every label without control characters or escape
// sequences (textsafe.TerminalLine). Labels carry row ids and titles from
// the experiment; an SVG holding a control character is not XML, and the
// plot would not show at all. vgsvg escapes <, > and & itself.
type safeText struct{ vg.CanvasSizer }

func (c safeText) FillString(f font.Face, pt vg.Point, s string) {
	c.CanvasSizer.FillString(f, pt, textsafe.TerminalLine(s))
}

// svgFonts gives the SVG's font family fallbacks. vgsvg names Liberation
// Sans alone, which a viewer without it replaces with its default serif;
// Arial and Helvetica have the same metrics, so the layout computed with
// Liberation's holds.
func svgFonts(b []byte) []byte {
	return bytes.ReplaceAll(b, []byte("font-family:Liberation Sans;"),
		[]byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;"))
}

// draw lays the figure out on c, painting it white first where blank is
// false (pngCanvas's images are white already, and the rasterizer paints
// a rectangle a pixel at a time).
func (f *figure) draw(c draw.Canvas, blank bool) {
	if blank {
		c.SetColor(color.White)
		c.Fill(c.Rectangle.Path())
	}
	area := draw.Crop(c, figMargin, -figMargin, figMargin, -figMargin)

	ts := titleStyle
	ts.XAlign, ts.YAlign = draw.XCenter, draw.YTop
	area.FillText(ts, vg.Point{X: area.Center().X, Y: area.Max.Y}, f.title)
	area.Max.Y -= ts.Height(f.title) + 5
	if f.subtitle != "" {
		ss := subtitleStyle
		ss.XAlign, ss.YAlign = draw.XCenter, draw.YTop
		sub := strings.Join(wrapText(f.subtitle, ss, area.Max.X-area.Min.X, 2), "\n")
		area.FillText(ss, vg.Point{X: area.Center().X, Y: area.Max.Y}, sub)
		area.Max.Y -= ss.Height(sub) + 6
	}
	area.Max.Y -= 4
	if f.note != "" {
		ns := noteStyle
		ns.XAlign, ns.YAlign = draw.XLeft, draw.YBottom
		note := strings.Join(wrapText(f.note, ns, area.Max.X-area.Min.X, 2), "\n")
		area.FillText(ns, vg.Point{X: area.Min.X, Y: area.Min.Y}, note)
		area.Min.Y += ns.Height(note) + 6
	}
	if len(f.legend) > 0 {
		if f.legendBelow {
			h := f.drawLegendRows(area)
			area.Min.Y += h + 10
		} else {
			w := f.legendWidth()
			col := area
			col.Min.X = area.Max.X - w
			// Start the column level with the top of the data, under any
			// panel title.
			if len(f.panels) > 0 && f.panels[0].Title.Text != "" {
				t := f.panels[0].Title
				col.Max.Y -= t.TextStyle.Height(t.Text) + t.Padding
			}
			f.drawLegendColumn(col)
			area.Max.X -= w + 14
		}
	}
	if len(f.panels) == 0 {
		return
	}
	var grid [][]*plot.Plot
	tiles := draw.Tiles{PadX: vg.Length(28), PadY: vg.Length(14)}
	if f.stack {
		for _, p := range f.panels {
			grid = append(grid, []*plot.Plot{p})
		}
		tiles.Rows, tiles.Cols = len(f.panels), 1
	} else {
		grid = [][]*plot.Plot{f.panels}
		tiles.Rows, tiles.Cols = 1, len(f.panels)
	}
	canvases := plot.Align(grid, tiles, area)
	for i, row := range grid {
		for j, p := range row {
			p.Draw(canvases[i][j])
		}
	}
}

// legendLabel shortens a label that would crowd out the chart.
func legendLabel(s string) string {
	if r := []rune(s); len(r) > maxLabelLen {
		return string(r[:maxLabelLen-1]) + "…"
	}
	return s
}

func (f *figure) legendWidth() vg.Length {
	var w vg.Length
	for _, it := range f.legend {
		w = max(w, legendStyle.Width(legendLabel(it.label)))
	}
	return legendThumb + legendGap + w
}

func legendEntryHeight() vg.Length {
	return legendStyle.Height("Ag") + legendRowGap
}

// drawLegendItem draws one entry with its top left corner at (x, top).
func drawLegendItem(c draw.Canvas, x, top vg.Length, it legendItem) {
	h := legendStyle.Height("Ag")
	thumb := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
		Min: vg.Point{X: x, Y: top - h},
		Max: vg.Point{X: x + legendThumb, Y: top},
	}}
	for _, t := range it.thumbs {
		t.Thumbnail(&thumb)
	}
	ls := legendStyle
	ls.XAlign, ls.YAlign = draw.XLeft, draw.YCenter
	c.FillText(ls, vg.Point{X: x + legendThumb + legendGap, Y: top - h/2}, legendLabel(it.label))
}

func (f *figure) drawLegendColumn(c draw.Canvas) {
	y := c.Max.Y
	for _, it := range f.legend {
		drawLegendItem(c, c.Min.X, y, it)
		y -= legendEntryHeight()
	}
}

// drawLegendRows lays the legend out in centred rows along the bottom of
// c and returns the height it took.
func (f *figure) drawLegendRows(c draw.Canvas) vg.Length {
	const sep = vg.Length(18)
	avail := c.Max.X - c.Min.X
	var rows [][]int
	var widths []vg.Length
	var cur []int
	var curW vg.Length
	for i, it := range f.legend {
		w := legendThumb + legendGap + legendStyle.Width(legendLabel(it.label))
		if len(cur) > 0 && curW+sep+w > avail {
			rows, widths = append(rows, cur), append(widths, curW)
			cur, curW = nil, 0
		}
		if len(cur) > 0 {
			curW += sep
		}
		cur, curW = append(cur, i), curW+w
	}
	rows, widths = append(rows, cur), append(widths, curW)
	eh := legendEntryHeight()
	height := eh*vg.Length(len(rows)) - legendRowGap
	top := c.Min.Y + height
	for r, idx := range rows {
		x := c.Center().X - widths[r]/2
		for _, i := range idx {
			it := f.legend[i]
			drawLegendItem(c, x, top, it)
			x += legendThumb + legendGap + legendStyle.Width(legendLabel(it.label)) + sep
		}
		top -= eh
	}
	return height
}

// wrapText breaks s into lines no wider than w, at most n of them, the
// last ending in an ellipsis when the text does not fit.
func wrapText(s string, sty text.Style, w vg.Length, n int) []string {
	var lines []string
	line := ""
	words := strings.Fields(s)
	for i, word := range words {
		next := word
		if line != "" {
			next = line + " " + word
		}
		if line == "" || sty.Width(next) <= w {
			line = next
			continue
		}
		if len(lines) == n-1 {
			rest := strings.Join(words[i:], " ")
			lines = append(lines, fitEllipsis(line+" "+rest, sty, w))
			return lines
		}
		lines = append(lines, line)
		line = word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// fitEllipsis cuts s to fit w with a trailing ellipsis.
func fitEllipsis(s string, sty text.Style, w vg.Length) string {
	if sty.Width(s) <= w {
		return s
	}
	r := []rune(s)
	for len(r) > 1 && sty.Width(string(r)+"…") > w {
		r = r[:len(r)-1]
	}
	return strings.TrimRight(string(r), " ") + "…"
}

// newPanel returns a plot styled like every other: sans fonts, grey
// grid, muted axes.
func newPanel(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	// A panel lies on its figure's white: filling it white again ran the
	// rasterizer over every pixel of it for nothing.
	p.BackgroundColor = nil
	p.Title.Text = title
	p.Title.TextStyle.Font = font.From(boldFont, 11)
	p.Title.TextStyle.Color = inkColor
	p.Title.Padding = 6
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sansFont, 10)
		a.Label.TextStyle.Color = inkColor
		a.Tick.Label.Font = font.From(sansFont, 9)
		a.Tick.Label.Color = mutedColor
		a.Color = mutedColor
		a.Tick.Color = mutedColor
		a.Tick.Length = 4
		a.Padding = 4
		a.Tick.Marker = numberTicks{}
	}
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.X.Label.Padding = 4
	p.Y.Label.Padding = 4
	g := plotter.NewGrid()
	g.Vertical = draw.LineStyle{Color: gridColor, Width: 0.6}
	g.Horizontal = draw.LineStyle{Color: gridColor, Width: 0.6}
	p.Add(g)
	return p
}

// numberTicks put about five labelled ticks at round numbers (1, 2 or 5
// times a power of ten) with unlabelled ones between, and write
// their labels short: 12k rather than 12000, no trailing zeros. gonum's
// default asks for three, too few to read values off.
type numberTicks struct{}

func (numberTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || !isFinite(lo, hi) {
		return nil
	}
	raw := (hi - lo) / 5
	mag := math.Pow10(int(math.Floor(math.Log10(raw))))
	// The round step nearest the raw one, in ratio.
	var step, minor float64
	for _, m := range []struct{ major, minor float64 }{{1, 0.2}, {2, 0.5}, {5, 1}, {10, 2}} {
		if step == 0 || math.Abs(math.Log(m.major*mag/raw)) < math.Abs(math.Log(step/raw)) {
			step, minor = m.major*mag, m.minor*mag
		}
	}
	var ts []plot.Tick
	first := math.Ceil(lo/minor-1e-9) * minor
	for k := 0; ; k++ {
		v := first + float64(k)*minor
		if v > hi+minor*1e-9 {
			break
		}
		t := plot.Tick{Value: v}
		if r := v / step; math.Abs(r-math.Round(r)) < 1e-6 {
			t.Value = math.Round(r) * step
			t.Label = formatTick(t.Value, step, hi >= 10000 && step >= 1000)
		}
		ts = append(ts, t)
	}
	return ts
}

// formatTick writes v with as many decimals as the tick step needs, in
// thousands ("12k") when kilo is set.
func formatTick(v, step float64, kilo bool) string {
	if v == 0 {
		return "0"
	}
	if kilo {
		return strconv.FormatFloat(math.Round(v/100)/10, 'f', -1, 64) + "k"
	}
	if step <= 0 {
		return strconv.FormatFloat(v, 'g', 6, 64)
	}
	dec := 0
	for ; dec < 8; dec++ {
		s := step * math.Pow10(dec)
		if math.Abs(s-math.Round(s)) < 1e-6*s {
			break
		}
	}
	return strconv.FormatFloat(v, 'f', dec, 64)
}

// logTicks label a log axis at 1, 2 and 5 times each power of ten (only
// the powers over more than three decades), with minor ticks between.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return nil
	}
	first, last := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	wide := last-first > 3
	var ts []plot.Tick
	for e := first; e <= last; e++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow10(e)
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || (!wide && (m == 2 || m == 5)) {
				t.Label = strconv.FormatFloat(v, 'f', max(0, -e), 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// lineStyle is a series line.
func lineStyle(c color.Color, width vg.Length, dashes ...vg.Length) draw.LineStyle {
	return draw.LineStyle{Color: c, Width: width, Dashes: dashes}
}

// newLine is a line through xys, which must be clean (finite).
func newLine(xys plotter.XYs, sty draw.LineStyle) *plotter.Line {
	return &plotter.Line{XYs: xys, LineStyle: sty}
}

// newScatter is a scatter of xys with one glyph style.
func newScatter(xys plotter.XYs, g draw.GlyphStyle) *plotter.Scatter {
	return &plotter.Scatter{XYs: xys, GlyphStyle: g}
}

// hline is a horizontal reference line across the panel (an SLO, a
// percentile), optionally labelled at its left end. It widens the y range
// to include itself but leaves the x range to the data.
type hline struct {
	y     float64
	style draw.LineStyle
	label string
	color color.Color
}

func (h *hline) Plot(c draw.Canvas, p *plot.Plot) {
	_, trY := p.Transforms(&c)
	y := trY(h.y)
	if h.style.Width > 0 {
		c.StrokeLine2(h.style, c.Min.X, y, c.Max.X, y)
	}
	if h.label != "" {
		ls := pointStyle
		ls.Color = h.color
		ls.XAlign, ls.YAlign = draw.XLeft, draw.YBottom
		c.FillText(ls, vg.Point{X: c.Min.X + 3, Y: y + 2}, h.label)
	}
}

func (h *hline) DataRange() (xmin, xmax, ymin, ymax float64) {
	return math.Inf(1), math.Inf(-1), h.y, h.y
}

func (h *hline) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(h.style, c.Min.X, y, c.Max.X, y)
}

// diagonal is the line y = x across the panel.
type diagonal struct {
	style draw.LineStyle
}

func (d *diagonal) Plot(c draw.Canvas, p *plot.Plot) {
	lo, hi := math.Max(p.X.Min, p.Y.Min), math.Min(p.X.Max, p.Y.Max)
	if hi <= lo {
		return
	}
	trX, trY := p.Transforms(&c)
	c.StrokeLines(d.style, c.ClipLinesXY([]vg.Point{{X: trX(lo), Y: trY(lo)}, {X: trX(hi), Y: trY(hi)}})...)
}

func (d *diagonal) Thumbnail(c *draw.Canvas) {
	c.StrokeLine2(d.style, c.Min.X, c.Min.Y+2, c.Max.X, c.Max.Y-2)
}

// markGlyph is a thick outline around a point, to mark the knee (a
// circle) or the operating point (a square); gonum's outlines are too
// thin to see on top of a series.
type markGlyph struct {
	square bool
}

func (m markGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	c.SetLineStyle(draw.LineStyle{Color: sty.Color, Width: 1.8})
	r := sty.Radius
	var p vg.Path
	if m.square {
		p.Move(vg.Point{X: pt.X - r, Y: pt.Y - r})
		p.Line(vg.Point{X: pt.X + r, Y: pt.Y - r})
		p.Line(vg.Point{X: pt.X + r, Y: pt.Y + r})
		p.Line(vg.Point{X: pt.X - r, Y: pt.Y + r})
	} else {
		p.Move(vg.Point{X: pt.X + r, Y: pt.Y})
		p.Arc(pt, r, 0, 2*math.Pi)
	}
	p.Close()
	c.Stroke(p)
}

// pointLabels writes a label beside each point, choosing for each the
// first of eight places around it that neither leaves the data area nor
// covers a point, a line or an earlier label; where none is free, the
// least crowded. A label that would cover an earlier one wherever it
// went is left out: text over text reads as neither. The choice is made
// in drawing coordinates, so it holds at any size, and in a fixed order
// (the labels marked first, then the rest, each in their order), so it is
// the same every time.
type pointLabels struct {
	xys    plotter.XYs
	labels []string
	// first marks labels placed before the others, so that they keep
	// their place in a crowd.
	first []bool
	style text.Style
	// avoid are further things no label may cover.
	avoid []obstacle
}

// obstacle is something drawn that labels keep off: points (with room
// pad around each), or a polyline through them when joined, or
// horizontal lines across the panel at ys.
type obstacle struct {
	xys    plotter.XYs
	pad    vg.Length
	joined bool
	ys     []float64
}

func (l *pointLabels) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	const gap, pointPad = vg.Length(5), vg.Length(4)
	at := func(xy plotter.XY) vg.Point { return vg.Point{X: trX(xy.X), Y: trY(xy.Y)} }
	around := func(pt vg.Point, pad vg.Length) vg.Rectangle {
		return vg.Rectangle{Min: vg.Point{X: pt.X - pad, Y: pt.Y - pad}, Max: vg.Point{X: pt.X + pad, Y: pt.Y + pad}}
	}
	var taken []vg.Rectangle
	for _, o := range l.avoid {
		for i, xy := range o.xys {
			pt := at(xy)
			taken = append(taken, around(pt, o.pad))
			if !o.joined || i == 0 {
				continue
			}
			// Boxes every few points along the segment from the last
			// point.
			prev := at(o.xys[i-1])
			d := vg.Length(math.Hypot(float64(pt.X-prev.X), float64(pt.Y-prev.Y)))
			for k := vg.Length(3); k < d; k += 3 {
				f := k / d
				taken = append(taken, around(vg.Point{X: prev.X + f*(pt.X-prev.X), Y: prev.Y + f*(pt.Y-prev.Y)}, 1.5))
			}
		}
		for _, y := range o.ys {
			y := trY(y)
			taken = append(taken, vg.Rectangle{Min: vg.Point{X: c.Min.X, Y: y - 1.5}, Max: vg.Point{X: c.Max.X, Y: y + 1.5}})
		}
	}
	own := make([]vg.Rectangle, len(l.xys))
	for i, xy := range l.xys {
		own[i] = around(at(xy), pointPad)
		taken = append(taken, own[i])
	}
	type place struct {
		xa     text.XAlignment
		ya     text.YAlignment
		dx, dy vg.Length
	}
	d := gap * 0.75
	places := []place{
		{draw.XLeft, draw.YCenter, gap, 0},   // right
		{draw.XLeft, draw.YBottom, d, d},     // upper right
		{draw.XLeft, draw.YTop, d, -d},       // lower right
		{draw.XCenter, draw.YBottom, 0, gap}, // above
		{draw.XCenter, draw.YTop, 0, -gap},   // below
		{draw.XRight, draw.YCenter, -gap, 0}, // left
		{draw.XRight, draw.YBottom, -d, d},   // upper left
		{draw.XRight, draw.YTop, -d, -d},     // lower left
	}
	order := make([]int, 0, len(l.labels))
	for pass := range 2 {
		for i := range l.labels {
			if (i < len(l.first) && l.first[i]) == (pass == 0) {
				order = append(order, i)
			}
		}
	}
	var written []vg.Rectangle
	for _, i := range order {
		s := l.labels[i]
		if s == "" {
			continue
		}
		pt := at(l.xys[i])
		best, bestScore, bestOnText := 0, vg.Length(math.Inf(1)), vg.Length(0)
		var bestRect vg.Rectangle
		for k, pl := range places {
			sty := l.style
			sty.XAlign, sty.YAlign = pl.xa, pl.ya
			r := sty.Rectangle(s).Add(vg.Point{X: pt.X + pl.dx, Y: pt.Y + pl.dy})
			score := outside(r, c.Rectangle) * 10
			for _, t := range taken {
				if t != own[i] {
					score += overlap(r, t)
				}
			}
			var onText vg.Length
			for _, t := range written {
				onText += overlap(r, t)
			}
			score += 5 * onText
			if score < bestScore {
				best, bestScore, bestOnText, bestRect = k, score, onText, r
			}
			if score == 0 {
				break
			}
		}
		if bestOnText > 0 {
			continue
		}
		sty := l.style
		sty.XAlign, sty.YAlign = places[best].xa, places[best].ya
		c.FillText(sty, vg.Point{X: pt.X + places[best].dx, Y: pt.Y + places[best].dy}, s)
		taken = append(taken, bestRect)
		written = append(written, bestRect)
	}
}

// GlyphBoxes reserve room for half a label's height around each point,
// so that a label beside the top or bottom point fits in the data area.
func (l *pointLabels) GlyphBoxes(p *plot.Plot) []plot.GlyphBox {
	h := l.style.Height("Ag")/2 + 2
	bs := make([]plot.GlyphBox, len(l.xys))
	for i, xy := range l.xys {
		bs[i] = plot.GlyphBox{X: p.X.Norm(xy.X), Y: p.Y.Norm(xy.Y),
			Rectangle: vg.Rectangle{Min: vg.Point{X: -4, Y: -h}, Max: vg.Point{X: 4, Y: h}}}
	}
	return bs
}

// overlap is the area two rectangles share.
func overlap(a, b vg.Rectangle) vg.Length {
	w := min(a.Max.X, b.Max.X) - max(a.Min.X, b.Min.X)
	h := min(a.Max.Y, b.Max.Y) - max(a.Min.Y, b.Min.Y)
	if w <= 0 || h <= 0 {
		return 0
	}
	return w * h
}

// outside is the area of a that lies outside b.
func outside(a, b vg.Rectangle) vg.Length {
	return (a.Max.X-a.Min.X)*(a.Max.Y-a.Min.Y) - overlap(a, b)
}

// unlabelledTicks keeps a ticker's ticks, and so the grid lines they
// draw, without their labels: for the upper panels of a stack sharing
// one x axis, where the bottom panel's labels serve all.
type unlabelledTicks struct{ plot.Ticker }

func (u unlabelledTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := u.Ticker.Ticks(lo, hi)
	for i := range ts {
		ts[i].Label = ""
	}
	return ts
}

// xBand shades the panel's full height between two x values (a phase of
// a row: warmup, drain). It leaves the axis ranges to the data.
type xBand struct {
	x0, x1 float64
	color  color.Color
}

func (b *xBand) Plot(c draw.Canvas, p *plot.Plot) {
	lo, hi := math.Max(b.x0, p.X.Min), math.Min(b.x1, p.X.Max)
	if !(hi > lo) {
		return
	}
	trX, _ := p.Transforms(&c)
	r := vg.Rectangle{Min: vg.Point{X: trX(lo), Y: c.Min.Y}, Max: vg.Point{X: trX(hi), Y: c.Max.Y}}
	c.SetColor(b.color)
	c.Fill(r.Path())
}

// swatch is a legend thumbnail: a filled box of a band's colour.
type swatch struct{ color color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	r := vg.Rectangle{Min: vg.Point{X: c.Min.X + 2, Y: c.Min.Y + 1}, Max: vg.Point{X: c.Max.X - 2, Y: c.Max.Y - 1}}
	c.SetColor(s.color)
	c.Fill(r.Path())
}

// vline is a vertical reference line at x across the panel (an edge of
// the measured window). It leaves the axis ranges to the data.
type vline struct {
	x     float64
	style draw.LineStyle
}

func (v *vline) Plot(c draw.Canvas, p *plot.Plot) {
	if v.x < p.X.Min || v.x > p.X.Max {
		return
	}
	trX, _ := p.Transforms(&c)
	x := trX(v.x)
	c.StrokeLine2(v.style, x, c.Min.Y, x, c.Max.Y)
}

func (v *vline) Thumbnail(c *draw.Canvas) {
	x := c.Center().X
	c.StrokeLine2(v.style, x, c.Min.Y, x, c.Max.Y)
}
