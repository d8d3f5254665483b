package imaging

import (
	"fmt"
	"strings"
)

// Pattern is how a scan sampled the eye, which decides what can be
// measured on it.
type Pattern string

// Scan patterns.
const (
	// Cube is a raster of parallel B-scans over the macula (1 to 128 or
	// more): ETDRS grid, central subfield thickness, volume, layer maps.
	Cube Pattern = "cube"
	// Line is one B-scan along a line, usually through the fovea: the
	// central thickness and the thickness profile.
	Line Pattern = "line"
	// Circle is one B-scan around the optic disc, unrolled: the
	// peripapillary RNFL thickness, globally and by sector.
	Circle Pattern = "circle"
	// Radial is B-scans through one centre at several angles; octflow
	// does not measure it (its report says so).
	Radial Pattern = "radial"
)

// ParsePattern reads a pattern as a submission names it ("" is unknown):
// one of the scan types (ScanTypes), or radial.
func ParsePattern(s string) (Pattern, error) {
	p := Pattern(strings.ToLower(strings.TrimSpace(s)))
	if _, ok := ScanTypeOf(p); ok || p == "" || p == Radial {
		return p, nil
	}
	names := make([]string, len(scanTypes))
	for i, t := range scanTypes {
		names[i] = string(t.Pattern)
	}
	return "", fmt.Errorf("scan type %q: want %s or %s", s, strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}

// ResolvePattern decides a scan's pattern from what its DICOM says
// (v.Pattern, set by the reader when it says anything), what the
// submission declares and the volume's shape, and checks they agree: a
// declared pattern that contradicts the DICOM or the shape is an error.
// Without either, several B-scans are a cube and one is a line.
func ResolvePattern(v *Volume, declared Pattern) (Pattern, error) {
	p := v.Pattern
	switch {
	case p != "" && declared != "" && p != declared:
		return "", invalidf("the submission says a %s scan but the DICOM describes a %s scan", declared, p)
	case p == "":
		p = declared
	}
	if p == "" || p == Cube && v.Frames == 1 {
		p = Line
		if v.Frames > 1 {
			p = Cube
		}
	}
	if t, _ := ScanTypeOf(p); t.OneBScan && v.Frames != 1 {
		// Repeated B-scans of one line are averaged by the device before
		// export; several here would be a raster.
		return "", invalidf("a %s scan has one B-scan; this one has %d", p, v.Frames)
	}
	return p, nil
}
