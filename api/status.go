package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/types/known/timestamppb"

	"octflow/exam"
	"octflow/workflows"
)

// ExamStatus is the body of GET /v1/exams/{examId}.
type ExamStatus struct {
	ExamID            string        `json:"examId"`
	State             exam.State    `json:"state"`
	Stage             exam.Stage    `json:"stage,omitempty"`
	Priority          exam.Priority `json:"priority"`
	EffectivePriority exam.Priority `json:"effectivePriority"`
	Attempt           int32         `json:"attempt"`
	Node              string        `json:"node,omitempty"`
	CreatedAt         time.Time     `json:"createdAt"`
	UpdatedAt         time.Time     `json:"updatedAt"`
	LastFailure       *exam.Failure `json:"lastFailure,omitempty"`
	Report            *ReportInfo   `json:"report,omitempty"`
	// Review is pending, approved, amended, rejected or expired once the
	// report exists.
	Review exam.ReviewStatus `json:"review,omitempty"`
}

// ReportInfo points at a completed exam's report.
type ReportInfo struct {
	JSONKey string       `json:"jsonKey"`
	PDFKey  string       `json:"pdfKey"`
	Summary exam.Summary `json:"summary"`
}

// status derives an exam's status from Temporal's description of its
// workflow: the seven states are computed, not stored.
func (s *Server) status(ctx context.Context, desc *workflowservice.DescribeWorkflowExecutionResponse) (*ExamStatus, error) {
	info := desc.GetWorkflowExecutionInfo()
	id := strings.TrimPrefix(info.GetExecution().GetWorkflowId(), "exam-")
	prio := exam.Priority(searchAttr(info.GetSearchAttributes(), exam.AttrPriority))
	st := &ExamStatus{
		ExamID: id, Priority: prio, EffectivePriority: prio,
		Stage:     exam.Stage(searchAttr(info.GetSearchAttributes(), exam.AttrStage)),
		CreatedAt: ts(info.GetStartTime()),
	}
	st.UpdatedAt = st.CreatedAt
	obs := exam.Observation{Now: time.Now(), Recorded: exam.State(searchAttr(info.GetSearchAttributes(), exam.AttrState))}

	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		obs.Status = exam.Running
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		obs.Status = exam.Succeeded
	default:
		obs.Status = exam.Failed
	}
	if info.GetCloseTime() != nil {
		st.UpdatedAt = ts(info.GetCloseTime())
	}

	if pending := desc.GetPendingActivities(); len(pending) > 0 {
		pa := pending[0]
		ps := &exam.PendingStage{
			Stage:         exam.StageOfActivity(pa.GetActivityType().GetName()),
			Started:       pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED,
			Heartbeated:   pa.GetLastHeartbeatTime() != nil && ts(pa.GetLastHeartbeatTime()).After(ts(pa.GetLastStartedTime())),
			Attempt:       pa.GetAttempt(),
			NextAttemptAt: ts(pa.GetNextAttemptScheduleTime()),
		}
		obs.Pending = ps
		st.Stage, st.Attempt, st.Node = ps.Stage, ps.Attempt, pa.GetLastWorkerIdentity()
		// The bucket the stage waits in now: above the submitted one
		// once aging has promoted it.
		if bucket := exam.Priority(pa.GetPriority().GetFairnessKey()); bucket != "" {
			st.EffectivePriority = bucket
		}
		if f := pa.GetLastFailure(); f != nil {
			st.LastFailure = &exam.Failure{Stage: ps.Stage, Message: f.GetMessage(),
				Type: f.GetApplicationFailureInfo().GetType(), Attempt: ps.Attempt - 1}
		}
		for _, t := range []*timestamppb.Timestamp{pa.GetScheduledTime(), pa.GetLastStartedTime(), pa.GetLastHeartbeatTime(), pa.GetLastAttemptCompleteTime()} {
			if t != nil && ts(t).After(st.UpdatedAt) {
				st.UpdatedAt = ts(t)
			}
		}
	}
	st.State = exam.DeriveState(obs)

	if st.State == exam.Completed && obs.Status == exam.Running {
		// The report exists and the exam awaits review: the workflow
		// answers for itself.
		st.Report = &ReportInfo{JSONKey: exam.ReportJSONKey(id), PDFKey: exam.ReportPDFKey(id)}
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if v, err := s.cfg.Temporal.QueryWorkflow(qctx, info.GetExecution().GetWorkflowId(), info.GetExecution().GetRunId(), workflows.ProgressQuery); err == nil {
			var p workflows.Progress
			if v.Get(&p) == nil {
				st.Report.Summary, st.Review = p.Summary, p.Review
				if n := len(p.Transitions); n > 0 && p.Transitions[n-1].At.After(st.UpdatedAt) {
					st.UpdatedAt = p.Transitions[n-1].At.UTC()
				}
				if n := len(p.Reviews); n > 0 && p.Reviews[n-1].At.After(st.UpdatedAt) {
					st.UpdatedAt = p.Reviews[n-1].At.UTC()
				}
			}
		}
	}
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		var res exam.Result
		err := s.cfg.Temporal.GetWorkflow(ctx, info.GetExecution().GetWorkflowId(), info.GetExecution().GetRunId()).Get(ctx, &res)
		switch {
		case err == nil:
			st.Report = &ReportInfo{JSONKey: res.Report.JSONKey, PDFKey: res.Report.PDFKey, Summary: res.Summary}
			st.Review = res.Review
		case ctx.Err() != nil:
			return nil, problem(http.StatusServiceUnavailable, "unavailable", "temporal: "+err.Error())
		default:
			st.LastFailure = deadReason(err)
			if st.LastFailure.Stage == "" {
				st.LastFailure.Stage = st.Stage
			}
		}
	}
	return st, nil
}

// deadReason turns a workflow's failure into the exam's last failure.
func deadReason(err error) *exam.Failure {
	f := &exam.Failure{Message: err.Error()}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		f.Message, f.Type = app.Message(), app.Type()
	}
	var term *temporal.TerminatedError
	if errors.As(err, &term) {
		f.Message, f.Type = "terminated by an operator", "Terminated"
	}
	return f
}

func searchAttr(sa *commonpb.SearchAttributes, name string) string {
	p := sa.GetIndexedFields()[name]
	var v string
	if p == nil || converter.GetDefaultDataConverter().FromPayload(p, &v) != nil {
		return ""
	}
	return v
}

func ts(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime().UTC()
}
