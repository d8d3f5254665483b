package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
	"octflow/report"
	"octflow/storage"
)

// The report stage (exam.Render), on the CPU workers. It reads what the
// image stages stored and writes the report: report.json
// (exam.ReportJSONKey) and report.pdf (exam.ReportPDFKey), naming what
// computed each stage (algorithms); its output says when it made the
// report, from which the exam's review window runs. A report stands
// once written: another run of the exam never replaces it.

// reportSpec declares the report stage, on the CPU workers.
func reportSpec() exam.StageSpec {
	return exam.StageSpec{Stage: exam.Render, Activity: "RenderReport"}
}

// algorithms names what computed each image stage, recorded in every
// report.
func (a *Activities) algorithms() map[string]string {
	return map[string]string{
		string(exam.Denoise): a.denoising().Name(),
		string(exam.Layers):  a.segmenting().Name(),
		string(exam.Lesions): a.lesionMarking().Name(),
		string(exam.Measure): measureAlgorithm,
	}
}

// RenderReport writes report.json and report.pdf from the stage outputs.
func (a *Activities) RenderReport(ctx context.Context, in contract.StageInput) (contract.StageOutput, error) {
	var out contract.StageOutput
	err := a.run(ctx, reportSpec(), &out, func(ctx context.Context) error {
		var mf measurementsFile
		if err := a.getJSON(ctx, exam.MeasurementsKey(in.Exam.Ref()), &mf); err != nil {
			return err
		}
		var lesions []imaging.Lesion
		if err := a.getJSON(ctx, exam.LesionsKey(in.Exam.Ref()), &lesions); err != nil {
			return err
		}
		if mf.Analysis == nil {
			return temporal.NewNonRetryableApplicationError("measurements missing", contract.ErrTypeInvalidVolume, nil)
		}
		v, layers, err := a.loadVolumeAndLayers(ctx, in.Exam)
		if err != nil {
			return err
		}
		// The mask does not travel in measurements.json; the gate is
		// deterministic, so it is asked again.
		mf.Analysis.Quality.Mask = imaging.Assess(v, layers).Mask
		var intensity imaging.Intensity
		if err := a.getJSON(ctx, exam.IntensityKey(in.Exam.Ref()), &intensity); err != nil {
			return err
		}
		info := activity.GetInfo(ctx)
		rep := &report.Report{
			SchemaVersion: report.SchemaVersion,
			ExamID:        in.Exam.ExamID,
			PatientRef:    in.Exam.PatientRef,
			DeviceID:      in.Exam.DeviceID,
			Campus:        in.Exam.Campus,
			Eye:           mf.Eye,
			Priority:      string(in.Exam.Priority),
			SubmittedAt:   in.Exam.SubmittedAt,
			// The stage's scheduled time, not the wall clock, so that a
			// re-run writes the same report.
			GeneratedAt: info.ScheduledTime.UTC().Truncate(time.Second),
			Volume:      mf.Volume,
			Algorithms:  a.algorithms(),
			Intensity:   &intensity,
		}
		rep.FromAnalysis(mf.Analysis, lesions, v.Cols)
		figs := reportFigures(v, layers, mf.Analysis)
		jsonKey, pdfKey := exam.ReportJSONKey(in.Exam.Ref()), exam.ReportPDFKey(in.Exam.Ref())
		// A report stands once written: a retry of the same run rewrites
		// the same report, another run never replaces it.
		rep.Run = info.WorkflowExecution.RunID
		var existing report.Report
		switch err := a.getJSON(ctx, jsonKey, &existing); {
		case err == nil && existing.Run != "" && existing.Run != rep.Run:
			a.Metrics.duplicate("refused")
			return temporal.NewNonRetryableApplicationError("the exam already has a report, from another run; it is not overwritten",
				contract.ErrTypeReportExists, nil)
		case err == nil:
			// The same run's report stage completed before (a lost
			// completion, retried): the same report is written again.
			a.Metrics.duplicate("rewritten")
		case err != nil && !errors.Is(err, storage.ErrNotFound):
			return err
		}
		pdf, err := report.PDF(rep, figs)
		if err != nil {
			return err
		}
		if err := a.putJSON(ctx, jsonKey, rep); err != nil {
			return err
		}
		out.Keys = []string{jsonKey, pdfKey}
		out.Summary = summarize(mf.Analysis, len(rep.Lesions), rep.LesionFinding)
		out.ReportAt = &rep.GeneratedAt
		return a.put(ctx, pdfKey, pdf, "application/pdf")
	})
	return out, err
}

// reportFigures takes the B-scan the report shows (through the fovea of
// a cube, the one B-scan of a line or circle), its boundaries and a
// cube's thickness map. The report outlines its own lesions on it.
func reportFigures(v *imaging.Volume, l *imaging.Layers, an *imaging.Analysis) *report.Figures {
	f, col := 0, v.Cols/2
	var thickness []float32
	if m, ok := an.Figures.(*imaging.Measurements); ok {
		f, col, thickness = min(max(m.FoveaFrame, 0), v.Frames-1), m.FoveaCol, m.ThicknessMapUm
	} else if v.Frames > 1 {
		f = v.Frames / 2
	}
	figs := &report.Figures{BScan: v.Frame(f), Rows: v.Rows, Cols: v.Cols, Boundaries: map[string][]float32{},
		Thickness: thickness, Frames: v.Frames, Spacing: v.Spacing, FoveaFrame: f, FoveaCol: col}
	for name, rows := range l.Boundaries {
		if len(rows) == v.Frames*v.Cols {
			figs.Boundaries[name] = rows[f*v.Cols : (f+1)*v.Cols]
		}
	}
	return figs
}
