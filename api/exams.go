package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"octflow/api/auditing"
	"octflow/api/auth"
	"octflow/api/problems"
	"octflow/contract"
	"octflow/lifecycle"
	"octflow/storage"
)

// startRun starts a run of the exam's pipeline with in, keeping memo
// (contract.ExamStartOptions): a first run, or an admin's rerun. The
// run's search attributes say CREATED until it moves.
func (s *Server) startRun(ctx context.Context, in contract.ExamInput, memo contract.ExamMemo, rerun, supersede bool) error {
	_, err := s.cfg.Temporal.ExecuteWorkflow(ctx, contract.ExamStartOptions(in.Submission, in.Policy,
		contract.ExamStart{Memo: memo, State: string(lifecycle.Created), Rerun: rerun, Supersede: supersede}), contract.ExamWorkflow, in)
	return err
}

// getReport serves GET /v1/exams/{examId}/report?format=pdf|json.
func (s *Server) getReport(c echo.Context) error {
	format := c.QueryParam("format")
	if format != "" && format != "pdf" && format != "json" {
		return problems.New(http.StatusBadRequest, "malformed-request", "format must be pdf or json")
	}
	f, err := s.findExam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	rec, err := s.record(ctx, f)
	if err != nil {
		return unavailable(ctx, err)
	}
	notYet := problems.New(http.StatusNotFound, "not-found", "exam "+f.ref.ID+" has no report yet")
	if rec.Report == nil {
		return notYet
	}
	key, contentType := rec.Report.PDFKey, "application/pdf"
	if format == "json" {
		key, contentType = rec.Report.JSONKey, "application/json"
	}
	rc, size, err := s.cfg.Store.Get(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return notYet
	} else if err != nil {
		return problems.New(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
	}
	defer rc.Close()
	auditing.Note(c, "read-report", f.ref)
	c.Response().Header().Set(echo.HeaderContentLength, strconv.FormatInt(size, 10))
	return c.Stream(http.StatusOK, contentType, rc)
}

// getExam returns an exam's status.
func (s *Server) getExam(c echo.Context) error {
	f, err := s.findExam(c)
	if err != nil {
		return err
	}
	who := auth.Of(c)
	uploader := who.Role == auth.RoleDevice || who.Role == auth.RoleRouter
	if uploader && !s.sentBy(f, who) {
		// Like a missing exam: a device learns nothing of another's.
		auditing.Refused(c, "not this device's exam", nil)
		return problems.New(http.StatusNotFound, "not-found", "no such exam")
	}
	st, err := s.status(c.Request().Context(), f)
	if err != nil {
		return err
	}
	if uploader {
		st = forUploader(st)
	}
	auditing.Note(c, "read-status", f.ref)
	return c.JSON(http.StatusOK, st)
}

// forUploader is an exam's status as a device or router may read it:
// where its exam stands and where its report is, not what it found. The
// report's summary and the review are the clinicians'.
func forUploader(st *ExamStatus) *ExamStatus {
	if st == nil {
		return nil
	}
	out := *st
	if st.Report != nil {
		rep := *st.Report
		rep.Summary = nil
		out.Report = &rep
	}
	out.Review = ""
	// Which GPU node ran the exam, and a failure's own words (a node's,
	// a store's or a DICOM value's), are the operators': the device
	// learns where and of what kind it failed.
	out.Node = ""
	if st.LastFailure != nil {
		f := *st.LastFailure
		f.Message = uploaderFailureMessage(f.Type)
		out.LastFailure = &f
	}
	if st.Export != nil && st.Export.Failure != "" {
		e := *st.Export
		e.Failure = uploaderFailureMessage(contract.ErrTypeExportRefused)
		out.Export = &e
	}
	return &out
}

// uploaderFailureMessage is what a device is told of a failure of type
// typ (contract.ErrType…): its kind, not its words.
func uploaderFailureMessage(typ string) string {
	switch typ {
	case contract.ErrTypeInvalidVolume:
		return "the scan could not be analysed as an OCT volume"
	case contract.ErrTypeNodeLost, contract.ErrTypeInfrastructure:
		return "a processing node or service was unavailable"
	case contract.ErrTypeExportRefused, contract.ErrTypePACSUnavailable:
		return "sending the results to the PACS failed"
	}
	return "the stage failed; the campus's clinicians and operators see why"
}

// sentBy says whether the exam was sent by who: its device, or the
// device or router that submitted it.
func (s *Server) sentBy(f *examFound, who auth.Principal) bool {
	return s.memoString(f.desc, contract.MemoDeviceID) == who.DeviceID || s.memoString(f.desc, contract.MemoSubmitter) == who.Name
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

func (s *Server) memoString(desc *workflowservice.DescribeWorkflowExecutionResponse, field string) string {
	return s.cfg.Converters.MemoString(desc, field)
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
