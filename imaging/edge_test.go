package imaging

import (
	"math"
	"testing"
)

// TestHalfLevelEdgeIsWhereTheReflectivityIsHalfWay puts an edge between
// two levels at a fractional depth, as the phantoms draw it (each row
// holds the level at its middle, blurred by a Gaussian as a device's
// axial resolution blurs it), and finds it at its half level from the
// row the graph search would give (the first row whose middle lies under
// the edge), for a rise (the ILM) and a fall (the inner boundaries):
// blurred, within 0.15 of a row (the steepest change of log intensity,
// refined as the search refines it, lies 1.05 and 1.4 rows off them, on
// the dim side); sharp, where the rows' middles cannot
// tell where between them it lies, within half a row. Where the levels
// either side do not differ in the edge's sense it keeps the search's
// own row.
func TestHalfLevelEdgeIsWhereTheReflectivityIsHalfWay(t *testing.T) {
	const rows, cols, n = 40, 1, 4
	for _, c := range []struct {
		name     string
		at, blur float64 // the edge's depth (rows) and the blur's σ (rows)
		polarity int
		within   float64 // rows
	}{
		{"a sharp rise", 20.3, 0, darkToLight, 0.5},
		{"a blurred rise", 20.7, 1.2, darkToLight, 0.15},
		{"a sharp fall", 17.5, 0, lightToDark, 0.5},
		{"a blurred fall", 17.2, 1.5, lightToDark, 0.15},
	} {
		t.Run(c.name, func(t *testing.T) {
			dim, bright := 400.0, 6000.0
			if c.polarity == lightToDark {
				dim, bright = bright, dim
			}
			logs := make([]float32, rows*cols)
			for r := range rows {
				// The level at the row's middle, r + 0.5: the step
				// integrated against the blur.
				x := dim + (bright-dim)*0.5
				if c.blur > 0 {
					x = dim + (bright-dim)*0.5*(1+math.Erf((float64(r)+0.5-c.at)/(c.blur*math.Sqrt2)))
				} else if float64(r)+0.5 < c.at {
					x = dim
				} else {
					x = bright
				}
				logs[r] = float32(math.Log1p(x))
			}
			r := int(math.Ceil(c.at - 0.5)) // the first row under the edge, as the search finds it
			got := halfLevelEdge(logs, rows, cols, r, 0, n, c.polarity, -1)
			if math.Abs(float64(got)-c.at) > c.within {
				t.Errorf("edge at row %.2f found at %.2f", c.at, got)
			}
			if got := halfLevelEdge(logs, rows, cols, r, 0, n, -c.polarity, -1); got != -1 {
				t.Errorf("an edge of the other sense found at %.2f, want the search's own row kept", got)
			}
		})
	}
}
