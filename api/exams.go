package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
	"octflow/lifecycle"
	"octflow/storage"
)

// Memo fields kept on each exam's workflow.
const (
	memoDigest       = "scanDigest"
	memoSubmissionID = "submissionId"
	memoDeviceID     = "deviceId"
	memoSubmitter    = lifecycle.MemoSubmitter
)

// SubmitMeta is the JSON "meta" part of POST /v1/exams.
type SubmitMeta struct {
	ExamID      string `json:"examId"`
	Priority    string `json:"priority"`
	Eye         string `json:"eye"`
	CallbackURL string `json:"callbackUrl"`
	// PatientRef, if given, is pseudonymised like the DICOM Patient ID.
	PatientRef string `json:"patientRef"`
}

// upload is a validated submission spooled to disk.
type upload struct {
	meta   SubmitMeta
	file   *os.File
	size   int64
	digest string
	volume *imaging.Volume
	header imaging.Header
}

func (u *upload) close() {
	if u.file != nil {
		u.file.Close()
		os.Remove(u.file.Name())
	}
}

// submitExam accepts a scan. New exam → 202; the same scan again → 200
// with the existing exam; another scan under a taken exam ID → 409.
// Nothing is stored and no workflow starts unless the whole request is
// valid.
func (s *Server) submitExam(c echo.Context) error {
	who := principal(c)
	if err := s.takeUploadTurn(c); err != nil {
		return err
	}
	defer func() { <-s.uploads }()
	up, err := s.readUpload(c)
	defer up.close()
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	id := up.meta.ExamID

	// A repeat of a known exam is answered from Temporal without storing
	// anything.
	if desc, err := s.describe(ctx, id); err == nil {
		return s.answerExisting(c, desc, up.digest, who)
	} else if !isNotFound(err) {
		return problem(http.StatusServiceUnavailable, "unavailable", "temporal: "+err.Error())
	}

	prio, _ := exam.ParsePriority(up.meta.Priority)
	eye, _ := exam.ParseEye(up.meta.Eye)
	if eye == "" {
		eye = exam.Eye(up.volume.Laterality)
	}
	patient := up.meta.PatientRef
	if patient == "" {
		patient = up.header.PatientID
	}
	sub := exam.Submission{
		ExamID: id, Priority: prio, Eye: eye, CallbackURL: up.meta.CallbackURL,
		PatientRef: s.cfg.Pseudonymizer.Ref(patient),
		DeviceID:   who.DeviceID, Campus: who.Campus,
		ScanKey: exam.ScanKey(id, up.digest), ScanDigest: up.digest,
		SubmittedAt: time.Now().UTC(),
	}
	if _, err := up.file.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("rewind upload: %w", err)
	}
	if err := s.cfg.Store.Put(ctx, sub.ScanKey, up.file, up.size, "application/dicom"); err != nil {
		return problem(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
	}

	submissionID := randomID()
	_, startErr := s.cfg.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        contract.ExamWorkflowID(id),
		TaskQueue: exam.WorkflowQueue,
		// Temporal's uniqueness on the workflow ID is the lock: a running
		// exam is returned as is, a finished one is never run again.
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		Memo: map[string]any{
			memoDigest: up.digest, memoSubmissionID: submissionID, memoDeviceID: who.DeviceID,
			memoSubmitter: who.Name,
		},
		TypedSearchAttributes: examSearchAttributes(sub),
	}, contract.ExamWorkflow, contract.ExamInput{Submission: sub, Policy: s.cfg.Policy})
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if startErr != nil && !errors.As(startErr, &already) {
		s.discardScan(sub.ScanKey, id)
		return problem(http.StatusServiceUnavailable, "unavailable", "temporal: "+startErr.Error())
	}
	desc, err := s.describe(ctx, id)
	if err != nil {
		return problem(http.StatusServiceUnavailable, "unavailable", "temporal: "+err.Error())
	}
	if s.memoString(desc, memoSubmissionID) != submissionID {
		// Another request won the race for this exam ID.
		if s.memoString(desc, memoDigest) != up.digest {
			s.discardScan(sub.ScanKey, id)
		}
		return s.answerExisting(c, desc, up.digest, who)
	}
	s.cfg.Logger.Info("exam accepted", zap.String("examId", id), zap.String("priority", string(prio)),
		zap.String("deviceId", who.DeviceID))
	st, err := s.status(ctx, desc)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/exams/"+url.PathEscape(id))
	return c.JSON(http.StatusAccepted, st)
}

// examSearchAttributes are a new run's search attributes: the Web UI
// and `temporal workflow list --query` filter exams by them.
func examSearchAttributes(sub exam.Submission) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(
		temporal.NewSearchAttributeKeyKeyword(exam.AttrState).ValueSet(string(lifecycle.Created)),
		temporal.NewSearchAttributeKeyKeyword(exam.AttrPriority).ValueSet(string(sub.Priority)),
		temporal.NewSearchAttributeKeyKeyword(exam.AttrDeviceID).ValueSet(sub.DeviceID),
		temporal.NewSearchAttributeKeyKeyword(exam.AttrCampus).ValueSet(sub.Campus),
	)
}

// takeUploadTurn waits for one of the upload slots, or answers 503.
func (s *Server) takeUploadTurn(c echo.Context) error {
	wait := time.NewTimer(s.cfg.UploadWait)
	defer wait.Stop()
	select {
	case s.uploads <- struct{}{}:
		return nil
	case <-wait.C:
	case <-c.Request().Context().Done():
	}
	c.Response().Header().Set("Retry-After", "10")
	return problem(http.StatusServiceUnavailable, "unavailable", "the gateway is validating as many scans as it may; retry shortly")
}

// answerExisting replies to a submission whose exam ID is taken.
func (s *Server) answerExisting(c echo.Context, desc *workflowservice.DescribeWorkflowExecutionResponse, digest string, who Principal) error {
	id := examIDOf(desc.GetWorkflowExecutionInfo().GetExecution().GetWorkflowId())
	if s.memoString(desc, memoDigest) != digest {
		p := problem(http.StatusConflict, "exam-conflict", "exam "+id+" was submitted with a different scan")
		p.ExamID = id
		return p
	}
	st, err := s.status(c.Request().Context(), desc)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/exams/"+url.PathEscape(id))
	return c.JSON(http.StatusOK, st)
}

// discardScan removes a scan that no exam will use. It runs detached
// from the request so a client hang-up cannot leave it behind.
func (s *Server) discardScan(key, examID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.cfg.Store.Delete(ctx, key); err != nil {
		s.cfg.Logger.Warn("could not remove unused scan", zap.String("examId", examID), zap.Error(err))
	}
}

// readUpload parses and validates the multipart body, spooling the scan
// to disk while hashing it. Every failure is a 4xx problem.
func (s *Server) readUpload(c echo.Context) (*upload, error) {
	up := &upload{}
	req := c.Request()
	mediaType, _, err := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	if err != nil || mediaType != "multipart/form-data" {
		return up, problem(http.StatusUnsupportedMediaType, "unsupported-media",
			"POST /v1/exams takes multipart/form-data with parts meta (JSON) and scan (DICOM)")
	}
	req.Body = http.MaxBytesReader(c.Response(), req.Body, s.cfg.MaxScanBytes+1<<20)
	mr, err := req.MultipartReader()
	if err != nil {
		return up, problem(http.StatusBadRequest, "malformed-request", "multipart body: "+err.Error())
	}
	var metaSeen bool
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return up, readProblem(err, s.cfg.MaxScanBytes)
		}
		switch part.FormName() {
		case "meta":
			dec := json.NewDecoder(io.LimitReader(part, 64<<10))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&up.meta); err != nil {
				return up, problem(http.StatusBadRequest, "malformed-request", "meta part is not valid JSON: "+err.Error())
			}
			metaSeen = true
		case "scan":
			if up.file != nil {
				return up, problem(http.StatusBadRequest, "malformed-request", "more than one scan part")
			}
			f, err := os.CreateTemp(s.cfg.SpoolDir, "octflow-upload-*")
			if err != nil {
				return up, fmt.Errorf("spool upload: %w", err)
			}
			up.file = f
			h := sha256.New()
			n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(part, s.cfg.MaxScanBytes+1))
			if err != nil {
				return up, readProblem(err, s.cfg.MaxScanBytes)
			}
			if n > s.cfg.MaxScanBytes {
				return up, problem(http.StatusRequestEntityTooLarge, "too-large", fmt.Sprintf("scan exceeds %d bytes", s.cfg.MaxScanBytes))
			}
			up.size, up.digest = n, hex.EncodeToString(h.Sum(nil))
		default:
			return up, problem(http.StatusBadRequest, "malformed-request", fmt.Sprintf("unexpected part %q", part.FormName()))
		}
	}
	if !metaSeen {
		return up, problem(http.StatusBadRequest, "malformed-request", "missing meta part")
	}
	if up.file == nil || up.size == 0 {
		return up, problem(http.StatusBadRequest, "malformed-request", "missing scan part")
	}
	if err := validateMeta(up.meta); err != nil {
		return up, err
	}
	if up.meta.CallbackURL != "" {
		if s.cfg.Callbacks == nil {
			return up, problem(http.StatusUnprocessableEntity, "invalid-callback", "this gateway accepts no callback URLs")
		}
		if err := s.cfg.Callbacks.Check(up.meta.CallbackURL); err != nil {
			return up, problem(http.StatusUnprocessableEntity, "invalid-callback", err.Error())
		}
	}
	if _, err := up.file.Seek(0, io.SeekStart); err != nil {
		return up, fmt.Errorf("rewind upload: %w", err)
	}
	up.volume, up.header, err = imaging.ReadDICOM(up.file, up.size)
	if err != nil {
		if errors.Is(err, imaging.ErrInvalidVolume) {
			p := problem(http.StatusUnprocessableEntity, "invalid-volume", err.Error())
			p.ExamID = up.meta.ExamID
			return up, p
		}
		return up, fmt.Errorf("read upload: %w", err)
	}
	if up.meta.Eye != "" && up.volume.Laterality != "" && up.meta.Eye != up.volume.Laterality {
		return up, problem(http.StatusUnprocessableEntity, "invalid-meta",
			fmt.Sprintf("meta says eye %s but the scan's laterality is %s", up.meta.Eye, up.volume.Laterality))
	}
	up.volume.Data = nil // validated; the stages read it again from the store
	return up, nil
}

func validateMeta(m SubmitMeta) error {
	bad := func(detail string) error { return problem(http.StatusBadRequest, "invalid-meta", detail) }
	if err := exam.ValidateID(m.ExamID); err != nil {
		return bad(err.Error())
	}
	if _, err := exam.ParsePriority(m.Priority); err != nil {
		return bad(err.Error())
	}
	if _, err := exam.ParseEye(m.Eye); err != nil {
		return bad(err.Error())
	}
	return nil
}

func readProblem(err error, limit int64) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return problem(http.StatusRequestEntityTooLarge, "too-large", fmt.Sprintf("request exceeds %d bytes", limit))
	}
	return problem(http.StatusBadRequest, "malformed-request", "reading body: "+err.Error())
}

// examFromPath describes the exam named in the path, as a 404 problem if
// there is none the caller may see. Devices see only their own exams.
func (s *Server) examFromPath(c echo.Context) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	id := c.Param("examId")
	notFound := problem(http.StatusNotFound, "not-found", "no exam "+id)
	if exam.ValidateID(id) != nil {
		return nil, notFound
	}
	desc, err := s.describe(c.Request().Context(), id)
	if isNotFound(err) {
		return nil, notFound
	} else if err != nil {
		return nil, problem(http.StatusServiceUnavailable, "unavailable", "temporal: "+err.Error())
	}
	if who := principal(c); who.Role == RoleDevice && s.memoString(desc, memoDeviceID) != who.DeviceID {
		// Not 403: a device must not learn which exam IDs other devices use.
		return nil, notFound
	}
	return desc, nil
}

// getReport serves GET /v1/exams/{examId}/report?format=pdf|json.
func (s *Server) getReport(c echo.Context) error {
	desc, err := s.examFromPath(c)
	if err != nil {
		return err
	}
	id := examIDOf(desc.GetWorkflowExecutionInfo().GetExecution().GetWorkflowId())
	key, contentType := exam.ReportPDFKey(id), "application/pdf"
	switch c.QueryParam("format") {
	case "json":
		key, contentType = exam.ReportJSONKey(id), "application/json"
	case "pdf", "":
	default:
		return problem(http.StatusBadRequest, "malformed-request", "format must be pdf or json")
	}
	rc, size, err := s.cfg.Store.Get(c.Request().Context(), key)
	if errors.Is(err, storage.ErrNotFound) {
		return problem(http.StatusNotFound, "not-found", "exam "+id+" has no report yet")
	} else if err != nil {
		return problem(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
	}
	defer rc.Close()
	c.Response().Header().Set(echo.HeaderContentLength, strconv.FormatInt(size, 10))
	return c.Stream(http.StatusOK, contentType, rc)
}

// getExam returns an exam's status.
func (s *Server) getExam(c echo.Context) error {
	desc, err := s.examFromPath(c)
	if err != nil {
		return err
	}
	st, err := s.status(c.Request().Context(), desc)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

func (s *Server) describe(ctx context.Context, examID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return s.cfg.Temporal.DescribeWorkflowExecution(ctx, contract.ExamWorkflowID(examID), "")
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

func (s *Server) memoString(desc *workflowservice.DescribeWorkflowExecutionResponse, field string) string {
	p := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()[field]
	var v string
	if p == nil || s.cfg.Codec.Data.FromPayload(p, &v) != nil {
		return ""
	}
	return v
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
