package charts

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/plot/vg/draw"
)

// TestEncodePNGKeepsEveryPixel: what encodePNG writes decodes, with
// image/png, to the very pixels drawn: for a plot, for an opaque image of
// random colours, and for one with transparency (which it leaves to
// image/png).
func TestEncodePNGKeepsEveryPixel(t *testing.T) {
	plot, rgba := pngCanvas(plotWidth, plotHeight)
	figs, err := plotFigures(plotInput())
	if err != nil || len(figs) == 0 {
		t.Fatalf("no figure to draw: %v", err)
	}
	figs[0].draw(draw.New(safeText{plot}), false)

	r := rand.New(rand.NewPCG(1, 2))
	noise := image.NewRGBA(image.Rect(0, 0, 37, 11))
	seeThrough := image.NewRGBA(image.Rect(0, 0, 5, 3))
	for i := range noise.Pix {
		noise.Pix[i] = byte(r.IntN(256))
		if i%4 == 3 {
			noise.Pix[i] = 0xff
		}
	}
	seeThrough.Set(2, 1, color.NRGBA{R: 200, A: 100})

	for name, img := range map[string]*image.RGBA{"plot": rgba, "noise": noise, "transparent": seeThrough} {
		var buf bytes.Buffer
		if err := encodePNG(&buf, img); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := png.Decode(&buf)
		if err != nil {
			t.Fatalf("%s: decode: %v", name, err)
		}
		if got.Bounds() != img.Bounds() {
			t.Fatalf("%s: bounds %v, want %v", name, got.Bounds(), img.Bounds())
		}
		for y := img.Rect.Min.Y; y < img.Rect.Max.Y; y++ {
			for x := img.Rect.Min.X; x < img.Rect.Max.X; x++ {
				if g, w := color.RGBAModel.Convert(got.At(x, y)), img.At(x, y); g != w {
					t.Fatalf("%s: pixel (%d, %d) = %v, want %v", name, x, y, g, w)
				}
			}
		}
	}
}
