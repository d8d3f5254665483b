package activities

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
	"octflow/octdicom"
	"octflow/octdicom/results"
	"octflow/report"
)

// maxSegmentationVoxels bounds the lesion labels the export reads: the
// reader's own bound on a volume (2^28 samples).
const maxSegmentationVoxels = 1 << 28

// errNoSegmentation is why an exam's segmentation is left out of its
// export: what the stages stored cannot make one. The PDF and the SR go
// without it.
var errNoSegmentation = errors.New("no segmentation")

// segmentation is the exam's DICOM Segmentation (results.Segmentation),
// drawn from what its stages stored: the de-identified scan's geometry,
// the layers, where the measure stage measured the retina, the lesion
// labels. It goes with the PDF and the SR, under the same rules (the
// same identity, a measured cube or line); nil when the exam has none.
// An exam whose stored outputs cannot make one (missing, or unlike the
// scan) is exported without it, and the log says why; a store that does
// not answer fails the export, to be tried again.
func (x *Exporter) segmentation(ctx context.Context, in contract.StageInput, sealed []byte, rep *report.Report,
	sw results.Software) (*results.Object, error) {
	if !results.WantsSegmentation(rep) {
		return nil, nil
	}
	ref := in.Exam.Ref()
	src, err := x.segmentationSource(ctx, in)
	if err == nil {
		var obj results.Object
		var none string
		obj, none, err = results.SegmentationFromSealed(x.Identities, ref, sealed, rep, src, sw)
		switch {
		case err == nil && none == "":
			return &obj, nil
		case err == nil:
			// The exam has none by design (a source without planes):
			// said, not warned of.
			if x.Logger != nil {
				x.Logger.Info("the exam's results are exported without a segmentation", zap.String("campus", in.Exam.Campus),
					zap.String("examId", in.Exam.ExamID), zap.String("reason", none))
			}
			return nil, nil
		}
	}
	if isUnavailable(err) {
		return nil, err
	}
	// What was stored cannot make one (missing, or unlike the scan);
	// the errors name structure, never a value of the scan.
	x.logNoSegmentation(in, err.Error())
	return nil, nil
}

func (x *Exporter) logNoSegmentation(in contract.StageInput, why string) {
	if x.Logger != nil {
		x.Logger.Warn("the exam's results are exported without a segmentation", zap.String("campus", in.Exam.Campus),
			zap.String("examId", in.Exam.ExamID), zap.String("reason", why))
	}
}

// isUnavailable reports whether err is the store not answering
// (unavailable), which a later try may mend.
func isUnavailable(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == contract.ErrTypeInfrastructure
}

// segmentationSource reads what the segmentation is drawn from.
func (x *Exporter) segmentationSource(ctx context.Context, in contract.StageInput) (results.SegmentationSource, error) {
	ref := in.Exam.Ref()
	store := objects{store: x.Store}
	var src results.SegmentationSource
	scanKey := in.Exam.ScanKey
	if scanKey == "" {
		scanKey = exam.ScanKey(ref, in.Exam.ScanDigest)
	}
	scan, err := store.get(ctx, scanKey)
	if err != nil {
		return src, err
	}
	if src.Geometry, err = octdicom.ReadGeometry(bytes.NewReader(scan), int64(len(scan))); err != nil {
		return src, fmt.Errorf("%w: the stored scan: %w", errNoSegmentation, err)
	}
	frames, rows, cols := len(src.Geometry.Frames), src.Geometry.Rows, src.Geometry.Cols
	var layers imaging.Layers
	if err := store.getJSON(ctx, exam.LayersKey(ref), &layers); err != nil {
		return src, err
	}
	src.Layers = &layers
	var mf measurementsFile
	if err := store.getJSON(ctx, exam.MeasurementsKey(ref), &mf); err != nil {
		return src, err
	}
	if mf.RetinaMeasured != nil {
		// Measured before RetinaMeasured was kept: the retina is not
		// drawn (nothing says where it was vouched for).
		if src.RetinaMeasured = unpackBits(mf.RetinaMeasured, frames*cols); src.RetinaMeasured == nil {
			return src, fmt.Errorf("%w: measurements.json marks fewer A-scans than the scan has", errNoSegmentation)
		}
	}
	labels, err := store.get(ctx, exam.LesionLabelsKey(ref))
	if err != nil {
		return src, err
	}
	var sizes [3]int
	if src.Labels, sizes, err = imaging.ReadLabelsNRRD(bytes.NewReader(labels), maxSegmentationVoxels); err != nil {
		return src, fmt.Errorf("%w: %w", errNoSegmentation, err)
	}
	if sizes != [3]int{cols, rows, frames} {
		return src, fmt.Errorf("%w: the lesion labels are %v, the scan %d×%d×%d", errNoSegmentation, sizes, cols, rows, frames)
	}
	return src, nil
}
