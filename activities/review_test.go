package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"octflow/contract"
	"octflow/exam"
)

// openerFunc is a ReviewOpener made of a function.
type openerFunc func(context.Context, contract.ReviewStart) error

func (f openerFunc) Open(ctx context.Context, s contract.ReviewStart) error { return f(ctx, s) }

func TestTheReportStageOpensTheReviewItWasAskedToWithTheReportsSummaryAndTime(t *testing.T) {
	reportAt := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	summary := exam.Summary{ScanType: "cube", Gradable: "full"}
	asked := &contract.ReviewStart{Submission: exam.Submission{ExamID: "E9", Campus: "north"}, Policy: exam.DefaultPolicy()}
	for _, c := range []struct {
		name       string
		review     *contract.ReviewStart
		openErr    error
		noOpener   bool
		wantOpened bool
		wantType   string // "": no error
	}{
		{name: "asked", review: asked, wantOpened: true},
		{name: "not asked (an exam from before)", review: nil},
		{name: "not asked, no opener", review: nil, noOpener: true},
		{name: "Temporal unreachable", review: asked, openErr: errors.New("connection refused"), wantOpened: true,
			wantType: contract.ErrTypeInfrastructure},
		{name: "asked, no opener on this worker", review: asked, noOpener: true, wantType: "plain"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var opened *contract.ReviewStart
			a := &Activities{}
			if !c.noOpener {
				a.Reviews = openerFunc(func(_ context.Context, s contract.ReviewStart) error { opened = &s; return c.openErr })
			}
			err := a.openReview(context.Background(), c.review, summary, reportAt)
			if (opened != nil) != c.wantOpened {
				t.Fatalf("opened = %+v, want opened %v", opened, c.wantOpened)
			}
			if opened != nil && (opened.Submission.ExamID != "E9" || !opened.ReportAt.Equal(reportAt) || opened.Summary.Gradable != "full" ||
				opened.Policy.ReviewWindow != asked.Policy.ReviewWindow) {
				t.Errorf("opened %+v", opened)
			}
			var app *temporal.ApplicationError
			switch {
			case c.wantType == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case c.wantType == "plain" && (err == nil || errors.As(err, &app)):
				t.Errorf("err = %v, want a plain error (retried, then the exam is DEAD with it)", err)
			case c.wantType != "" && c.wantType != "plain" && (!errors.As(err, &app) || app.Type() != c.wantType):
				t.Errorf("err = %v, want a %s error", err, c.wantType)
			}
		})
	}
}
