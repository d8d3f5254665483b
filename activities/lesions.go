package activities

import (
	"bytes"
	"context"

	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
	"octflow/inference"
)

// The lesion stage (exam.Lesions). It reads the denoised volume and its
// layers and marks fluid and drusen: their masks as a label volume
// (gzip NRRD, exam.LesionLabelsKey) and the list of lesions, grouped,
// typed and sized (JSON, exam.LesionsKey), which the report lists and
// outlines. A served model may mark them instead of the reference
// (OCTFLOW_MODEL_LESIONS); the grouping is always octflow's.

// lesionsSpec declares the lesion stage: a GPU stage, 2 GiB of GPU
// memory unless the node is told otherwise
// (gpuworker.Config.StageMemoryMiB), OCTFLOW_MODEL_LESIONS.
func lesionsSpec() exam.StageSpec {
	return exam.StageSpec{Stage: exam.Lesions, Activity: "MarkLesions", GPU: true, GPUMemoryMiB: 2048, Model: "LESIONS"}
}

// lesionMarker marks fluid and drusen in a denoised, segmented volume;
// imaging.LesionMasks.Lesions then groups, types and sizes the regions.
type lesionMarker interface {
	Name() string
	LesionMasks(ctx context.Context, v *imaging.Volume, l *imaging.Layers) (*imaging.LesionMasks, error)
}

// referenceLesionMarker is imaging.FindLesionMasks: shadow-corrected
// fluid threshold and RPE elevation over a fitted BM.
type referenceLesionMarker struct{}

func (referenceLesionMarker) Name() string { return "fluid-drusen/v1" }

func (referenceLesionMarker) LesionMasks(ctx context.Context, v *imaging.Volume, l *imaging.Layers) (*imaging.LesionMasks, error) {
	return imaging.FindLesionMasks(ctx, v, l)
}

// servedLesionMarker marks lesions with a served model: input FP32
// [frames, rows, cols], output [frames, rows, cols] of labels
// (imaging.LabelNone, LabelFluid, LabelDrusen; UINT8, FP32 or INT64).
type servedLesionMarker struct{ inference.Model }

func (m servedLesionMarker) LesionMasks(ctx context.Context, v *imaging.Volume, _ *imaging.Layers) (*imaging.LesionMasks, error) {
	shape := []int{v.Frames, v.Rows, v.Cols}
	out, _, err := m.InferAs(ctx, shape, v.Data, shape)
	if err != nil {
		return nil, err
	}
	return imaging.MasksFromLabels(out), nil
}

// lesionMarking is what marks lesions here: the stage's served model, if
// it has one, else the reference.
func (a *Activities) lesionMarking() lesionMarker {
	if m, ok := a.Models[lesionsSpec().Stage]; ok {
		return servedLesionMarker{m}
	}
	return referenceLesionMarker{}
}

// MarkLesions finds fluid and drusen in the segmented retina: their masks
// as a label volume (NRRD) and the list of lesions (JSON).
func (a *Activities) MarkLesions(ctx context.Context, in contract.StageInput) (contract.StageOutput, error) {
	var out contract.StageOutput
	err := a.run(ctx, lesionsSpec(), &out, func(ctx context.Context) error {
		v, layers, err := a.loadVolumeAndLayers(ctx, in.Exam)
		if err != nil {
			return err
		}
		var masks *imaging.LesionMasks
		var lesions []imaging.Lesion
		marker := a.lesionMarking()
		if err := a.onGPU(ctx, func(ctx context.Context) (err error) {
			if masks, err = marker.LesionMasks(ctx, v, layers); err != nil {
				return err
			}
			lesions, err = masks.Lesions(v, layers)
			return err
		}); err != nil {
			return permanentIfInvalid(err)
		}
		if lesions == nil {
			lesions = []imaging.Lesion{}
		}
		var labels bytes.Buffer
		if err := imaging.WriteLabelsNRRD(&labels, v, masks.Labels()); err != nil {
			return err
		}
		out.Keys, out.Algorithm = []string{exam.LesionsKey(in.Exam.Ref()), exam.LesionLabelsKey(in.Exam.Ref())}, marker.Name()
		if err := a.put(ctx, out.Keys[1], labels.Bytes(), "application/octet-stream"); err != nil {
			return err
		}
		return a.putJSON(ctx, out.Keys[0], lesions)
	})
	return out, err
}
