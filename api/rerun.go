package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"octflow/api/auditing"
	"octflow/api/auth"
	"octflow/api/problems"
	"octflow/contract"
	"octflow/lifecycle"
)

// runInput is the input the exam's latest pipeline run started with.
func (s *Server) runInput(ctx context.Context, f *examFound) (contract.ExamInput, error) {
	run := f.desc.GetWorkflowExecutionInfo().GetExecution()
	events, err := s.history(ctx, run.GetWorkflowId(), run.GetRunId())
	if err != nil {
		return contract.ExamInput{}, unavailable(ctx, err)
	}
	in, err := s.cfg.Converters.Input(lifecycle.Run{Events: events})
	if err != nil {
		return contract.ExamInput{}, unavailable(ctx, err)
	}
	return in, nil
}

// RerunRequest is the optional body of POST /v1/exams/{examId}/rerun.
// Without it (or with supersede false) the rerun is of a DEAD exam;
// with supersede, of a COMPLETED exam whose report the new run's
// replaces, for the reason given.
type RerunRequest struct {
	Supersede bool   `json:"supersede"`
	Reason    string `json:"reason"`
}

// maxRerunBody bounds a rerun's body.
const maxRerunBody = 8 << 10

// readRerun reads a rerun's body, if any, and checks it: a supersede
// needs a reason of at most contract.MaxSupersedeReason bytes of
// printable UTF-8; a reason without supersede is refused.
func readRerun(c echo.Context) (RerunRequest, error) {
	var req RerunRequest
	b, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, maxRerunBody))
	if err != nil {
		return req, problems.New(http.StatusBadRequest, "malformed-request", "the rerun's body is longer than 8 KiB")
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return req, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, problems.JSON("the rerun (JSON {supersede, reason})", err)
	}
	req.Reason = strings.TrimSpace(req.Reason)
	bad := func(detail string) (RerunRequest, error) {
		return req, problems.New(http.StatusBadRequest, "malformed-request", detail)
	}
	switch {
	case !req.Supersede && req.Reason != "":
		return bad("a reason is given only with supersede")
	case !req.Supersede:
		return req, nil
	case req.Reason == "":
		return bad("a supersede needs a reason")
	case len(req.Reason) > contract.MaxSupersedeReason:
		return bad(fmt.Sprintf("reason is longer than %d bytes", contract.MaxSupersedeReason))
	case !utf8.ValidString(req.Reason) || strings.IndexFunc(req.Reason, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return bad("reason must be printable text on one line")
	}
	return req, nil
}

// reasonDigest is what the audit trail records of a supersede's
// reason: free text an admin typed may name a patient, so the trail
// holds its SHA-256 (the first 16 hex digits), which ties the entry to
// the reason the new report states.
func reasonDigest(reason string) string {
	sum := sha256.Sum256([]byte(reason))
	return hex.EncodeToString(sum[:8])
}

// rerunExam serves POST /v1/exams/{examId}/rerun: an admin starts a new
// run of a DEAD exam under the same exam ID, on the same stored scan and
// under the policy in force now. The new run names the one it follows,
// so the exam's timeline shows both. Anything but a DEAD exam is 409. A
// rerun of a DEAD run that was superseding a report supersedes it still.
//
// With {"supersede": true, "reason": ...} it is a COMPLETED exam's that
// is run again, and the new run's report replaces the latest run's (the
// only way a report is replaced, audited with the replaced run and a
// digest of the reason): its review and its export follow the new
// report. Anything but a COMPLETED exam is 409, and so is a supersede
// that finds a run of the exam started meanwhile: one runs at a time.
func (s *Server) rerunExam(c echo.Context) error {
	// Bad input is refused before Temporal is asked anything.
	req, err := readRerun(c)
	if err != nil {
		return err
	}
	f, err := s.findExam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	desc := f.desc
	info := desc.GetWorkflowExecutionInfo()
	id := f.ref.ID
	status := info.GetStatus()
	switch {
	case req.Supersede && status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
	case req.Supersede:
		p := problems.New(http.StatusConflict, "not-completed", "only a COMPLETED exam's report can be superseded; this one's latest run is not")
		p.ExamID = id
		return p
	case status == enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, status == enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED,
		status == enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT, status == enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
	default:
		p := problems.New(http.StatusConflict, "not-dead", "only a DEAD exam can be run again; this one is not")
		p.ExamID = id
		return p
	}
	in, err := s.runInput(ctx, f)
	if err != nil {
		return err
	}
	who := auth.Of(c)
	run := info.GetExecution().GetRunId()
	in.Policy = s.policyFor(in.Submission.Campus)
	prev := in.Rerun
	in.Rerun = &contract.Rerun{PreviousRunID: run, By: who.Name, At: time.Now().UTC()}
	switch {
	case req.Supersede:
		in.Rerun.Supersedes, in.Rerun.Reason = run, req.Reason
	case prev.Superseding():
		// The run that was to replace the report died: this one will.
		in.Rerun.Supersedes, in.Rerun.Reason = prev.Supersedes, prev.Reason
	}
	// A new run only after a failed one, or a completed one superseded;
	// two admins at once start one.
	err = s.startRun(ctx, in, contract.ExamMemo{ScanDigest: in.Submission.ScanDigest, SubmissionID: randomID(),
		DeviceID: in.Submission.DeviceID, Submitter: s.memoString(desc, contract.MemoSubmitter)}, true, req.Supersede)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &started) && req.Supersede:
		p := problems.New(http.StatusConflict, "not-completed", "a run of the exam started meanwhile; supersede its report once it completes")
		p.ExamID = id
		return p
	case err != nil && !errors.As(err, &started):
		return unavailable(ctx, err)
	}
	fields := []zap.Field{zap.String("campus", f.ref.Campus), zap.String("examId", id), zap.String("by", who.Name)}
	auditing.Note(c, "rerun", f.ref)
	if in.Rerun.Superseding() {
		// The replaced run and the reason's digest; never the reason.
		fields = append(fields, zap.String("supersedes", in.Rerun.Supersedes))
		auditing.Detail(c, "supersedes", in.Rerun.Supersedes)
		auditing.Detail(c, "reasonSha256", reasonDigest(in.Rerun.Reason))
	}
	s.cfg.Logger.Info("exam rerun", fields...)
	if f.desc, err = s.cfg.Temporal.DescribeWorkflowExecution(ctx, f.workflowID(), ""); err != nil {
		return unavailable(ctx, err)
	}
	st, err := s.status(ctx, f)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, examLocation(f.ref))
	return c.JSON(http.StatusAccepted, st)
}
