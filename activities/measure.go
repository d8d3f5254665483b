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
// the report reads, with the gate's verdict on each A-scan, and the
// exam's summary (summarize), which status and events show from here on
// and the pipeline passes on to the report. Measurement is arithmetic
// over the boundaries and always runs in Go.

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
	// Graded is the quality gate's verdict on each A-scan
	// (imaging.Quality.Mask, which the analysis's JSON leaves out), one
	// bit each in frame-major order, the first in the lowest bit of the
	// first byte (packBits): the report counts a lesion only on a graded
	// A-scan.
	Graded []byte `json:"graded"`
	// RetinaMeasured is where the retina's thickness (ILM to BM) was
	// measured and vouched for (imaging.Analysis.RetinaMeasured), packed
	// like Graded: the A-scans the segmentation sent to the PACS draws
	// the retina on. Absent for a circle, for a scan not measured, and
	// in files written before it was kept.
	RetinaMeasured []byte `json:"retinaMeasured,omitempty"`
}

// packBits packs a mask into bits, the first in the lowest bit of the
// first byte.
func packBits(mask []bool) []byte {
	b := make([]byte, (len(mask)+7)/8)
	for i, set := range mask {
		if set {
			b[i/8] |= 1 << (i % 8)
		}
	}
	return b
}

// packOptional is packBits of a mask, nil for none.
func packOptional(mask []bool) []byte {
	if mask == nil {
		return nil
	}
	return packBits(mask)
}

// unpackBits is the mask of n entries packBits made b of; nil when b
// holds fewer bits than n.
func unpackBits(b []byte, n int) []bool {
	if len(b)*8 < n {
		return nil
	}
	mask := make([]bool, n)
	for i := range mask {
		mask[i] = b[i/8]&(1<<(i%8)) != 0
	}
	return mask
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
		out.Keys, out.Algorithm = []string{exam.MeasurementsKey(in.Exam.Ref())}, measureAlgorithm
		out.Summary = summarize(an)
		return a.putJSON(ctx, out.Keys[0], measurementsFile{
			Volume: report.VolumeInfo{Frames: v.Frames, Rows: v.Rows, Cols: v.Cols, Spacing: v.Spacing},
			Eye:    v.Laterality, Analysis: an, Graded: packBits(an.Quality.Mask), RetinaMeasured: packOptional(an.RetinaMeasured())})
	})
	return out, err
}

// summarize is the headline of an analysis: what status and events show,
// with the figures it withholds named (the report gives the reasons).
// The report adds its lesions and its lesion finding.
func summarize(an *imaging.Analysis) *exam.Summary {
	s := &exam.Summary{ScanType: string(an.Pattern), Gradable: string(an.Quality.Gradable), NotMeasurable: !an.Measurable()}
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
		s.LesionsWithheld = true
	}
	return s
}
