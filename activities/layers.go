package activities

import (
	"context"

	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
	"octflow/inference"
)

// The layer segmentation stage (exam.Layers). It reads the denoised
// volume and finds the retinal boundaries in every A-scan: the layers
// (JSON, exam.LayersKey) that the lesion, measure and report stages read.
// A served model may segment instead of the reference
// (OCTFLOW_MODEL_LAYERS).

// layersSpec declares the layer segmentation stage: a GPU stage, 4 GiB
// of GPU memory unless the node is told otherwise
// (gpuworker.Config.StageMemoryMiB), OCTFLOW_MODEL_LAYERS.
func layersSpec() exam.StageSpec {
	return exam.StageSpec{Stage: exam.Layers, Activity: "SegmentLayers", GPU: true, GPUMemoryMiB: 4096, Model: "LAYERS"}
}

// segmenter finds the retinal boundaries of a denoised volume.
type segmenter interface {
	Name() string
	SegmentLayers(ctx context.Context, v *imaging.Volume) (*imaging.Layers, error)
}

// referenceSegmenter is imaging.SegmentLayers: graph search after Chiu
// et al. 2010.
type referenceSegmenter struct{}

func (referenceSegmenter) Name() string { return "chiu-graph/v1" }

func (referenceSegmenter) SegmentLayers(ctx context.Context, v *imaging.Volume) (*imaging.Layers, error) {
	return imaging.SegmentLayers(ctx, v)
}

// servedSegmenter segments with a served model: input FP32 [frames,
// rows, cols], output FP32 [8, frames, cols], the row of each boundary of
// imaging.BoundaryNames (in that order) in every A-scan; a ninth channel,
// if present, is the RPE band's lower edge (imaging.Layers.RPEBottom).
type servedSegmenter struct{ inference.Model }

func (s servedSegmenter) SegmentLayers(ctx context.Context, v *imaging.Volume) (*imaging.Layers, error) {
	n := len(imaging.BoundaryNames)
	out, shape, err := s.InferAs(ctx, []int{v.Frames, v.Rows, v.Cols}, v.Data, []int{n, v.Frames, v.Cols}, []int{n + 1, v.Frames, v.Cols})
	if err != nil {
		return nil, err
	}
	per := v.Frames * v.Cols
	l := &imaging.Layers{Frames: v.Frames, Cols: v.Cols, Boundaries: map[string][]float32{}}
	for i, name := range imaging.BoundaryNames {
		l.Boundaries[name] = out[i*per : (i+1)*per]
	}
	if shape[0] == n+1 {
		l.RPEBottom = out[n*per:]
	}
	return l, nil
}

// segmenting is what segments here: the stage's served model, if it has
// one, else the reference.
func (a *Activities) segmenting() segmenter {
	if m, ok := a.Models[layersSpec().Stage]; ok {
		return servedSegmenter{m}
	}
	return referenceSegmenter{}
}

// SegmentLayers finds the retinal boundaries in the denoised volume.
func (a *Activities) SegmentLayers(ctx context.Context, in contract.StageInput) (contract.StageOutput, error) {
	var out contract.StageOutput
	err := a.run(ctx, layersSpec(), &out, func(ctx context.Context) error {
		v, err := a.loadExamVolume(ctx, in.Exam, exam.DenoisedKey(in.Exam.Ref()))
		if err != nil {
			return err
		}
		var layers *imaging.Layers
		seg := a.segmenting()
		if err := a.onGPU(ctx, func(ctx context.Context) (err error) {
			layers, err = seg.SegmentLayers(ctx, v)
			return err
		}); err != nil {
			return permanentIfInvalid(err)
		}
		out.Keys, out.Algorithm = []string{exam.LayersKey(in.Exam.Ref())}, seg.Name()
		return a.putJSON(ctx, out.Keys[0], layers)
	})
	return out, err
}
