package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.uber.org/zap"

	"octflow/api/problems"
	"octflow/contract"
	"octflow/exam"
	"octflow/lifecycle"
)

// ExamStatus is the body of GET /v1/exams/{examId}.
type ExamStatus struct {
	ExamID            string             `json:"examId"`
	Campus            string             `json:"campus"`
	State             lifecycle.State    `json:"state"`
	Stage             exam.Stage         `json:"stage,omitempty"`
	Priority          exam.Priority      `json:"priority"`
	EffectivePriority exam.Priority      `json:"effectivePriority"`
	Attempt           int32              `json:"attempt"`
	Node              string             `json:"node,omitempty"`
	CreatedAt         time.Time          `json:"createdAt"`
	UpdatedAt         time.Time          `json:"updatedAt"`
	LastFailure       *lifecycle.Failure `json:"lastFailure,omitempty"`
	Report            *ReportInfo        `json:"report,omitempty"`
	// Review is pending, approved, amended, rejected or expired once the
	// report exists.
	Review exam.ReviewStatus `json:"review,omitempty"`
	// Export is where the export of the results to the campus's PACS
	// stands, for a campus that has one, once the report exists.
	Export *ExportInfo `json:"export,omitempty"`
	// Runs counts the exam's pipeline runs: more than one after a rerun.
	Runs int `json:"runs,omitempty"`
}

// ExportInfo is where an exam's export to its campus's PACS stands.
type ExportInfo struct {
	// Status is pending (being sent, or waiting for the PACS to answer),
	// delivered or failed.
	Status contract.ExportStatus `json:"status"`
	// Tries counts the sends so far.
	Tries int32 `json:"tries"`
	// Instances counts the DICOM instances the PACS took.
	Instances   int        `json:"instances,omitempty"`
	Failure     string     `json:"failure,omitempty"`
	DeliveredAt *time.Time `json:"deliveredAt,omitempty"`
}

// ReportInfo points at a completed exam's report.
type ReportInfo struct {
	JSONKey string `json:"jsonKey"`
	PDFKey  string `json:"pdfKey"`
	// Summary is the report's headline figures: the clinicians'; a
	// device's or router's answer has none.
	Summary *exam.Summary `json:"summary,omitempty"`
}

// maxRuns bounds how many earlier runs of a rerun exam are read.
const maxRuns = 20

// record folds everything Temporal holds about an exam (its latest
// pipeline run, the earlier runs a rerun follows, the pending stage and
// the review) into its lifecycle.Record.
func (s *Server) record(ctx context.Context, f *examFound) (*lifecycle.Record, error) {
	desc := f.desc
	info := desc.GetWorkflowExecutionInfo()
	id := info.GetExecution().GetWorkflowId()
	latest, err := s.history(ctx, id, info.GetExecution().GetRunId())
	if err != nil {
		return nil, err
	}
	run := lifecycle.Run{Events: latest}
	if p := desc.GetPendingActivities(); len(p) > 0 {
		run.Pending = p[0]
	}
	runs := []lifecycle.Run{run}
	for prev := s.cfg.Converters.PreviousRunID(run); prev != "" && len(runs) < maxRuns; prev = s.cfg.Converters.PreviousRunID(runs[0]) {
		events, err := s.history(ctx, id, prev)
		if err != nil {
			return nil, err
		}
		runs = append([]lifecycle.Run{{Events: events}}, runs...)
	}
	// The review exists once the pipeline completed. Ask the history, not
	// desc: the run may have completed between the two reads.
	var review *lifecycle.Run
	if n := len(latest); n > 0 && latest[n-1].GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED {
		events, err := s.history(ctx, contract.ReviewWorkflowID(f.ref), "")
		switch {
		case err == nil:
			review = &lifecycle.Run{Events: events}
		case !isNotFound(err): // gone with its retention: the status shows none
			return nil, err
		}
	}
	// The export, once the report exists, for a campus with a PACS.
	var export *lifecycle.Run
	if in, err := s.cfg.Converters.Input(run); err == nil && in.Export && review != nil {
		events, err := s.history(ctx, contract.ExportWorkflowID(f.ref), "")
		switch {
		case err == nil:
			export = &lifecycle.Run{Events: events}
		case !isNotFound(err):
			return nil, err
		}
	}
	rec := lifecycle.Fold(s.cfg.Converters, time.Now(), runs, review, export)
	for _, m := range rec.Illegal {
		// The table and Temporal's record disagree: a bug to alert on.
		s.illegal.Inc()
		s.cfg.Logger.Error("illegal transition in an exam's history", zap.String("from", string(m.From)), zap.String("to", string(m.To)))
	}
	return rec, nil
}

// history reads a workflow run's history, oldest first.
func (s *Server) history(ctx context.Context, workflowID, runID string) ([]*historypb.HistoryEvent, error) {
	var events []*historypb.HistoryEvent
	it := s.cfg.Temporal.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, err
		}
		events = append(events, ev)
	}
	return events, nil
}

// status is an exam's status: where its lifecycle.Record ends.
func (s *Server) status(ctx context.Context, f *examFound) (*ExamStatus, error) {
	rec, err := s.record(ctx, f)
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	st := &ExamStatus{
		ExamID: f.ref.ID, Campus: f.ref.Campus, State: rec.State, Stage: rec.Stage, Priority: rec.Priority, EffectivePriority: rec.EffectivePriority,
		Attempt: rec.Attempt, Node: rec.Node, CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt,
		LastFailure: rec.LastFailure, Runs: rec.Runs,
	}
	if rec.State == lifecycle.Completed && rec.Report != nil {
		st.Report = &ReportInfo{JSONKey: rec.Report.JSONKey, PDFKey: rec.Report.PDFKey}
		st.Report.Summary = rec.Summary
	}
	if rec.Review != nil {
		st.Review = rec.Review.Status
	}
	if x := rec.Export; x != nil {
		st.Export = &ExportInfo{Status: x.Status, Tries: x.Tries, Instances: len(x.Instances), Failure: x.Failure, DeliveredAt: x.DeliveredAt}
	}
	return st, nil
}

// unavailable is the problem for a backing service that did not answer.
func unavailable(ctx context.Context, err error) error {
	var p *problems.Problem
	if errors.As(err, &p) {
		return p
	}
	if ctx.Err() != nil {
		return problems.New(http.StatusServiceUnavailable, "unavailable", "the request ended before Temporal answered")
	}
	return problems.New(http.StatusServiceUnavailable, "unavailable", "temporal: "+err.Error())
}
