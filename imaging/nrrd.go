package imaging

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
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

// ReadLabelsNRRD reads a label volume WriteLabelsNRRD wrote: one byte per
// voxel, B-scan by B-scan, row by row; sizes are its columns, rows and
// B-scans. It reads at most maxVoxels labels; a header of another shape
// (type, dimension, encoding) is refused.
func ReadLabelsNRRD(r io.Reader, maxVoxels int) (labels []uint8, sizes [3]int, err error) {
	br := bufio.NewReader(r)
	magic, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(magic, "NRRD") {
		return nil, sizes, errors.New("read labels: not NRRD")
	}
	fields := map[string]string{}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, sizes, fmt.Errorf("read labels: header: %w", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, "#") {
			fields[k] = v
		}
	}
	if fields["type"] != "uint8" || fields["dimension"] != "3" || fields["encoding"] != "gzip" {
		return nil, sizes, fmt.Errorf("read labels: type %q, dimension %q, encoding %q; want uint8, 3, gzip",
			fields["type"], fields["dimension"], fields["encoding"])
	}
	dims := strings.Fields(fields["sizes"])
	n := 1
	for i := range sizes {
		if len(dims) != 3 {
			return nil, sizes, fmt.Errorf("read labels: sizes %q", fields["sizes"])
		}
		if sizes[i], err = strconv.Atoi(dims[i]); err != nil || sizes[i] < 1 || n > maxVoxels/sizes[i] {
			return nil, sizes, fmt.Errorf("read labels: sizes %q", fields["sizes"])
		}
		n *= sizes[i]
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, sizes, fmt.Errorf("read labels: %w", err)
	}
	labels = make([]uint8, n)
	if _, err := io.ReadFull(zr, labels); err != nil {
		return nil, sizes, fmt.Errorf("read labels: %w", err)
	}
	return labels, sizes, nil
}
