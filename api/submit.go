package api

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/labstack/echo/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
	"octflow/lifecycle"
	"octflow/octdicom"
)

// SubmitMeta is the JSON "meta" part of POST /v1/exams.
type SubmitMeta struct {
	ExamID      string `json:"examId"`
	Priority    string `json:"priority"`
	Eye         string `json:"eye"`
	CallbackURL string `json:"callbackUrl"`
	// PatientRef, if given, is pseudonymised like the DICOM Patient ID.
	PatientRef string `json:"patientRef"`
	// ScanType is cube, line or circle, for devices whose DICOM does not
	// say; it must agree with the DICOM where the DICOM does.
	ScanType string `json:"scanType,omitempty"`
}

// upload is a submission received: its metadata, and the scan as sent,
// spooled encrypted while it is checked.
type upload struct {
	meta SubmitMeta
	// priority is the bucket the exam runs in: meta's, parsed once at
	// intake (validateMeta) and allowed (allowedPriority).
	priority exam.Priority
	scan     *spool
	size     int64
	digest   string // of the instance sent (octdicom.NewInstanceHash): a resend, direct or through a router, is the same exam
}

func (u *upload) close() {
	if u.scan != nil {
		u.scan.remove()
	}
}

// cleanScan is an upload's scan, validated and de-identified, ready to
// store.
type cleanScan struct {
	file       *os.File
	size       int64
	laterality string
	patientRef string // the pseudonym, or ""
	pattern    imaging.Pattern
	// sopInstance and device are the original's SOP Instance UID and
	// Device Serial Number, for a STOW-RS answer and the exam's reference
	// only: the stored copy keeps neither.
	sopInstance, device string
	// study is the original's Study Instance UID, held to the study of a
	// STOW-RS request sent to a study's resource.
	study string
}

func (c *cleanScan) close() {
	if c != nil && c.file != nil {
		c.file.Close()
		os.Remove(c.file.Name())
	}
}

// submitExam accepts a scan. New exam → 202; the same scan again → 200
// with the existing exam; another scan under a taken exam ID → 409.
// Nothing is stored and no workflow starts unless the whole request is
// valid; what is stored is a de-identified copy of the scan.
//
// Its order is its defence: a device may hold only a few uploads open at
// once; the body is spooled to disk (encrypted, with a deadline between
// reads and a minimum rate) before it may take one of the few validation
// slots, so a slow sender holds a connection, not the gateway; the scan
// is validated and de-identified before anything else; and nothing
// stored is ever deleted here, where a start's outcome may be unknown
// (the scan sweep removes scans no exam took).
func (s *Server) submitExam(c echo.Context) error {
	who := principal(c)
	release, err := s.takeDeviceTurn(c, who)
	if err != nil {
		return err
	}
	defer release()
	up, clean, err := s.intake(c)
	defer up.close()
	defer clean.close()
	if err != nil {
		return err
	}
	a, err := s.admit(c.Request().Context(), who, who.DeviceID, s.uploadRef(c, up), up, clean)
	if err != nil {
		return err
	}
	s.audit(c, "submit", a.ref, a.code)
	c.Response().Header().Set(echo.HeaderLocation, examLocation(a.ref))
	return c.JSON(a.code, forUploader(a.status))
}

// admission is how a scan was taken: the exam's status, 202 for a new
// exam or 200 for one that had it already.
type admission struct {
	ref    exam.Ref
	code   int
	status *ExamStatus
}

// admit takes a validated, de-identified scan as the exam ref, sent by
// who for deviceID: a repeat of a known exam is answered from Temporal
// or the exam's record; a new one is marked, stored, started and
// recorded. Another scan under a taken exam is a 409 problem. Nothing
// stored is ever deleted here, where a start's outcome may be unknown
// (the scan sweep removes scans no exam took).
func (s *Server) admit(ctx context.Context, who Principal, deviceID string, ref exam.Ref, up *upload, clean *cleanScan) (*admission, error) {
	// A repeat of a known exam is answered from Temporal.
	if desc, err := s.describeExam(ctx, ref); err == nil {
		return s.admitKnown(ctx, &examFound{ref: ref, desc: desc}, up, clean)
	} else if !isNotFound(err) {
		return nil, unavailable(ctx, err)
	}
	// Temporal does not know it; the exam's own record may: its retention
	// passed, or its database was restored from an older backup.
	rec, err := s.readRecord(ctx, ref)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		if a, err := s.admitRecorded(ctx, rec, up); a != nil || err != nil {
			return a, err
		}
	}

	eye, _ := exam.ParseEye(up.meta.Eye)
	if eye == "" {
		eye = exam.Eye(clean.laterality)
	}
	sub := exam.Submission{
		ExamID: ref.ID, Priority: up.priority, Eye: eye, CallbackURL: up.meta.CallbackURL,
		PatientRef: clean.patientRef, DeviceID: deviceID, Campus: ref.Campus,
		ScanKey: exam.ScanKey(ref, up.digest), ScanDigest: up.digest,
		SubmittedAt: time.Now().UTC(), ScanType: string(clean.pattern),
	}
	if rec == nil {
		// Marked before it is stored: a scan is never without a marker or
		// a record, and the sweep reads those, not Temporal.
		if err := s.markIntake(ctx, exam.Intake{Exam: ref, ScanDigest: up.digest, At: sub.SubmittedAt}); err != nil {
			return nil, err
		}
	}
	// The original identity, sealed, before the scan: a stored scan
	// always has its way back (see keepIdentity).
	if err := s.keepIdentity(ctx, ref, up); err != nil {
		return nil, err
	}
	if err := s.storeClean(ctx, sub.ScanKey, clean); err != nil {
		return nil, err
	}

	submissionID := randomID()
	pol := s.policyFor(ref.Campus)
	_, startErr := s.cfg.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        contract.ExamWorkflowID(ref),
		TaskQueue: exam.WorkflowQueue,
		// Temporal's uniqueness on the workflow ID is the lock: a start
		// that finds the exam running or finished is refused, and this
		// request then answers as a repeat. A start that succeeds is this
		// request's own (the SDK retries a start under one request ID,
		// which Temporal answers as the same start).
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		Memo: map[string]any{
			memoDigest: up.digest, memoSubmissionID: submissionID, memoDeviceID: deviceID,
			memoSubmitter: who.Name,
		},
		TypedSearchAttributes: examSearchAttributes(sub),
		// The exam's bucket orders its workflow tasks too, not only its
		// stages. An urgent exam starts eagerly: where this process also
		// runs the workflow worker, its first workflow task comes back
		// with the start and runs here, skipping a queue that may hold a
		// burst (the upload's answer waits for it, so only urgent ones).
		Priority:         contract.TaskPriority(pol, sub.Priority, ref.Campus),
		EnableEagerStart: sub.Priority == exam.Urgent,
	}, contract.ExamWorkflow, contract.ExamInput{Submission: sub, Policy: pol, Export: s.cfg.ExportCampuses[sub.Campus]})
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if startErr != nil {
		if !errors.As(startErr, &already) {
			// The start's outcome is unknown: a timeout, or this request
			// cancelled, may come after Temporal created the workflow.
			// Look, with a context of our own. The stored scan stays
			// either way.
			lctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := s.describeExam(lctx, ref); err != nil {
				s.cfg.Logger.Warn("exam start failed; its scan waits for a resend or the sweep",
					zap.String("campus", ref.Campus), zap.String("examId", ref.ID), zap.Error(startErr))
				return nil, unavailable(ctx, startErr)
			}
			ctx = lctx
		}
		desc, err := s.describeExam(ctx, ref)
		if err != nil {
			return nil, unavailable(ctx, err)
		}
		if s.memoString(desc, memoSubmissionID) != submissionID {
			// Another request won the race for this exam.
			return s.admitKnown(ctx, &examFound{ref: ref, desc: desc}, up, clean)
		}
	}
	if err := s.recordExam(ctx, exam.Record{Exam: ref, ScanDigest: up.digest, Priority: sub.Priority, AcceptedAt: sub.SubmittedAt}); err != nil {
		// The exam runs; a resend finds it and writes the record.
		return nil, err
	}
	// A sweep that listed this exam's marker from an earlier, failed start
	// may have removed the scan just now: the record stops the next one.
	switch ok, err := s.cfg.Store.Exists(ctx, sub.ScanKey); {
	case err != nil:
		return nil, problem(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
	case !ok:
		if err := s.storeClean(ctx, sub.ScanKey, clean); err != nil {
			return nil, err
		}
	}
	s.cfg.Logger.Info("exam accepted", zap.String("campus", ref.Campus), zap.String("examId", ref.ID),
		zap.String("priority", string(sub.Priority)), zap.String("deviceId", deviceID))
	// Labelled by the token's device (a router's own ID): the instance's
	// serial number, which a router passes on, could mint a series each.
	s.arrivals.WithLabelValues(ref.Campus, who.DeviceID).Inc()
	// The answer is what this request made: the exam, created. Its
	// moves from here are the status's to tell; reading them back now
	// would cost a history read per upload.
	st := &ExamStatus{ExamID: ref.ID, Campus: ref.Campus, State: lifecycle.Created, Priority: sub.Priority, EffectivePriority: sub.Priority,
		CreatedAt: sub.SubmittedAt, UpdatedAt: sub.SubmittedAt, Runs: 1}
	return &admission{ref: ref, code: http.StatusAccepted, status: st}, nil
}

// admitKnown answers a scan for an exam Temporal holds: the same scan is
// answered 200 with the exam (storing the scan again if it went missing,
// so the exam can still run), another scan is a conflict.
func (s *Server) admitKnown(ctx context.Context, f *examFound, up *upload, clean *cleanScan) (*admission, error) {
	if s.memoString(f.desc, memoDigest) != up.digest {
		p := problem(http.StatusConflict, "exam-conflict", "exam "+f.ref.ID+" was submitted with a different scan")
		p.ExamID = f.ref.ID
		return nil, p
	}
	created := f.desc.GetWorkflowExecutionInfo().GetStartTime().AsTime()
	if err := s.ensureRecord(ctx, exam.Record{Exam: f.ref, ScanDigest: up.digest, Priority: up.priority, AcceptedAt: created}); err != nil {
		return nil, err
	}
	if err := s.ensureIdentity(ctx, f.ref, up); err != nil {
		return nil, err
	}
	key := exam.ScanKey(f.ref, up.digest)
	switch ok, err := s.cfg.Store.Exists(ctx, key); {
	case err != nil:
		return nil, problem(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
	case !ok:
		s.cfg.Logger.Warn("a resent exam's scan was missing; storing it again",
			zap.String("campus", f.ref.Campus), zap.String("examId", f.ref.ID))
		if err := s.storeClean(ctx, key, clean); err != nil {
			return nil, err
		}
	}
	st, err := s.status(ctx, f)
	if err != nil {
		return nil, err
	}
	return &admission{ref: f.ref, code: http.StatusOK, status: st}, nil
}

// admitRecorded answers a scan for an exam Temporal does not know but
// whose record does: another scan is a conflict, and an exam whose report
// exists is answered 200 from its record and never run again. An exam
// with a record and no report was lost by Temporal (a restored database):
// no admission and no error, and the caller starts it again.
func (s *Server) admitRecorded(ctx context.Context, rec *exam.Record, up *upload) (*admission, error) {
	if rec.ScanDigest != up.digest {
		p := problem(http.StatusConflict, "exam-conflict", "exam "+rec.Exam.ID+" was submitted with a different scan")
		p.ExamID = rec.Exam.ID
		return nil, p
	}
	reported, err := s.cfg.Store.Exists(ctx, exam.ReportJSONKey(rec.Exam))
	if err != nil {
		return nil, problem(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
	}
	if !reported {
		s.cfg.Logger.Warn("an accepted exam is unknown to Temporal and has no report; starting it again",
			zap.String("campus", rec.Exam.Campus), zap.String("examId", rec.Exam.ID))
		return nil, nil
	}
	if err := s.ensureIdentity(ctx, rec.Exam, up); err != nil {
		return nil, err
	}
	return &admission{ref: rec.Exam, code: http.StatusOK, status: archivedStatus(rec)}, nil
}

// keepIdentity keeps what the results need of the scan's original
// identity (octdicom.Identity: the patient, the study, the source series
// and instance) for the way back to the PACS: read from the upload as
// sent, which only the spool holds (encrypted), sealed for the exam's
// campus with the payload codec's keys, and stored with the exam's
// objects under the upload's digest (exam.IdentityKey), so it is kept as
// long as the scan it was read from. It exists in clear only in this
// request's memory; it never goes to Temporal, a log or a metric.
//
// A scan that names no study, series or instance has no way back (a
// phantom, say): the exam runs and nothing is kept. So it is, with a
// warning, when the identity cannot be read (the scan was read whole by
// validation, so that is the gateway's own fault): the exam is not
// refused for it, and its export says the identity is missing. Without
// identity keys (Config.Identities) nothing can be sealed, and nothing
// is kept. A failed put is 503, as for the scan.
func (s *Server) keepIdentity(ctx context.Context, ref exam.Ref, up *upload) error {
	sealer := s.cfg.Identities
	if sealer == nil {
		s.cfg.Logger.Debug("no identity keys: the scan's identity is not kept, and its results cannot be filed back",
			zap.String("campus", ref.Campus), zap.String("examId", ref.ID))
		return nil
	}
	r, err := up.scan.reader()
	if err != nil {
		return fmt.Errorf("read spooled upload: %w", err)
	}
	id, err := octdicom.ReadIdentity(r, up.size)
	if err != nil {
		// The error names structure, never a value.
		level := zap.WarnLevel
		if errors.Is(err, octdicom.ErrNoIdentity) {
			level = zap.InfoLevel
		}
		s.cfg.Logger.Log(level, "the scan's identity is not kept; its results cannot be filed back",
			zap.String("campus", ref.Campus), zap.String("examId", ref.ID), zap.Error(err))
		return nil
	}
	id.Exam, id.ScanDigest = ref, up.digest
	sealed, err := octdicom.SealIdentity(sealer, id)
	if err != nil {
		return fmt.Errorf("keep identity: %w", err)
	}
	if err := s.cfg.Store.Put(ctx, exam.IdentityKey(ref, up.digest), bytes.NewReader(sealed), int64(len(sealed)),
		octdicom.IdentityContentType); err != nil {
		return problem(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
	}
	return nil
}

// ensureIdentity keeps the identity of a resent scan whose exam has none
// (accepted before identities were kept): the resend is the way back's
// second chance.
func (s *Server) ensureIdentity(ctx context.Context, ref exam.Ref, up *upload) error {
	if s.cfg.Identities == nil {
		return nil
	}
	switch ok, err := s.cfg.Store.Exists(ctx, exam.IdentityKey(ref, up.digest)); {
	case err != nil:
		return problem(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
	case ok:
		return nil
	}
	return s.keepIdentity(ctx, ref, up)
}

func examLocation(ref exam.Ref) string {
	return "/v1/exams/" + url.PathEscape(ref.ID) + "?campus=" + url.QueryEscape(ref.Campus)
}

// takeDeviceTurn admits one more upload from the device, or answers 429:
// one device cannot hold every connection.
func (s *Server) takeDeviceTurn(c echo.Context, who Principal) (func(), error) {
	key := who.Campus + "/" + who.DeviceID
	s.deviceMu.Lock()
	defer s.deviceMu.Unlock()
	if s.deviceUploads[key] >= s.cfg.Uploads.PerDevice {
		c.Response().Header().Set("Retry-After", "5")
		return func() {}, problem(http.StatusTooManyRequests, "rate-limited",
			fmt.Sprintf("this device already sends %d scans at once", s.cfg.Uploads.PerDevice))
	}
	s.deviceUploads[key]++
	return func() {
		s.deviceMu.Lock()
		defer s.deviceMu.Unlock()
		if s.deviceUploads[key]--; s.deviceUploads[key] <= 0 {
			delete(s.deviceUploads, key)
		}
	}, nil
}

// intake is everything the gateway does with an upload before it asks
// Temporal or the object store anything: receive the body, then validate
// and de-identify the scan. The caller closes both results.
func (s *Server) intake(c echo.Context) (*upload, *cleanScan, error) {
	up, err := s.receive(c)
	if err != nil {
		return up, nil, err
	}
	clean, err := s.cleanUpload(c, up)
	return up, clean, err
}

// receive reads the multipart body: the metadata, checked, and the scan,
// spooled encrypted and hashed as sent. Every failure is a 4xx problem.
func (s *Server) receive(c echo.Context) (*upload, error) {
	up := &upload{}
	req := c.Request()
	mediaType, _, err := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	if err != nil || mediaType != "multipart/form-data" {
		return up, problem(http.StatusUnsupportedMediaType, "unsupported-media",
			"POST /v1/exams takes multipart/form-data with parts meta (JSON) and scan (DICOM)")
	}
	body := http.MaxBytesReader(c.Response(), req.Body, s.cfg.MaxScanBytes+1<<20)
	req.Body = newPacedReader(body, http.NewResponseController(c.Response()), s.cfg.Uploads.Pace)
	mr, err := req.MultipartReader()
	if err != nil {
		return up, problem(http.StatusBadRequest, "malformed-request", "multipart body without a boundary")
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
			if metaSeen {
				return up, problem(http.StatusBadRequest, "malformed-request", "more than one meta part")
			}
			dec := json.NewDecoder(io.LimitReader(part, 64<<10))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&up.meta); err != nil {
				if p := readProblem(err, s.cfg.MaxScanBytes); !isMalformed(p) {
					return up, p
				}
				return up, jsonProblem("the meta part", err)
			}
			metaSeen = true
		case "scan":
			if up.scan != nil {
				return up, problem(http.StatusBadRequest, "malformed-request", "more than one scan part")
			}
			if err := s.spoolScan(up, part); err != nil {
				return up, err
			}
		default:
			return up, problem(http.StatusBadRequest, "malformed-request", "a part other than meta and scan")
		}
	}
	if !metaSeen {
		return up, problem(http.StatusBadRequest, "malformed-request", "missing meta part")
	}
	if up.scan == nil || up.size == 0 {
		return up, problem(http.StatusBadRequest, "malformed-request", "missing scan part")
	}
	prio, err := validateMeta(up.meta)
	if err != nil {
		return up, err
	}
	up.priority = allowedPriority(c, prio)
	if up.meta.CallbackURL != "" {
		if s.cfg.Callbacks == nil {
			return up, problem(http.StatusUnprocessableEntity, "invalid-callback", "this gateway accepts no callback URLs")
		}
		if err := s.cfg.Callbacks.Check(up.meta.CallbackURL); err != nil {
			return up, problem(http.StatusUnprocessableEntity, "invalid-callback", err.Error())
		}
	}
	return up, nil
}

// spoolScan spools a scan as sent into up, encrypted, and hashes it as an
// instance (its data set, not the file a router rewrote around it). A
// scan over the gateway's limit is 413; a failed read, a 4xx problem.
func (s *Server) spoolScan(up *upload, r io.Reader) error {
	var err error
	if up.scan, err = newSpool(s.cfg.SpoolDir); err != nil {
		return fmt.Errorf("spool upload: %w", err)
	}
	h := octdicom.NewInstanceHash()
	n, err := io.Copy(io.MultiWriter(up.scan, h), io.LimitReader(r, s.cfg.MaxScanBytes+1))
	if err != nil {
		return readProblem(err, s.cfg.MaxScanBytes)
	}
	if n > s.cfg.MaxScanBytes {
		return problem(http.StatusRequestEntityTooLarge, "too-large", fmt.Sprintf("scan exceeds %d bytes", s.cfg.MaxScanBytes))
	}
	up.size, up.digest = n, hex.EncodeToString(h.Sum(nil))
	return nil
}

// uploadRef is the exam an upload names: its exam ID in the device's
// campus, under its reference (the ID itself is never kept).
func (s *Server) uploadRef(c echo.Context, up *upload) exam.Ref {
	if up.meta.ExamID == "" {
		return exam.Ref{} // a STOW-RS instance: its exam is known once it is read
	}
	return s.cfg.Pseudonymizer.ExamRef(principal(c).Campus, up.meta.ExamID)
}

// storeClean puts the de-identified scan under key. S3 makes an object
// visible only once it is complete, so a failed put leaves nothing.
func (s *Server) storeClean(ctx context.Context, key string, clean *cleanScan) error {
	if _, err := clean.file.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("rewind de-identified scan: %w", err)
	}
	if err := s.cfg.Store.Put(ctx, key, clean.file, clean.size, "application/dicom"); err != nil {
		return problem(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
	}
	return nil
}

// validateMeta checks a submission's meta part and returns its priority,
// parsed here once.
func validateMeta(m SubmitMeta) (exam.Priority, error) {
	bad := func(detail string) error { return problem(http.StatusBadRequest, "invalid-meta", detail) }
	if err := exam.ValidateID(m.ExamID); err != nil {
		return "", bad(err.Error())
	}
	if exam.IsReference(m.ExamID) {
		return "", bad("exam id: ex- and 24 hex digits is the form of octflow's own exam references; a device's exam ID cannot take it")
	}
	prio, err := exam.ParsePriority(m.Priority)
	if err != nil {
		return "", bad(err.Error())
	}
	if _, err := exam.ParseEye(m.Eye); err != nil {
		return "", bad(err.Error())
	}
	if _, err := imaging.ParsePattern(m.ScanType); err != nil {
		return "", bad("scanType: not a scan pattern octflow reads (see the API reference)")
	}
	if len(m.PatientRef) > 256 || len(m.CallbackURL) > 2048 {
		return "", bad("patientRef or callbackUrl is too long")
	}
	return prio, nil
}

// readProblem is the problem for a body that could not be read: too
// large (413), too slow (408) or broken (400).
func readProblem(err error, limit int64) error {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return problem(http.StatusRequestEntityTooLarge, "too-large", fmt.Sprintf("request exceeds %d bytes", limit))
	case errors.Is(err, errUploadTooSlow):
		return problem(http.StatusRequestTimeout, "too-slow", err.Error())
	}
	return problem(http.StatusBadRequest, "malformed-request", "the body is not well-formed multipart")
}

func isMalformed(err error) bool {
	var p *Problem
	return errors.As(err, &p) && p.Status == http.StatusBadRequest
}
