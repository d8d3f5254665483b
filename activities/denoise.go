package activities

import (
	"bytes"
	"context"

	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
	"octflow/inference"
	"octflow/octdicom"
)

// The denoise stage (exam.Denoise). It reads the de-identified scan,
// brings it to one intensity scale whatever the device's encoding (what
// it found: exam.IntensityKey), and suppresses speckle: the denoised
// volume, without patient identifier, is exam.DenoisedKey (DICOM), read
// by every later image stage. A served model may denoise instead of the
// reference (OCTFLOW_MODEL_DENOISE).

// denoiseSpec declares the denoise stage: a GPU stage, 2 GiB of GPU
// memory unless the node is told otherwise
// (gpuworker.Config.StageMemoryMiB), OCTFLOW_MODEL_DENOISE.
func denoiseSpec() exam.StageSpec {
	return exam.StageSpec{Stage: exam.Denoise, Activity: "Denoise", GPU: true, GPUMemoryMiB: 2048, Model: "DENOISE"}
}

// denoiser suppresses speckle in a volume.
type denoiser interface {
	Name() string
	Denoise(ctx context.Context, v *imaging.Volume) (*imaging.Volume, error)
}

// referenceDenoiser is imaging.Denoise: non-local means, log-domain
// patch distances.
type referenceDenoiser struct{}

func (referenceDenoiser) Name() string { return "nlm-log/v1" }

func (referenceDenoiser) Denoise(ctx context.Context, v *imaging.Volume) (*imaging.Volume, error) {
	return imaging.Denoise(ctx, v, imaging.DenoiseOptions{})
}

// servedDenoiser denoises with a served model: input FP32 [frames, rows,
// cols] of linear intensities, output the same shape.
type servedDenoiser struct{ inference.Model }

func (d servedDenoiser) Denoise(ctx context.Context, v *imaging.Volume) (*imaging.Volume, error) {
	shape := []int{v.Frames, v.Rows, v.Cols}
	out, _, err := d.InferAs(ctx, shape, v.Data, shape)
	if err != nil {
		return nil, err
	}
	den := imaging.NewVolume(v.Frames, v.Rows, v.Cols, v.Spacing)
	den.Laterality, den.Data = v.Laterality, out
	return den, nil
}

// denoising is what denoises here: the stage's served model, if it has
// one, else the reference.
func (a *Activities) denoising() denoiser {
	if m, ok := a.Models[denoiseSpec().Stage]; ok {
		return servedDenoiser{m}
	}
	return referenceDenoiser{}
}

// Denoise reads the uploaded scan and writes the denoised volume.
func (a *Activities) Denoise(ctx context.Context, in contract.StageInput) (contract.StageOutput, error) {
	var out contract.StageOutput
	err := a.run(ctx, denoiseSpec(), &out, func(ctx context.Context) error {
		v, err := a.loadExamVolume(ctx, in.Exam, in.Exam.ScanKey)
		if err != nil {
			return err
		}
		// Whatever the device's encoding, the stages work on one scale.
		v, intensity := imaging.Normalize(v)
		if err := a.putJSON(ctx, exam.IntensityKey(in.Exam.Ref()), intensity); err != nil {
			return err
		}
		var den *imaging.Volume
		denoiser := a.denoising()
		if err := a.onGPU(ctx, func(ctx context.Context) (err error) {
			den, err = denoiser.Denoise(ctx, v)
			return err
		}); err != nil {
			return permanentIfInvalid(err)
		}
		key := exam.DenoisedKey(in.Exam.Ref())
		var buf bytes.Buffer
		// The derived volume carries no patient identifier.
		if err := octdicom.WriteDICOM(&buf, den, octdicom.Header{SOPInstanceUID: derivedUID(in.Exam.ScanDigest)}); err != nil {
			return err
		}
		out.Keys, out.Algorithm = []string{key}, denoiser.Name()
		return a.put(ctx, key, buf.Bytes(), "application/dicom")
	})
	return out, err
}
