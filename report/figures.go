package report

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"slices"

	"octflow/imaging"
)

// Figures are the images a report shows, taken from the stage outputs.
type Figures struct {
	// BScan is the B-scan through the fovea (Rows × Cols), with the
	// boundaries found on it (row per column). The lesions outlined on
	// it are the report's (Report.Outlines), no other.
	BScan      []float32
	Rows, Cols int
	Boundaries map[string][]float32
	// Thickness is the retinal thickness map (Frames × Cols, µm).
	Thickness []float32
	Frames    int
	Spacing   imaging.Spacing
	// FoveaFrame and FoveaCol centre the ETDRS grid.
	FoveaFrame, FoveaCol int
}

// Thickness map colour scale, fixed so maps of different exams compare.
const (
	mapMinUm = 150.0
	mapMaxUm = 450.0
)

// boundaryColours draws each boundary in its own colour on the B-scan.
var boundaryColours = map[string]color.RGBA{
	imaging.ILM: {255, 64, 64, 255}, imaging.RPE: {255, 220, 0, 255}, imaging.BM: {0, 220, 90, 255},
	imaging.RNFLGCL: {255, 128, 0, 255}, imaging.IPLINL: {200, 0, 200, 255}, imaging.INLOPL: {0, 160, 255, 255},
	imaging.OPLONL: {120, 120, 255, 255}, imaging.EZ: {255, 255, 255, 255},
}

// bscanPNG renders the central B-scan in grey, on a log scale from the
// median (black: the vitreous and the deep choroid, which fill most of a
// B-scan) to the 99.5th percentile, with the boundaries and the outlines
// of lesions drawn on it. A window from the 1st percentile showed an
// 8-bit export's vitreous speckle as a near-binary pattern beside a
// burnt-out retina.
func bscanPNG(f *Figures, outlines []imaging.Box, enc *png.Encoder) ([]byte, error) {
	if len(f.BScan) != f.Rows*f.Cols || f.Rows == 0 {
		return nil, fmt.Errorf("b-scan is %d samples for %d×%d", len(f.BScan), f.Rows, f.Cols)
	}
	logs := make([]float64, len(f.BScan))
	for i, v := range f.BScan {
		logs[i] = math.Log1p(math.Max(float64(v), 0))
	}
	sorted := slices.Clone(logs)
	slices.Sort(sorted)
	lo, hi := sorted[len(sorted)/2], sorted[len(sorted)*995/1000]
	img := image.NewRGBA(image.Rect(0, 0, f.Cols, f.Rows))
	for i, v := range logs {
		g := uint8(255 * math.Min(1, math.Max(0, (v-lo)/math.Max(hi-lo, 1e-9))))
		img.Pix[4*i], img.Pix[4*i+1], img.Pix[4*i+2], img.Pix[4*i+3] = g, g, g, 255
	}
	for name, rows := range f.Boundaries {
		col, ok := boundaryColours[name]
		if !ok || len(rows) != f.Cols {
			continue
		}
		for c, r := range rows {
			if y := int(r); y >= 0 && y < f.Rows {
				img.SetRGBA(c, y, col)
			}
		}
	}
	cyan := color.RGBA{0, 255, 255, 255}
	for _, b := range outlines {
		for c := b.Col0; c <= b.Col1; c++ {
			img.SetRGBA(c, b.Row0, cyan)
			img.SetRGBA(c, b.Row1, cyan)
		}
		for r := b.Row0; r <= b.Row1; r++ {
			img.SetRGBA(b.Col0, r, cyan)
			img.SetRGBA(b.Col1, r, cyan)
		}
	}
	return encodePNG(enc, img)
}

// thicknessPNG renders the thickness map in true proportions (square for
// a 6 × 6 mm cube), nearest B-scan per row, coloured on the fixed scale.
func thicknessPNG(f *Figures, enc *png.Encoder) ([]byte, error) {
	if len(f.Thickness) != f.Frames*f.Cols || f.Frames == 0 {
		return nil, fmt.Errorf("thickness map is %d values for %d×%d", len(f.Thickness), f.Frames, f.Cols)
	}
	height := int(math.Round(float64(f.Cols) * f.Spacing.FrameUm * float64(f.Frames) / (f.Spacing.LateralUm * float64(f.Cols))))
	height = max(height, 1)
	img := image.NewRGBA(image.Rect(0, 0, f.Cols, height))
	for y := range height {
		frame := min(f.Frames-1, y*f.Frames/height)
		for c := range f.Cols {
			img.SetRGBA(c, y, thicknessColour(float64(f.Thickness[frame*f.Cols+c])))
		}
	}
	return encodePNG(enc, img)
}

// thicknessColour maps µm onto blue → cyan → green → yellow → red.
func thicknessColour(um float64) color.RGBA {
	t := math.Min(1, math.Max(0, (um-mapMinUm)/(mapMaxUm-mapMinUm)))
	stops := []color.RGBA{{0, 0, 200, 255}, {0, 200, 255, 255}, {0, 200, 0, 255}, {255, 230, 0, 255}, {220, 0, 0, 255}}
	pos := t * float64(len(stops)-1)
	i := min(int(pos), len(stops)-2)
	frac := pos - float64(i)
	mix := func(a, b uint8) uint8 { return uint8(float64(a) + frac*(float64(b)-float64(a))) }
	a, b := stops[i], stops[i+1]
	return color.RGBA{mix(a.R, b.R), mix(a.G, b.G), mix(a.B, b.B), 255}
}

// newPNGEncoder is the encoder of one report's figures. The figures are
// embedded in a PDF that is stored once, so they favour speed over
// size, and they share one compressor: each new one allocates about
// 1 MB.
func newPNGEncoder() *png.Encoder {
	return &png.Encoder{CompressionLevel: png.BestSpeed, BufferPool: &pngBuffer{}}
}

// pngBuffer keeps one encoder buffer for the figures encoded in turn.
type pngBuffer struct{ b *png.EncoderBuffer }

func (p *pngBuffer) Get() *png.EncoderBuffer  { return p.b }
func (p *pngBuffer) Put(b *png.EncoderBuffer) { p.b = b }

func encodePNG(enc *png.Encoder, img image.Image) ([]byte, error) {
	var buf bytes.Buffer
	if err := enc.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("encode png: %w", err)
	}
	return buf.Bytes(), nil
}
