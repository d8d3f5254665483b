package imaging

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"math"
	"slices"
	"strings"
)

// Look is how a device's images look beyond how it encodes levels
// (Export): the grain of its speckle, its axial sampling, how much a
// vessel's shadow takes, how curved the retina lies across the image,
// and the lossy compression of its export. The zero Look draws the
// phantom as it always was: speckle drawn per sample, 496 rows over
// 1.92 mm (the options' Rows), a shallow bowl, a shadow that lets 35%
// through, and exports stored without loss.
type Look struct {
	Name string // as octflow phantom --look takes it

	// Rows is the A-scan's samples over the phantom's 1.92 mm of depth
	// (0: PhantomOptions.Rows).
	Rows int
	// Unaveraged draws fully developed speckle, as a device shows it
	// that does not average repeated B-scans: exponential in intensity,
	// its grain GrainRows × GrainCols samples wide at half height (a
	// device's speckle spans its optical resolution, several samples
	// where the sampling is finer than the optics). Without it the
	// speckle is the phantoms' own, Generalized Gamma drawn per sample,
	// as after averaging.
	Unaveraged           bool
	GrainRows, GrainCols int
	// CurvatureUm is how much deeper the retina lies at the middle of the
	// field's edge than at its centre (twice that at its corners),
	// beyond the phantom's own bowl (a myopic eye, or a scan taken off
	// the eye's axis).
	CurvatureUm float64
	// ShadowGain is what a vessel lets through to the layers under it (0:
	// the phantom's 0.35).
	ShadowGain float64
	// JPEGQuality stores each B-scan of an 8-bit export as a JPEG of
	// this quality (0: without loss).
	JPEGQuality int
}

// Looks are the looks the accuracy tests hold phantoms to the figures
// in, beside the zero Look: traits other devices' exports show that the
// SPECTRALIS exports in testdata/realdata do not. They are drawn from
// what such exports are known to vary in, not measured on any device's
// images, and named for their traits, not for a vendor.
var Looks = []Look{
	{Name: "fine-axial", Rows: 1024},
	{Name: "curved", CurvatureUm: 120, ShadowGain: 0.25},
	{Name: "jpeg90", ShadowGain: 0.15, JPEGQuality: 90},
}

// UnmeasuredLooks are looks octflow does not yet measure (docs/imaging.md,
// Other devices' looks): a device that does not average B-scans (fully
// developed speckle, a grain of two rows), and B-scans stored as JPEGs of
// the common default quality of 75. The accuracy tests hold them to
// reporting nothing they cannot vouch for.
var UnmeasuredLooks = []Look{
	{Name: "unaveraged", Unaveraged: true, GrainRows: 2, GrainCols: 1},
	{Name: "jpeg75", JPEGQuality: 75},
}

// ParseLook finds a look by its name among Looks and UnmeasuredLooks;
// "" is the zero Look.
func ParseLook(name string) (Look, error) {
	if name == "" {
		return Look{}, nil
	}
	var names []string
	for _, l := range append(slices.Clone(Looks), UnmeasuredLooks...) {
		if l.Name == name {
			return l, nil
		}
		names = append(names, l.Name)
	}
	return Look{}, fmt.Errorf("look %q: want one of %s", name, strings.Join(names, ", "))
}

// Export writes v as a device with look l exporting e stores it: its
// levels (Export.Levels), then, on an 8-bit export, each B-scan through
// the look's lossy compression. It returns the levels and the sample
// size in bits.
func (l Look) Export(v *Volume, e Export) (*Volume, int, error) {
	out, bits := e.Levels(v)
	if bits != 8 || l.JPEGQuality <= 0 {
		return out, bits, nil
	}
	for f := range out.Frames {
		if err := jpegRoundTrip(out.Frame(f), out.Rows, out.Cols, l.JPEGQuality); err != nil {
			return nil, 0, fmt.Errorf("frame %d: %w", f, err)
		}
	}
	return out, bits, nil
}

// jpegRoundTrip replaces a B-scan of 8-bit levels (rows × cols, row by
// row) by what a JPEG of the given quality gives back.
func jpegRoundTrip(levels []float32, rows, cols, quality int) error {
	img := image.NewGray(image.Rect(0, 0, cols, rows))
	for i, x := range levels {
		img.Pix[i] = uint8(min(max(math.Round(float64(x)), 0), 255))
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: quality}); err != nil {
		return fmt.Errorf("jpeg: %w", err)
	}
	back, err := jpeg.Decode(&buf)
	if err != nil {
		return fmt.Errorf("jpeg: %w", err)
	}
	gray, ok := back.(*image.Gray)
	if !ok {
		return fmt.Errorf("jpeg gave back a %T, not a gray image", back)
	}
	for r := range rows {
		for c := range cols {
			levels[r*cols+c] = float32(gray.Pix[r*gray.Stride+c])
		}
	}
	return nil
}
