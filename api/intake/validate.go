package intake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/labstack/echo/v4"

	"octflow/api/auth"
	"octflow/api/problems"
	"octflow/imaging"
	"octflow/octdicom"
)

// takeUploadTurn waits, within Uploads.Wait, for one of its campus's
// validation slots and peak bytes of its campus's share of the
// validation memory, then one of the gateway's slots and peak bytes of
// the gateway's budget, or answers 503 with Retry-After. A campus holds
// at most its share of the slots (campusSlots) and of the memory
// (campusBudgets, or one scan larger than that share), so its burst
// waits behind itself, not in front of the other campuses.
func (in *Intake) takeUploadTurn(c echo.Context, peak int64) (func(), error) {
	ctx, cancel := context.WithTimeout(c.Request().Context(), in.cfg.Uploads.Wait)
	defer cancel()
	var held []func()
	release := func() {
		for i := len(held) - 1; i >= 0; i-- {
			held[i]()
		}
	}
	slot := func(ch chan struct{}) bool {
		select {
		case ch <- struct{}{}:
			held = append(held, func() { <-ch })
			return true
		case <-ctx.Done():
			return false
		}
	}
	memory := func(b *byteBudget) bool {
		give, err := b.take(ctx, peak)
		if err == nil {
			held = append(held, give)
		}
		return err == nil
	}
	campus := auth.Of(c).Campus
	if mine := in.campusSlots[campus]; mine != nil && !slot(mine) {
		return func() {}, validatingFull(c)
	}
	if mine := in.campusBudgets[campus]; mine != nil && !memory(mine) {
		release()
		return func() {}, validatingFull(c)
	}
	if !slot(in.validating) || !memory(in.budget) {
		release()
		return func() {}, validatingFull(c)
	}
	return release, nil
}

func validatingFull(c echo.Context) error {
	c.Response().Header().Set("Retry-After", "10")
	return problems.New(http.StatusServiceUnavailable, "unavailable", "the gateway is validating as many scans as it may; retry shortly")
}

// campusSlots gives each campus that uploads its share of n validation
// slots (at least one); with one campus, none: the gateway's slots are
// its own.
func campusSlots(n int, campuses []string) map[string]chan struct{} {
	if len(campuses) < 2 {
		return nil
	}
	share := max(1, n/len(campuses))
	out := map[string]chan struct{}{}
	for _, c := range campuses {
		out[c] = make(chan struct{}, share)
	}
	return out
}

// Clean validates the spooled scan as an OCT volume and writes its
// de-identified copy, in one of the few validation slots and charged to
// the validation memory budget what its header says that takes (a
// volume is held in memory). A scan that is not a valid OCT volume is
// 422; one that could never fit the budget, 413.
func (in *Intake) Clean(c echo.Context, up *Upload) (*Scan, error) {
	r, err := up.scan.reader()
	if err != nil {
		return nil, fmt.Errorf("read spooled upload: %w", err)
	}
	head, err := octdicom.PreScan(r, up.size)
	if err != nil {
		if errors.Is(err, imaging.ErrInvalidVolume) {
			return nil, unprocessable("invalid-volume", err, up.Ref.ID)
		}
		return nil, fmt.Errorf("read upload: %w", err)
	}
	if budget := in.cfg.Uploads.ValidationBytes; head.Peak > budget {
		p := problems.New(http.StatusRequestEntityTooLarge, "too-large",
			fmt.Sprintf("validating this scan (%d×%d×%d samples of %d bits) would take %d MiB; the gateway validates at most %d MiB at once",
				head.Frames, head.Rows, head.Cols, head.Bits, head.Peak>>20, budget>>20))
		p.ExamID = up.Ref.ID
		return nil, p
	}
	release, err := in.takeUploadTurn(c, head.Peak)
	if err != nil {
		return nil, err
	}
	defer release()
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("read spooled upload: rewind: %w", err)
	}
	scan, err := octdicom.ParseScan(r, up.size)
	if err != nil {
		if errors.Is(err, imaging.ErrInvalidVolume) {
			return nil, unprocessable("invalid-volume", err, up.Ref.ID)
		}
		return nil, fmt.Errorf("read upload: %w", err)
	}
	if up.Meta.Eye != "" && scan.Volume.Laterality != "" && up.Meta.Eye != scan.Volume.Laterality {
		return nil, problems.New(http.StatusUnprocessableEntity, "invalid-meta",
			fmt.Sprintf("meta says eye %s but the scan's laterality is %s", up.Meta.Eye, scan.Volume.Laterality))
	}
	// The pattern is told from the original: the de-identified copy keeps
	// no descriptions.
	declared, _ := imaging.ParsePattern(up.Meta.ScanType)
	pattern, err := imaging.ResolvePattern(scan.Volume, declared)
	if err != nil {
		return nil, unprocessable("invalid-meta", err, up.Ref.ID)
	}
	patient := up.Meta.PatientRef
	if patient == "" {
		patient = scan.Header.PatientID
	}
	campus := auth.Of(c).Campus
	clean := &Scan{Laterality: scan.Volume.Laterality, PatientRef: in.cfg.Pseudonymizer.Ref(campus, patient),
		Pattern: pattern, SOPInstance: scan.Header.SOPInstanceUID, Device: scan.Header.DeviceSerialNumber,
		Study: scan.Header.StudyInstanceUID}
	if clean.file, err = os.CreateTemp(in.cfg.SpoolDir, "octflow-clean-*"); err != nil {
		return nil, fmt.Errorf("spool de-identified scan: %w", err)
	}
	err = scan.WriteDeidentified(clean.file, octdicom.Deidentification{PatientID: clean.PatientRef, UID: in.cfg.Pseudonymizer.UIDs(campus)})
	if err != nil {
		clean.Close()
		if errors.Is(err, imaging.ErrInvalidVolume) {
			return nil, unprocessable("invalid-volume", err, up.Ref.ID)
		}
		return nil, err
	}
	if clean.size, err = clean.file.Seek(0, io.SeekCurrent); err == nil {
		_, err = clean.file.Seek(0, io.SeekStart)
	}
	if err != nil {
		clean.Close()
		return nil, fmt.Errorf("rewind de-identified scan: %w", err)
	}
	return clean, nil
}

// unprocessable is the 422 problem of kind for an upload of the exam
// examID (its reference) that err says is unusable.
func unprocessable(kind string, err error, examID string) *problems.Problem {
	p := problems.Caused(http.StatusUnprocessableEntity, kind, err)
	p.ExamID = examID
	return p
}
