package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
// image stages stored (the measurements with the gate's verdict on each
// A-scan, the lesions, and the denoised volume and its layers for the
// B-scan the report shows) and writes the report: report.json
// (exam.ReportJSONKey) and report.pdf (exam.ReportPDFKey), naming what
// computed each stage as the stages said (contract.ReportInput). Its
// output is the exam's summary with the report's lesions, and says when
// it made the report, from which the exam's review window runs. A
// report stands once written: another run of the exam never replaces
// it, unless the run is an admin's superseding rerun of the run that
// wrote it (contract.Rerun.Supersedes).

// reportSpec declares the report stage, on the CPU workers.
func reportSpec() exam.StageSpec {
	return exam.StageSpec{Stage: exam.Render, Activity: "RenderReport"}
}

// RenderReport writes report.json and report.pdf from the stage outputs.
func (a *Activities) RenderReport(ctx context.Context, in contract.ReportInput) (contract.StageOutput, error) {
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
		// The gate's verdict on each A-scan, as the measure stage stored
		// it (the analysis's JSON leaves it out).
		mf.Analysis.Quality.Mask = unpackBits(mf.Graded, mf.Volume.Frames*mf.Volume.Cols)
		if mf.Analysis.Quality.Mask == nil {
			return temporal.NewNonRetryableApplicationError("measurements without the quality gate's verdict", contract.ErrTypeInvalidVolume, nil)
		}
		// The volume and its layers only for the B-scan the report shows.
		v, layers, err := a.loadVolumeAndLayers(ctx, in.Exam)
		if err != nil {
			return err
		}
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
			Algorithms:  algorithmsOf(in.Algorithms),
			// The stages that named one, in the pipeline's order: the
			// SR identifies them so.
			AlgorithmOrder: a.algorithmOrder(in.Algorithms),
			Intensity:      &intensity,
		}
		rep.FromAnalysis(mf.Analysis, lesions, mf.Volume.Cols)
		figs := reportFigures(v, layers, mf.Analysis)
		jsonKey, pdfKey := exam.ReportJSONKey(in.Exam.Ref()), exam.ReportPDFKey(in.Exam.Ref())
		// A report stands once written: a retry of the same run rewrites
		// the same report, another run never replaces it, but an admin's
		// superseding run replaces the report of the run it names (and no
		// other), keeping that one under its run's own keys.
		rep.Run = info.WorkflowExecution.RunID
		var existing report.Report
		switch err := a.getJSON(ctx, jsonKey, &existing); {
		case err == nil && existing.Run != "" && existing.Run != rep.Run && in.Rerun.Superseding() && existing.Run == in.Rerun.Supersedes:
			if err := a.keepSuperseded(ctx, in.Exam.Ref(), existing.Run); err != nil {
				return err
			}
			rep.Supersedes = &report.Supersedes{Run: existing.Run, GeneratedAt: existing.GeneratedAt, Reason: in.Rerun.Reason}
			activity.GetLogger(ctx).Info("report superseded by an admin's rerun", "superseded", existing.Run)
		case err == nil && existing.Run != "" && existing.Run != rep.Run:
			a.Metrics.duplicate("refused")
			return temporal.NewNonRetryableApplicationError("the exam already has a report, from another run; it is not overwritten",
				contract.ErrTypeReportExists, nil)
		case err == nil:
			// The same run's report stage completed before (a lost
			// completion, retried): the same report is written again,
			// naming what it superseded then.
			a.Metrics.duplicate("rewritten")
			rep.Supersedes = existing.Supersedes
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
		// The measure stage's summary, with the lesions the report counts.
		summary := in.Summary
		summary.Lesions, summary.LesionFinding = len(rep.Lesions), rep.LesionFinding
		out.Summary = &summary
		out.ReportAt = &rep.GeneratedAt
		return a.put(ctx, pdfKey, pdf, "application/pdf")
	})
	return out, err
}

// keepSuperseded copies run's report, about to be replaced, to its run's
// own keys (exam.RunReportJSONKey, exam.RunReportPDFKey), where it stays
// findable. A retry copies it again: the current report is still run's
// until the new one is written.
func (a *Activities) keepSuperseded(ctx context.Context, ref exam.Ref, run string) error {
	for from, to := range map[string]string{
		exam.ReportJSONKey(ref): exam.RunReportJSONKey(ref, run),
		exam.ReportPDFKey(ref):  exam.RunReportPDFKey(ref, run),
	} {
		b, err := a.get(ctx, from)
		if err != nil {
			return fmt.Errorf("keep the superseded report %s: %w", from, err)
		}
		contentType := "application/json"
		if strings.HasSuffix(from, ".pdf") {
			contentType = "application/pdf"
		}
		if err := a.put(ctx, to, b, contentType); err != nil {
			return fmt.Errorf("keep the superseded report as %s: %w", to, err)
		}
	}
	return nil
}

// algorithmsOf is the report's record of what computed each stage.
func algorithmsOf(byStage map[exam.Stage]string) map[string]string {
	out := make(map[string]string, len(byStage))
	for stage, name := range byStage {
		out[string(stage)] = name
	}
	return out
}

// algorithmOrder lists the stages of byStage in the order a's pipeline
// runs them (a stage it does not run, none in practice, is left to
// report.Report.AlgorithmStages, which puts it last).
func (a *Activities) algorithmOrder(byStage map[exam.Stage]string) []string {
	pipeline := a.Pipeline
	if pipeline == nil {
		pipeline = Pipeline().Specs()
	}
	var out []string
	for _, s := range pipeline.Stages() {
		if _, ok := byStage[s]; ok {
			out = append(out, string(s))
		}
	}
	return out
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
