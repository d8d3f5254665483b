package activities

import (
	"context"

	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
	"octflow/report"
)

// The measure stage (exam.Measure). It reads the denoised volume and its
// layers, runs the quality gate and measures what the scan's pattern
// allows (imaging.Analyze): the measurements (JSON, exam.MeasurementsKey)
// the report reads, and the exam's summary (summarize), which status and
// events show from here on. Measurement is arithmetic over the
// boundaries and always runs in Go.

// measureSpec declares the measure stage: a GPU stage (it runs beside
// the exam's other outputs in the node's cache), 1 GiB.
func measureSpec() exam.StageSpec {
	return exam.StageSpec{Stage: exam.Measure, Activity: "Measure", GPU: true, GPUMemoryMiB: 1024}
}

// measureAlgorithm names the measurement in reports.
const measureAlgorithm = "etdrs-layers/v1"

// measurementsFile is what the measure stage stores.
type measurementsFile struct {
	Volume   report.VolumeInfo `json:"volume"`
	Eye      string            `json:"eye"`
	Analysis *imaging.Analysis `json:"analysis"`
}

// Measure runs the quality gate and measures what the scan's pattern
// allows over its gradable part: the ETDRS grid and volume of a cube, the
// central thickness of a line, the RNFL of a circle. A scan that cannot
// be measured is no failure: its analysis says why, and the exam goes on
// to a report that says so.
func (a *Activities) Measure(ctx context.Context, in contract.StageInput) (contract.StageOutput, error) {
	var out contract.StageOutput
	err := a.run(ctx, measureSpec(), &out, func(ctx context.Context) error {
		v, layers, err := a.loadVolumeAndLayers(ctx, in.Exam)
		if err != nil {
			return err
		}
		if v.Laterality == "" {
			v.Laterality = string(in.Exam.Eye)
		}
		var an *imaging.Analysis
		if err := a.onGPU(ctx, func(ctx context.Context) (err error) {
			an, err = imaging.Analyze(ctx, v, layers)
			return err
		}); err != nil {
			return permanentIfInvalid(err)
		}
		out.Keys = []string{exam.MeasurementsKey(in.Exam.Ref())}
		out.Summary = summarize(an, 0, "")
		return a.putJSON(ctx, out.Keys[0], measurementsFile{
			Volume: report.VolumeInfo{Frames: v.Frames, Rows: v.Rows, Cols: v.Cols, Spacing: v.Spacing},
			Eye:    v.Laterality, Analysis: an})
	})
	return out, err
}

// summarize is the headline of an analysis: what status and events show,
// with the figures it withholds named (the report gives the reasons) and
// the report's lesion finding ("" before the report).
func summarize(an *imaging.Analysis, lesions int, finding string) *exam.Summary {
	s := &exam.Summary{ScanType: string(an.Pattern), Gradable: string(an.Quality.Gradable), NotMeasurable: !an.Measurable(),
		Lesions: lesions, LesionFinding: finding}
	if an.Figures != nil {
		an.Figures.Summarize(s)
	}
	for _, w := range an.Withheld {
		s.Withheld = append(s.Withheld, w.Figure)
		if s.WithheldReasons == nil {
			s.WithheldReasons = map[string]string{}
		}
		s.WithheldReasons[w.Figure] = w.Reason
	}
	if an.Measurable() && an.LesionsWithheld() != "" {
		s.LesionsWithheld, s.Lesions = true, 0
	}
	return s
}
