package imaging

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
)

// WriteLabelsNRRD writes a label volume, one byte per voxel of v (as
// LesionMasks.Labels gives it), as gzip-compressed NRRD: 3D Slicer, ITK
// and most research viewers open it as a segmentation over the scan.
func WriteLabelsNRRD(w io.Writer, v *Volume, labels []uint8) error {
	if len(labels) != len(v.Data) {
		return fmt.Errorf("write labels: %d labels for %d voxels", len(labels), len(v.Data))
	}
	bw := bufio.NewWriter(w)
	mm := func(um float64) float64 { return um / 1000 }
	// NRRD lists the fastest axis first: columns, rows, B-scans.
	fmt.Fprintf(bw, "NRRD0004\n# octflow lesion labels: %d none, %d fluid, %d drusen or PED deposit\n"+
		"type: uint8\ndimension: 3\nsizes: %d %d %d\nspacings: %g %g %g\nunits: \"mm\" \"mm\" \"mm\"\n"+
		"labels: \"lateral\" \"axial\" \"b-scan\"\nencoding: gzip\n\n",
		LabelNone, LabelFluid, LabelDrusen, v.Cols, v.Rows, v.Frames,
		mm(v.Spacing.LateralUm), mm(v.Spacing.AxialUm), mm(v.Spacing.FrameUm))
	zw := gzip.NewWriter(bw)
	if _, err := zw.Write(labels); err != nil {
		return fmt.Errorf("write labels: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("write labels: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write labels: %w", err)
	}
	return nil
}
