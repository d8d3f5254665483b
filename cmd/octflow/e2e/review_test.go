package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"octflow/api"
	"octflow/api/intake"
	"octflow/exam"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
)

func (h *harness) review(token, examID, decision, note string, status int) api.ReviewResponse {
	h.t.Helper()
	body, _ := json.Marshal(api.ReviewRequest{Decision: decision, Note: note})
	var out api.ReviewResponse
	var into any
	if status == http.StatusOK {
		into = &out
	}
	h.call(http.MethodPost, token, "/v1/exams/"+examID+"/review", bytes.NewReader(body), status, into)
	return out
}

func TestReviewRulesAndTheAmendmentTrail(t *testing.T) {
	hold := make(chan struct{})
	h := newHarness(t, 1, func(c *devsystem.Config) {
		c.Policy.ReviewWindow = 8 * time.Second // short, to see it close
		c.WorkerInterceptors = withFaults(func(ctx context.Context, _ string, stage exam.Stage) error {
			if isExam(ctx, "review-1") && stage == exam.Denoise {
				<-hold
			}
			return nil
		})
	})
	ctx := context.Background()
	_, scan := phantomDICOM(t, tiny(151))
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "review-1"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	clin := h.sys.Secrets.Clinician
	h.waitFor("review-1", time.Minute, func(s *api.ExamStatus) bool { return s.Stage == exam.Denoise && s.State == lifecycle.Claimed })
	h.review(clin, "review-1", "approve", "", http.StatusConflict) // no report yet
	close(hold)
	st := h.waitFor("review-1", time.Minute, func(s *api.ExamStatus) bool { return s.State == lifecycle.Completed })
	if st.Review != exam.ReviewPending || st.Report == nil || st.Report.Summary.CentralSubfieldThicknessUm == nil {
		t.Fatalf("completed exam before review: %+v", st)
	}
	// The pipeline is over, in Temporal too (the Web UI lists it as
	// Completed); the review is a workflow of its own.
	for id, want := range map[string]enumspb.WorkflowExecutionStatus{
		h.examWF("review-1"):   enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
		h.reviewWF("review-1"): enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
	} {
		desc, err := h.sys.App.Client().DescribeWorkflowExecution(ctx, id, "")
		if err != nil || desc.GetWorkflowExecutionInfo().GetStatus() != want {
			t.Fatalf("%s: %v %v, want %v", id, desc.GetWorkflowExecutionInfo().GetStatus(), err, want)
		}
	}

	h.review(clin, "review-1", "maybe", "", http.StatusBadRequest)
	h.review(h.sys.Secrets.Device, "review-1", "approve", "", http.StatusForbidden)
	if r := h.review(clin, "review-1", "approve", "no fluid, CST normal", http.StatusOK); r.Review != exam.ReviewApproved {
		t.Errorf("after approve: %s", r.Review)
	}
	h.review(clin, "review-1", "approve", "", http.StatusConflict)
	h.review(clin, "review-1", "reject", "", http.StatusConflict)
	if r := h.review(clin, "review-1", "amend", "drusen nasal, re-check in 6 months", http.StatusOK); r.Review != exam.ReviewAmended {
		t.Errorf("after amend: %s", r.Review)
	}
	if st := h.waitFor("review-1", time.Minute, func(s *api.ExamStatus) bool { return true }); st.Review != exam.ReviewAmended || st.State != lifecycle.Completed {
		t.Errorf("status after amend: %+v", st)
	}

	var events []lifecycle.Entry
	h.getJSON(clin, "/v1/exams/review-1/events", http.StatusOK, &events)
	var trail []string
	for _, e := range events {
		if d, ok := e.Info["review"]; ok {
			trail = append(trail, d.(string)+" by "+e.Actor+": "+e.Info["note"].(string))
		}
	}
	want := []string{"approve by demo clinician: no fluid, CST normal", "amend by demo clinician: drusen nasal, re-check in 6 months"}
	if len(trail) != 2 || trail[0] != want[0] || trail[1] != want[1] {
		t.Errorf("review trail in the timeline: %q", trail)
	}

	// After the window nothing more is taken, not even an amendment, and
	// the decisions stand.
	h.waitClosed(h.reviewWF("review-1"))
	h.review(clin, "review-1", "amend", "too late", http.StatusConflict)
	if st := h.waitFor("review-1", time.Minute, func(s *api.ExamStatus) bool { return true }); st.Review != exam.ReviewAmended {
		t.Errorf("review after the window: %s, want the amendment to stand", st.Review)
	}
}
