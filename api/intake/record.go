package intake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"octflow/api/problems"
	"octflow/exam"
	"octflow/storage"
)

// The gateway keeps, with each exam's objects, what it told the device
// (exam.Record, exam.Intake): the scan sweep and a resend after Temporal
// forgot the exam read these, never Temporal's silence.

// MarkIntake writes the intake marker of a scan about to be stored for a
// new exam.
func (in *Intake) MarkIntake(ctx context.Context, mark exam.Intake) error {
	if err := in.putJSON(ctx, exam.IntakeKey(mark.Exam, mark.ScanDigest), mark); err != nil {
		return problems.New(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
	}
	return nil
}

// Record writes the exam's record, then removes the intake marker it
// replaces. The device may be told the exam was accepted only after this
// returns nil.
func (in *Intake) Record(ctx context.Context, rec exam.Record) error {
	if err := in.putJSON(ctx, exam.RecordKey(rec.Exam), rec); err != nil {
		return problems.New(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
	}
	// A marker left behind is harmless: the record outranks it.
	if err := in.cfg.Store.Delete(ctx, exam.IntakeKey(rec.Exam, rec.ScanDigest)); err != nil {
		in.cfg.Logger.Warn("an intake marker stays after its exam's record was written")
	}
	return nil
}

// ReadRecord returns the exam's record, or nil if it has none. A record
// replaced while it is read (a concurrent resend writes the same one) is
// read again.
func (in *Intake) ReadRecord(ctx context.Context, ref exam.Ref) (*exam.Record, error) {
	var err error
	for range 3 {
		var rec *exam.Record
		if rec, err = in.readRecordOnce(ctx, ref); err == nil {
			return rec, nil
		}
	}
	return nil, problems.New(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
}

func (in *Intake) readRecordOnce(ctx context.Context, ref exam.Ref) (*exam.Record, error) {
	rc, _, err := in.cfg.Store.Get(ctx, exam.RecordKey(ref))
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

// EnsureRecord writes the record of an exam Temporal holds, if it has
// none yet (its gateway stopped between the start and the record).
func (in *Intake) EnsureRecord(ctx context.Context, rec exam.Record) error {
	have, err := in.ReadRecord(ctx, rec.Exam)
	if err != nil || have != nil {
		return err
	}
	return in.Record(ctx, rec)
}

func (in *Intake) putJSON(ctx context.Context, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	return in.cfg.Store.Put(ctx, key, bytes.NewReader(b), int64(len(b)), "application/json")
}
