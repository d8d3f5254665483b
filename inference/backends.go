// Package inference runs the image stages. By default each stage runs
// the pure-Go reference algorithm of package imaging; a site can point a
// stage at a trained model served over the KServe v2 (Triton) HTTP
// inference protocol instead, and the reference stays what the model is
// checked against.
package inference

import (
	"context"

	"octflow/imaging"
)

// Denoiser suppresses speckle in a volume.
type Denoiser interface {
	Name() string
	Denoise(ctx context.Context, v *imaging.Volume) (*imaging.Volume, error)
}

// Segmenter finds the retinal boundaries of a denoised volume.
type Segmenter interface {
	Name() string
	SegmentLayers(ctx context.Context, v *imaging.Volume) (*imaging.Layers, error)
}

// LesionMarker marks fluid and drusen in a denoised, segmented volume;
// LesionMasks.Lesions then groups, types and sizes the regions.
type LesionMarker interface {
	Name() string
	LesionMasks(ctx context.Context, v *imaging.Volume, l *imaging.Layers) (*imaging.LesionMasks, error)
}

// Backends chooses the implementation of each model-backed stage. A nil
// field runs the reference algorithm. Measurement is arithmetic over the
// boundaries and always runs in Go.
type Backends struct {
	Denoise Denoiser
	Layers  Segmenter
	Lesions LesionMarker
}

// WithDefaults fills every unset stage with its reference algorithm.
func (b Backends) WithDefaults() Backends {
	if b.Denoise == nil {
		b.Denoise = ReferenceDenoiser{}
	}
	if b.Layers == nil {
		b.Layers = ReferenceSegmenter{}
	}
	if b.Lesions == nil {
		b.Lesions = ReferenceLesionMarker{}
	}
	return b
}

// MeasureAlgorithm names the measurement stage in reports.
const MeasureAlgorithm = "etdrs-layers/v1"

// ReferenceDenoiser is imaging.Denoise: non-local means, log-domain
// patch distances.
type ReferenceDenoiser struct{}

// Name implements Denoiser.
func (ReferenceDenoiser) Name() string { return "nlm-log/v1" }

// Denoise implements Denoiser.
func (ReferenceDenoiser) Denoise(ctx context.Context, v *imaging.Volume) (*imaging.Volume, error) {
	return imaging.Denoise(ctx, v, imaging.DenoiseOptions{})
}

// ReferenceSegmenter is imaging.SegmentLayers: graph search after Chiu
// et al. 2010.
type ReferenceSegmenter struct{}

// Name implements Segmenter.
func (ReferenceSegmenter) Name() string { return "chiu-graph/v1" }

// SegmentLayers implements Segmenter.
func (ReferenceSegmenter) SegmentLayers(ctx context.Context, v *imaging.Volume) (*imaging.Layers, error) {
	return imaging.SegmentLayers(ctx, v)
}

// ReferenceLesionMarker is imaging.MarkLesions: shadow-corrected fluid
// threshold and RPE elevation over a fitted BM.
type ReferenceLesionMarker struct{}

// Name implements LesionMarker.
func (ReferenceLesionMarker) Name() string { return "fluid-drusen/v1" }

// LesionMasks implements LesionMarker.
func (ReferenceLesionMarker) LesionMasks(ctx context.Context, v *imaging.Volume, l *imaging.Layers) (*imaging.LesionMasks, error) {
	return imaging.FindLesionMasks(ctx, v, l)
}
