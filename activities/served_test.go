package activities

import (
	"context"
	"slices"
	"strings"
	"testing"

	"octflow/exam"
	"octflow/imaging"
	"octflow/inference"
	"octflow/inference/inferencetest"
)

// TestServedModelsMatchTheReference serves the reference implementations
// as models and checks that each model-backed stage's served computation
// returns exactly what its reference computes: the protocol and the
// stage's reading of the tensors lose nothing on the way.
func TestServedModelsMatchTheReference(t *testing.T) {
	ctx := context.Background()
	p := imaging.NewPhantom(imaging.PhantomOptions{Seed: 3, Frames: 5, Rows: 248, Cols: 128, Fluid: true, Drusen: true})
	var ref Activities
	den, err := ref.denoising().Denoise(ctx, p.Volume)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := ref.segmenting().SegmentLayers(ctx, den)
	if err != nil {
		t.Fatal(err)
	}
	truth, err := p.Truth(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	served := func(stage exam.Stage, url string) *Activities {
		return &Activities{Common: Common{Models: map[exam.Stage]inference.Model{stage: {URL: url}}}}
	}

	for _, jsonReply := range []bool{false, true} {
		name := map[bool]string{false: "binary", true: "json"}[jsonReply]
		t.Run(name+"/denoise", func(t *testing.T) {
			url := inferencetest.Serve(t, p.Volume, func(v *imaging.Volume) ([]int, []float32) {
				d, _ := imaging.Denoise(ctx, v, imaging.DenoiseOptions{})
				return []int{v.Frames, v.Rows, v.Cols}, d.Data
			}, jsonReply)
			got, err := served(exam.Denoise, url).denoising().Denoise(ctx, p.Volume)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Data, den.Data) || got.Laterality != p.Volume.Laterality {
				t.Fatal("the served denoiser differs from the reference served as a model")
			}
		})
		t.Run(name+"/layers", func(t *testing.T) {
			url := inferencetest.Serve(t, den, func(v *imaging.Volume) ([]int, []float32) {
				l, _ := imaging.SegmentLayers(ctx, v)
				var out []float32
				for _, n := range imaging.BoundaryNames {
					out = append(out, l.Boundaries[n]...)
				}
				out = append(out, l.RPEBottom...)
				return []int{len(imaging.BoundaryNames) + 1, v.Frames, v.Cols}, out
			}, jsonReply)
			got, err := served(exam.Layers, url).segmenting().SegmentLayers(ctx, den)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range imaging.BoundaryNames {
				if !slices.Equal(got.Boundaries[n], layers.Boundaries[n]) {
					t.Errorf("boundary %s differs from the reference", n)
				}
			}
			if !slices.Equal(got.RPEBottom, layers.RPEBottom) {
				t.Error("RPE bottom differs from the reference")
			}
		})
	}
	t.Run("lesions", func(t *testing.T) {
		// A "model" that labels the phantom's true fluid and drusen: the
		// stage must list exactly the truth's lesions.
		url := inferencetest.Serve(t, den, func(v *imaging.Volume) ([]int, []float32) {
			out := make([]float32, len(v.Data))
			for i := range out {
				switch {
				case p.FluidMask[i]:
					out[i] = imaging.LabelFluid
				case p.DrusenMask[i]:
					out[i] = imaging.LabelDrusen
				}
			}
			return []int{v.Frames, v.Rows, v.Cols}, out
		}, false)
		trueLayers := p.Layers()
		masks, err := served(exam.Lesions, url).lesionMarking().LesionMasks(ctx, den, trueLayers)
		if err != nil {
			t.Fatal(err)
		}
		got, err := masks.Lesions(den, trueLayers)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(truth.Lesions) || len(got) < 3 {
			t.Fatalf("%d lesions from the model, %d in the truth", len(got), len(truth.Lesions))
		}
		for i := range got {
			if got[i].Type != truth.Lesions[i].Type || got[i].Voxels != truth.Lesions[i].Voxels {
				t.Errorf("lesion %d = %s (%d voxels), truth %s (%d)", i, got[i].Type, got[i].Voxels, truth.Lesions[i].Type, truth.Lesions[i].Voxels)
			}
		}
	})
}

// A served model whose output has the wrong shape fails the stage with
// the shape it gave, whichever stage it serves.
func TestAServedModelOfTheWrongShapeIsRefused(t *testing.T) {
	ctx := context.Background()
	v := imaging.NewPhantom(imaging.PhantomOptions{Seed: 1, Frames: 2, Rows: 32, Cols: 16}).Volume
	url := inferencetest.Serve(t, v, func(v *imaging.Volume) ([]int, []float32) {
		return []int{2, 32}, make([]float32, 64)
	}, false)
	a := &Activities{Common: Common{Models: map[exam.Stage]inference.Model{exam.Denoise: {URL: url}, exam.Layers: {URL: url}, exam.Lesions: {URL: url}}}}
	_, errDenoise := a.denoising().Denoise(ctx, v)
	_, errLayers := a.segmenting().SegmentLayers(ctx, v)
	_, errLesions := a.lesionMarking().LesionMasks(ctx, v, nil)
	for stage, err := range map[string]error{"denoise": errDenoise, "layers": errLayers, "lesions": errLesions} {
		if err == nil || !strings.Contains(err.Error(), "output shape [2 32]") {
			t.Errorf("%s: err = %v, want the wrong shape named", stage, err)
		}
	}
}
