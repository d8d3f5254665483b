package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"octflow/contract"
	"octflow/exam"
)

// supersedingInput is an admin's rerun that supersedes run-1's report.
func supersedingInput() contract.ExamInput {
	in := testInput()
	in.Rerun = &contract.Rerun{PreviousRunID: "run-1", Supersedes: "run-1", By: "admin", Reason: "wrong eye", At: time.Now()}
	in.Export = true
	return in
}

// A superseding run hands its report to the exam's open review, by
// signal, instead of starting a second review beside it; the report
// stage is told what it supersedes; the export starts again though an
// earlier one completed.
func TestASupersedingRunHandsItsReportToTheOpenReview(t *testing.T) {
	env, rec := newEnv(t, nil)
	env.RegisterWorkflowWithOptions(ExportWorkflow, workflow.RegisterOptions{Name: contract.ExportWorkflow})
	env.RegisterActivityWithOptions(func(context.Context, contract.StageInput) (contract.ExportOutput, error) {
		return contract.ExportOutput{}, nil
	}, activity.RegisterOptions{Name: contract.ExportToPACS})
	var signalled []contract.ReviewStart
	env.OnSignalExternalWorkflow(mock.Anything, "review/north/E1", "", contract.ReviewSupersedeSignal, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			signalled = append(signalled, arg.(contract.ReviewStart))
			return nil
		})
	in := supersedingInput()
	env.ExecuteWorkflow(contract.ExamWorkflow, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(signalled) != 1 || signalled[0].Supersedes != "run-1" || signalled[0].ReportRun == "" || !signalled[0].ReportAt.Equal(fakeReportAt) {
		t.Fatalf("the open review was signalled %+v, want once with the new report", signalled)
	}
	for _, c := range rec.commands {
		if c == "child "+contract.ReviewWorkflow {
			t.Errorf("a second review was started beside the open one: %v", rec.commands)
		}
	}
	var report contract.ReportInput
	if err := json.Unmarshal(rec.inputs[exam.Render], &report); err != nil {
		t.Fatal(err)
	}
	if !report.Rerun.Superseding() || report.Rerun.Supersedes != "run-1" || report.Rerun.Reason != "wrong eye" {
		t.Errorf("the report stage was given rerun %+v, want the supersede", report.Rerun)
	}
	if opts := rec.children[contract.ExportWorkflow].opts; opts.WorkflowIDReusePolicy != enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE {
		t.Errorf("the superseding export starts with reuse %v, want ALLOW_DUPLICATE", opts.WorkflowIDReusePolicy)
	}
}

// With no review open (its window closed), the superseding run starts
// the new report's review under the exam's review ID, which it may
// reuse.
func TestASupersedingRunStartsANewReviewWhenNoneIsOpen(t *testing.T) {
	env, rec := newEnv(t, nil)
	env.OnSignalExternalWorkflow(mock.Anything, "review/north/E1", "", contract.ReviewSupersedeSignal, mock.Anything).Return(
		errors.New("workflow not found"))
	var reviews []contract.ReviewStart
	env.OnWorkflow(contract.ReviewWorkflow, mock.Anything, mock.Anything).Return(
		func(_ workflow.Context, in contract.ReviewStart) (contract.ReviewState, error) {
			reviews = append(reviews, in)
			return contract.ReviewState{Status: exam.ReviewExpired}, nil
		})
	in := supersedingInput()
	in.Export = false
	env.ExecuteWorkflow(contract.ExamWorkflow, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(reviews) != 1 || reviews[0].Supersedes != "run-1" {
		t.Fatalf("reviews %+v, want the new report's", reviews)
	}
	if opts := rec.children[contract.ReviewWorkflow].opts; opts.WorkflowID != "review/north/E1" ||
		opts.WorkflowIDReusePolicy != enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE {
		t.Errorf("the new review started as %s with reuse %v", opts.WorkflowID, opts.WorkflowIDReusePolicy)
	}
}

// An open review whose report is superseded takes no more decisions,
// closes as superseded with the decisions it had, archived under the
// superseded report's run, and continues as the new report's review.
func TestASupersededReviewClosesAndContinuesAsTheNewReports(t *testing.T) {
	env, rec := newEnv(t, nil)
	in := reviewStart(exam.Normal, 24*time.Hour, 0)
	in.ReportRun = "run-1"
	env.SetStartTime(in.ReportAt)
	next := in
	next.ReportRun, next.Supersedes, next.ReportAt = "run-2", "run-1", in.ReportAt.Add(2*time.Hour)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(contract.ReviewUpdate, "approve", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { t.Errorf("approve refused: %v", err) }, OnComplete: func(any, error) {},
		}, contract.ReviewRequest{Decision: exam.Approve, By: "dr test"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(contract.ReviewSupersedeSignal, next) }, time.Hour)
	env.ExecuteWorkflow(ReviewWorkflow, in)
	var cont *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &cont) {
		t.Fatalf("the review ended %v, want continued as new", err)
	}
	var got contract.ReviewStart
	if err := converter.GetDefaultDataConverter().FromPayloads(cont.Input, &got); err != nil {
		t.Fatal(err)
	}
	if cont.WorkflowType.Name != contract.ReviewWorkflow || got.ReportRun != "run-2" || !got.ReportAt.Equal(next.ReportAt) {
		t.Errorf("continued as %s with %+v, want the new report's review", cont.WorkflowType.Name, got)
	}
	// Once superseded, no decision is taken, not even an amendment
	// within the window.
	b := newReviewBook(in.Submission, in.Policy, in.Summary)
	b.closesAt, b.next = in.ReportAt.Add(24*time.Hour), &next
	if err := b.refuse(contract.ReviewRequest{Decision: exam.Amend}, in.ReportAt.Add(time.Hour)); !errors.Is(err, ErrReviewRefused) {
		t.Errorf("an amendment of the superseded report: %v, want refused", err)
	}
	if d := env.Now().Sub(in.ReportAt); d > 2*time.Hour {
		t.Errorf("the superseded review stayed open %v, until its window", d)
	}
	final := rec.archives[len(rec.archives)-1]
	if !final.Closed || final.Status != exam.ReviewSuperseded || final.ReportRun != "run-1" || final.SupersededBy != "run-2" ||
		len(final.Reviews) != 1 || final.Reviews[0].Decision != exam.Approve {
		t.Errorf("the superseded review archived %+v, want closed, superseded by run-2, with its approval", final)
	}
}
