package activities

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"octflow/contract"
	"octflow/exam"
	"octflow/report"
	"octflow/report/reporttest"
	"octflow/storage/storagetest"
)

// A report stands against every other run of its exam but an admin's
// superseding rerun of the run that wrote it: that one replaces it,
// says so in the report (JSON and PDF), and keeps the replaced report
// under its run's own keys. A rerun that names another run, or none,
// is refused, and the report is left as it was.
func TestOnlyASupersedingRunOfTheReportsRunReplacesIt(t *testing.T) {
	a := &Activities{}
	_, in, sub := runStages(t, a)
	ctx := context.Background()
	ref := sub.Ref()
	// The stored report is made an earlier run's, as a completed exam's is.
	var earlier report.Report
	if err := a.getJSON(ctx, exam.ReportJSONKey(ref), &earlier); err != nil {
		t.Fatal(err)
	}
	earlier.Run, earlier.GeneratedAt = "run-earlier", time.Date(2026, 11, 29, 9, 1, 0, 0, time.UTC)
	if err := a.putJSON(ctx, exam.ReportJSONKey(ref), &earlier); err != nil {
		t.Fatal(err)
	}
	earlierJSON, err := a.get(ctx, exam.ReportJSONKey(ref))
	if err != nil {
		t.Fatal(err)
	}
	earlierPDF, err := a.get(ctx, exam.ReportPDFKey(ref))
	if err != nil {
		t.Fatal(err)
	}

	render := func(rerun *contract.Rerun) error {
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestActivityEnvironment()
		RegisterStages(env, a, Pipeline(), false)
		in := in
		in.Rerun = rerun
		_, err := env.ExecuteActivity("RenderReport", in)
		return err
	}
	refused := func(name string, rerun *contract.Rerun) {
		t.Helper()
		err := render(rerun)
		var app *temporal.ApplicationError
		if !errors.As(err, &app) || app.Type() != contract.ErrTypeReportExists {
			t.Errorf("%s: %v, want %s", name, err, contract.ErrTypeReportExists)
		}
		if b, _ := a.get(ctx, exam.ReportJSONKey(ref)); !bytes.Equal(b, earlierJSON) {
			t.Errorf("%s: the report was changed", name)
		}
	}
	refused("a plain rerun", &contract.Rerun{PreviousRunID: "run-earlier", By: "admin"})
	refused("a rerun that supersedes another run's report", &contract.Rerun{PreviousRunID: "run-earlier", Supersedes: "run-other", Reason: "x"})

	supersede := &contract.Rerun{PreviousRunID: "run-earlier", Supersedes: "run-earlier", By: "admin", Reason: "wrong eye on the device"}
	for try := range 2 { // a retry of the same run writes the same report
		if err := render(supersede); err != nil {
			t.Fatalf("try %d: %v", try+1, err)
		}
		var rep report.Report
		if err := a.getJSON(ctx, exam.ReportJSONKey(ref), &rep); err != nil {
			t.Fatal(err)
		}
		want := report.Supersedes{Run: "run-earlier", GeneratedAt: earlier.GeneratedAt, Reason: supersede.Reason}
		if rep.Run == "run-earlier" || rep.Run == "" || rep.Supersedes == nil || *rep.Supersedes != want {
			t.Errorf("try %d: the report is run %q's, superseding %+v; want a new run's superseding %+v", try+1, rep.Run, rep.Supersedes, want)
		}
		pdf, err := a.get(ctx, exam.ReportPDFKey(ref))
		if err != nil {
			t.Fatal(err)
		}
		if text := strings.Join(strings.Fields(reporttest.PDFText(t, pdf)), " "); !strings.Contains(text, "Replaces the report of 2026-11-29T09:01:00Z: wrong eye on the device") {
			t.Errorf("try %d: the PDF does not say what it replaces", try+1)
		}
		if b, _ := a.get(ctx, exam.RunReportJSONKey(ref, "run-earlier")); !bytes.Equal(b, earlierJSON) {
			t.Errorf("try %d: the earlier report is not kept under its run's key", try+1)
		}
		if b, _ := a.get(ctx, exam.RunReportPDFKey(ref, "run-earlier")); !bytes.Equal(b, earlierPDF) {
			t.Errorf("try %d: the earlier PDF is not kept under its run's key", try+1)
		}
	}
}

// A review closed as superseded is archived under its report's run as
// well as in review.json, which the next review's archives overwrite.
func TestASupersededReviewIsKeptUnderItsReportsRun(t *testing.T) {
	h := &Housekeeping{Store: storagetest.NewMemory(nil)}
	ref := exam.Ref{Campus: "north", ID: "E1"}
	ctx := context.Background()
	old := contract.ReviewArchive{Exam: ref, Status: exam.ReviewSuperseded, Closed: true, ReportRun: "run-1", SupersededBy: "run-2",
		Reviews: []exam.Review{{Decision: exam.Approve, By: "dr-a"}}}
	if err := h.ArchiveReview(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := h.ArchiveReview(ctx, contract.ReviewArchive{Exam: ref, Status: exam.ReviewPending, ReportRun: "run-2"}); err != nil {
		t.Fatal(err)
	}
	store := objects{store: h.Store}
	var kept, current contract.ReviewArchive
	if err := store.getJSON(ctx, exam.RunReviewKey(ref, "run-1"), &kept); err != nil {
		t.Fatal(err)
	}
	if err := store.getJSON(ctx, exam.ReviewKey(ref), &current); err != nil {
		t.Fatal(err)
	}
	if kept.Status != exam.ReviewSuperseded || len(kept.Reviews) != 1 || kept.SupersededBy != "run-2" {
		t.Errorf("kept %+v, want the superseded review with its decision", kept)
	}
	if current.ReportRun != "run-2" || current.Status != exam.ReviewPending {
		t.Errorf("review.json holds %+v, want the new report's review", current)
	}
	if _, err := store.get(ctx, exam.RunReviewKey(ref, "run-2")); err == nil {
		t.Error("a review that was not superseded is kept under its run's key")
	}
}
