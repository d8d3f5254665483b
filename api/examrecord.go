package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"octflow/exam"
	"octflow/lifecycle"
	"octflow/storage"
)

// The gateway keeps, with each exam's objects, what it told the device
// (exam.Record, exam.Intake): the scan sweep and a resend after Temporal
// forgot the exam read these, never Temporal's silence.

// markIntake writes the intake marker of a scan about to be stored for a
// new exam.
func (s *Server) markIntake(ctx context.Context, in exam.Intake) error {
	if err := s.putJSON(ctx, exam.IntakeKey(in.Exam, in.ScanDigest), in); err != nil {
		return problem(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
	}
	return nil
}

// recordExam writes the exam's record, then removes the intake marker
// it replaces. The device may be told the exam was accepted only after
// this returns nil.
func (s *Server) recordExam(ctx context.Context, rec exam.Record) error {
	if err := s.putJSON(ctx, exam.RecordKey(rec.Exam), rec); err != nil {
		return problem(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
	}
	// A marker left behind is harmless: the record outranks it.
	if err := s.cfg.Store.Delete(ctx, exam.IntakeKey(rec.Exam, rec.ScanDigest)); err != nil {
		s.cfg.Logger.Warn("an intake marker stays after its exam's record was written")
	}
	return nil
}

// readRecord returns the exam's record, or nil if it has none. A record
// replaced while it is read (a concurrent resend writes the same one) is
// read again.
func (s *Server) readRecord(ctx context.Context, ref exam.Ref) (*exam.Record, error) {
	var err error
	for range 3 {
		var rec *exam.Record
		if rec, err = s.readRecordOnce(ctx, ref); err == nil {
			return rec, nil
		}
	}
	return nil, problem(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
}

func (s *Server) readRecordOnce(ctx context.Context, ref exam.Ref) (*exam.Record, error) {
	rc, _, err := s.cfg.Store.Get(ctx, exam.RecordKey(ref))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var rec exam.Record
	if err := json.NewDecoder(io.LimitReader(rc, 64<<10)).Decode(&rec); err != nil {
		return nil, fmt.Errorf("read the record of exam %s: %w", ref, err)
	}
	return &rec, nil
}

// ensureRecord writes the record of an exam Temporal holds, if it has
// none yet (its gateway stopped between the start and the record).
func (s *Server) ensureRecord(ctx context.Context, rec exam.Record) error {
	have, err := s.readRecord(ctx, rec.Exam)
	if err != nil || have != nil {
		return err
	}
	return s.recordExam(ctx, rec)
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

func (s *Server) putJSON(ctx context.Context, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	return s.cfg.Store.Put(ctx, key, bytes.NewReader(b), int64(len(b)), "application/json")
}
