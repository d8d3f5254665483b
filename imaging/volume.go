package imaging

import (
	"errors"
	"fmt"
)

// Spacing is the physical size of one voxel step, in micrometres.
type Spacing struct {
	AxialUm   float64 `json:"axialUm"`   // between rows (depth)
	LateralUm float64 `json:"lateralUm"` // between columns within a B-scan
	FrameUm   float64 `json:"frameUm"`   // between B-scans
}

// Volume is an OCT cube: Frames B-scans of Rows (depth) × Cols (lateral)
// samples, stored frame-major in one flat slice.
type Volume struct {
	Frames, Rows, Cols int
	Spacing            Spacing
	// Laterality is "OD" (right eye), "OS" (left eye) or "" if unknown.
	Laterality string
	// Pattern is how the scan sampled the eye, "" if unknown (see
	// ResolvePattern).
	Pattern Pattern
	Data    []float32
}

// NewVolume allocates a zeroed volume.
func NewVolume(frames, rows, cols int, spacing Spacing) *Volume {
	return &Volume{Frames: frames, Rows: rows, Cols: cols, Spacing: spacing,
		Data: make([]float32, frames*rows*cols)}
}

// NewVolumeLike allocates a zeroed volume of v's shape, spacing,
// laterality and pattern.
func NewVolumeLike(v *Volume) *Volume {
	out := NewVolume(v.Frames, v.Rows, v.Cols, v.Spacing)
	out.Laterality, out.Pattern = v.Laterality, v.Pattern
	return out
}

// Set stores a sample at frame f, row r, column c.
func (v *Volume) Set(f, r, c int, x float32) { v.Data[(f*v.Rows+r)*v.Cols+c] = x }

// PositionMm returns where A-scan (f, c) lies relative to the scan centre,
// in mm: x along the B-scan, y across B-scans (frame 0 is superior).
func (v *Volume) PositionMm(f, c int) (x, y float64) {
	return (float64(c) - float64(v.Cols-1)/2) * v.Spacing.LateralUm / 1000,
		(float64(f) - float64(v.Frames-1)/2) * v.Spacing.FrameUm / 1000
}

// Frame returns B-scan f as a Rows×Cols slice sharing the volume's memory.
func (v *Volume) Frame(f int) []float32 {
	n := v.Rows * v.Cols
	return v.Data[f*n : (f+1)*n]
}

// Validate checks that dimensions, data length and spacing are consistent.
func (v *Volume) Validate() error {
	if v.Frames < 1 || v.Rows < 8 || v.Cols < 8 {
		return invalidf("volume is %d×%d×%d; want at least 1 frame of 8×8", v.Frames, v.Rows, v.Cols)
	}
	if len(v.Data) != v.Frames*v.Rows*v.Cols {
		return invalidf("volume has %d samples for %d×%d×%d", len(v.Data), v.Frames, v.Rows, v.Cols)
	}
	if v.Spacing.AxialUm <= 0 || v.Spacing.LateralUm <= 0 || (v.Frames > 1 && v.Spacing.FrameUm <= 0) {
		return invalidf("volume spacing %+v is not positive", v.Spacing)
	}
	return nil
}

// ErrInvalidVolume marks input that no retry can fix: not an OCT volume,
// inconsistent dimensions, truncated or unsupported pixel data. Callers
// test for it with errors.Is and treat it as permanent.
var ErrInvalidVolume = errors.New("invalid OCT volume")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidVolume, fmt.Sprintf(format, args...))
}
