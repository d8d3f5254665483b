package imaging_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"octflow/imaging"
)

// The four image stages, in the order a GPU node runs them, on a small
// synthetic macular cube with fluid, checked against the phantom's
// ground truth. (The stages of a real exam run on the 49 × 496 × 512
// cube a device sends; this one keeps the 6 × 6 mm field with fewer
// samples so the example runs in well under a second.)
func Example() {
	ctx := context.Background()
	p := imaging.NewPhantom(imaging.PhantomOptions{Seed: 1, Frames: 7, Rows: 248, Cols: 128, Fluid: true})
	truth, err := p.Truth(ctx, 1)
	if err != nil {
		fmt.Println(err)
		return
	}

	// Denoise: whatever the device's encoding, the stages work on one
	// scale; then the speckle filter.
	v, intensity := imaging.Normalize(p.Volume)
	den, err := imaging.Denoise(ctx, v, imaging.DenoiseOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Layers: the retinal boundaries of every A-scan.
	layers, err := imaging.SegmentLayers(ctx, den)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Lesions: fluid and drusen between the boundaries.
	lesions, err := imaging.MarkLesions(ctx, den, layers)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Measure: the quality gate, then what the scan's pattern allows.
	an, err := imaging.Analyze(ctx, den, layers)
	if err != nil {
		fmt.Println(err)
		return
	}

	fmt.Printf("%d × %d × %d %s, %s encoding\n", v.Frames, v.Rows, v.Cols, v.Laterality, intensity.Encoding)
	// A small, coarse cube: its RNFL/GCL is reliable in too few A-scans
	// for the RNFL and GCL+IPL layer maps, which are withheld with their
	// reason (an.Withheld), so the verdict is partial.
	fmt.Printf("pattern %s, gradable %s, measurable %t\n", an.Pattern, an.Quality.Gradable, an.Measurable())
	// Its figures are one value of the pattern's type: a cube's here.
	cube := an.Figures.(*imaging.Measurements)
	cst, want := cube.CentralSubfieldThicknessUm, truth.Measurements.CentralSubfieldThicknessUm
	fmt.Printf("central subfield thickness within 5 µm of the truth: %t\n", math.Abs(cst-want) < 5)
	fmt.Println("lesions:", lesionTypes(lesions))
	fmt.Println("truth:  ", lesionTypes(truth.Lesions))
	// Output:
	// 7 × 248 × 128 OD, linear encoding
	// pattern cube, gradable partial, measurable true
	// central subfield thickness within 5 µm of the truth: true
	// lesions: [intraretinal_fluid subretinal_fluid]
	// truth:   [intraretinal_fluid subretinal_fluid]
}

func lesionTypes(ls []imaging.Lesion) []string {
	var types []string
	for _, l := range ls {
		types = append(types, l.Type)
	}
	slices.Sort(types)
	return slices.Compact(types)
}

// A volume is a flat slice, frame-major: B-scan f, row (depth) r and
// column c are sample (f·Rows + r)·Cols + c, and Frame(f) is one B-scan
// sharing the volume's memory. Spacing gives the physical size of a
// step, so positions are in mm from the scan's centre.
func ExampleVolume() {
	v := imaging.NewVolume(3, 8, 10, imaging.Spacing{AxialUm: 3.87, LateralUm: 11.72, FrameUm: 122.45})
	v.Set(1, 2, 3, 42)
	fmt.Println(len(v.Data), v.Data[(1*v.Rows+2)*v.Cols+3], v.Frame(1)[2*v.Cols+3])
	x, y := v.PositionMm(2, 9)
	fmt.Printf("A-scan (frame 2, column 9) at x %.3f mm, y %.3f mm\n", x, y)
	fmt.Println(v.Validate())
	// Output:
	// 240 42 42
	// A-scan (frame 2, column 9) at x 0.053 mm, y 0.122 mm
	// <nil>
}

// Input no retry can fix is an ErrInvalidVolume: the exam goes DEAD at
// once with the reason instead of being retried on another node.
func ExampleVolume_Validate() {
	v := imaging.NewVolume(1, 4, 4, imaging.Spacing{AxialUm: 3.87, LateralUm: 11.72})
	err := v.Validate()
	fmt.Println(errors.Is(err, imaging.ErrInvalidVolume))
	fmt.Println(err)
	// Output:
	// true
	// invalid OCT volume: volume is 1×4×4; want at least 1 frame of 8×8
}
