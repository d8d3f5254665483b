package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"octflow/api/auditing"
	"octflow/api/auth"
	"octflow/api/intake"
	"octflow/api/problems"
	"octflow/contract"
	"octflow/exam"
	"octflow/lifecycle"
)

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
	who := auth.Of(c)
	release, err := s.intake.Turn(c)
	if err != nil {
		return err
	}
	defer release()
	up, clean, err := s.intake.Take(c)
	defer up.Close()
	defer clean.Close()
	if err != nil {
		return err
	}
	a, err := s.admit(c.Request().Context(), who, who.DeviceID, up.Ref, up, clean)
	if err != nil {
		return err
	}
	auditing.Note(c, "submit", a.ref)
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
func (s *Server) admit(ctx context.Context, who auth.Principal, deviceID string, ref exam.Ref, up *intake.Upload, clean *intake.Scan) (*admission, error) {
	// A repeat of a known exam is answered from Temporal.
	if desc, err := s.describeExam(ctx, ref); err == nil {
		return s.admitKnown(ctx, &examFound{ref: ref, desc: desc}, up, clean)
	} else if !isNotFound(err) {
		return nil, unavailable(ctx, err)
	}
	// Temporal does not know it; the exam's own record may: its retention
	// passed, or its database was restored from an older backup.
	rec, err := s.intake.ReadRecord(ctx, ref)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		if a, err := s.admitRecorded(ctx, rec, up); a != nil || err != nil {
			return a, err
		}
	}

	eye, _ := exam.ParseEye(up.Meta.Eye)
	if eye == "" {
		eye = exam.Eye(clean.Laterality)
	}
	sub := exam.Submission{
		ExamID: ref.ID, Priority: up.Priority, Eye: eye, CallbackURL: up.Meta.CallbackURL,
		PatientRef: clean.PatientRef, DeviceID: deviceID, Campus: ref.Campus,
		ScanKey: exam.ScanKey(ref, up.Digest), ScanDigest: up.Digest,
		SubmittedAt: time.Now().UTC(), ScanType: string(clean.Pattern),
	}
	if rec == nil {
		// Marked before it is stored: a scan is never without a marker or
		// a record, and the sweep reads those, not Temporal.
		if err := s.intake.MarkIntake(ctx, exam.Intake{Exam: ref, ScanDigest: up.Digest, At: sub.SubmittedAt}); err != nil {
			return nil, err
		}
	}
	// The original identity, sealed, before the scan: a stored scan
	// always has its way back (see intake.KeepIdentity).
	if err := s.intake.KeepIdentity(ctx, ref, up); err != nil {
		return nil, err
	}
	if err := s.intake.StoreScan(ctx, sub.ScanKey, clean); err != nil {
		return nil, err
	}

	submissionID := randomID()
	pol := s.policyFor(ref.Campus)
	// Temporal's uniqueness on the workflow ID is the lock: a start
	// that finds the exam running or finished is refused, and this
	// request then answers as a repeat. A start that succeeds is this
	// request's own.
	startErr := s.startRun(ctx, contract.ExamInput{Submission: sub, Policy: pol, Export: s.cfg.ExportCampuses[sub.Campus]},
		contract.ExamMemo{ScanDigest: up.Digest, SubmissionID: submissionID, DeviceID: deviceID, Submitter: who.Name}, false, false)
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
		if s.memoString(desc, contract.MemoSubmissionID) != submissionID {
			// Another request won the race for this exam.
			return s.admitKnown(ctx, &examFound{ref: ref, desc: desc}, up, clean)
		}
	}
	if err := s.intake.Record(ctx, exam.Record{Exam: ref, ScanDigest: up.Digest, Priority: sub.Priority, AcceptedAt: sub.SubmittedAt}); err != nil {
		// The exam runs; a resend finds it and writes the record.
		return nil, err
	}
	// A sweep that listed this exam's marker from an earlier, failed start
	// may have removed the scan just now: the record stops the next one.
	switch ok, err := s.cfg.Store.Exists(ctx, sub.ScanKey); {
	case err != nil:
		return nil, problems.New(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
	case !ok:
		if err := s.intake.StoreScan(ctx, sub.ScanKey, clean); err != nil {
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
func (s *Server) admitKnown(ctx context.Context, f *examFound, up *intake.Upload, clean *intake.Scan) (*admission, error) {
	if s.memoString(f.desc, contract.MemoScanDigest) != up.Digest {
		p := problems.New(http.StatusConflict, "exam-conflict", "exam "+f.ref.ID+" was submitted with a different scan")
		p.ExamID = f.ref.ID
		return nil, p
	}
	created := f.desc.GetWorkflowExecutionInfo().GetStartTime().AsTime()
	if err := s.intake.EnsureRecord(ctx, exam.Record{Exam: f.ref, ScanDigest: up.Digest, Priority: up.Priority, AcceptedAt: created}); err != nil {
		return nil, err
	}
	if err := s.intake.EnsureIdentity(ctx, f.ref, up); err != nil {
		return nil, err
	}
	key := exam.ScanKey(f.ref, up.Digest)
	switch ok, err := s.cfg.Store.Exists(ctx, key); {
	case err != nil:
		return nil, problems.New(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
	case !ok:
		s.cfg.Logger.Warn("a resent exam's scan was missing; storing it again",
			zap.String("campus", f.ref.Campus), zap.String("examId", f.ref.ID))
		if err := s.intake.StoreScan(ctx, key, clean); err != nil {
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
func (s *Server) admitRecorded(ctx context.Context, rec *exam.Record, up *intake.Upload) (*admission, error) {
	if rec.ScanDigest != up.Digest {
		p := problems.New(http.StatusConflict, "exam-conflict", "exam "+rec.Exam.ID+" was submitted with a different scan")
		p.ExamID = rec.Exam.ID
		return nil, p
	}
	reported, err := s.cfg.Store.Exists(ctx, exam.ReportJSONKey(rec.Exam))
	if err != nil {
		return nil, problems.New(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
	}
	if !reported {
		s.cfg.Logger.Warn("an accepted exam is unknown to Temporal and has no report; starting it again",
			zap.String("campus", rec.Exam.Campus), zap.String("examId", rec.Exam.ID))
		return nil, nil
	}
	if err := s.intake.EnsureIdentity(ctx, rec.Exam, up); err != nil {
		return nil, err
	}
	return &admission{ref: rec.Exam, code: http.StatusOK, status: archivedStatus(rec)}, nil
}

// archivedStatus is the status of an exam that completed and that
// Temporal has since forgotten, from its record: a resend is answered
// with it and never runs the exam again.
func archivedStatus(rec *exam.Record) *ExamStatus {
	ref := rec.Exam
	return &ExamStatus{
		ExamID: ref.ID, Campus: ref.Campus, State: lifecycle.Completed,
		Priority: rec.Priority, EffectivePriority: rec.Priority,
		CreatedAt: rec.AcceptedAt, UpdatedAt: rec.AcceptedAt,
		Report: &ReportInfo{JSONKey: exam.ReportJSONKey(ref), PDFKey: exam.ReportPDFKey(ref)},
	}
}

// examLocation is the exam's URL path, which a Location header names.
func examLocation(ref exam.Ref) string { return contract.ExamPath(ref, "") }
