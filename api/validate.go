package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/labstack/echo/v4"

	"octflow/imaging"
)

// takeUploadTurn waits for one of the validation slots, or answers 503.
func (s *Server) takeUploadTurn(c echo.Context) (func(), error) {
	wait := time.NewTimer(s.cfg.Uploads.Wait)
	defer wait.Stop()
	select {
	case s.uploads <- struct{}{}:
		return func() { <-s.uploads }, nil
	case <-wait.C:
	case <-c.Request().Context().Done():
	}
	c.Response().Header().Set("Retry-After", "10")
	return func() {}, problem(http.StatusServiceUnavailable, "unavailable", "the gateway is validating as many scans as it may; retry shortly")
}

// cleanUpload validates the spooled scan as an OCT volume and writes its
// de-identified copy, in one of the few validation slots (a volume is
// held in memory). A scan that is not a valid OCT volume is 422.
func (s *Server) cleanUpload(c echo.Context, up *upload) (*cleanScan, error) {
	release, err := s.takeUploadTurn(c)
	if err != nil {
		return nil, err
	}
	defer release()
	r, err := up.scan.reader()
	if err != nil {
		return nil, fmt.Errorf("read spooled upload: %w", err)
	}
	scan, err := imaging.ParseScan(r, up.size)
	if err != nil {
		if errors.Is(err, imaging.ErrInvalidVolume) {
			return nil, unprocessable("invalid-volume", err, up.meta.ExamID)
		}
		return nil, fmt.Errorf("read upload: %w", err)
	}
	if up.meta.Eye != "" && scan.Volume.Laterality != "" && up.meta.Eye != scan.Volume.Laterality {
		return nil, problem(http.StatusUnprocessableEntity, "invalid-meta",
			fmt.Sprintf("meta says eye %s but the scan's laterality is %s", up.meta.Eye, scan.Volume.Laterality))
	}
	// The pattern is told from the original: the de-identified copy keeps
	// no descriptions.
	declared, _ := imaging.ParsePattern(up.meta.ScanType)
	pattern, err := imaging.ResolvePattern(scan.Volume, declared)
	if err != nil {
		return nil, unprocessable("invalid-meta", err, up.meta.ExamID)
	}
	patient := up.meta.PatientRef
	if patient == "" {
		patient = scan.Header.PatientID
	}
	clean := &cleanScan{laterality: scan.Volume.Laterality, patientRef: s.cfg.Pseudonymizer.Ref(principal(c).Campus, patient),
		pattern: pattern}
	if clean.file, err = os.CreateTemp(s.cfg.SpoolDir, "octflow-clean-*"); err != nil {
		return nil, fmt.Errorf("spool de-identified scan: %w", err)
	}
	err = scan.WriteDeidentified(clean.file, imaging.Deidentification{PatientID: clean.patientRef, UID: s.cfg.Pseudonymizer.UID})
	if err != nil {
		clean.close()
		if errors.Is(err, imaging.ErrInvalidVolume) {
			return nil, unprocessable("invalid-volume", err, up.meta.ExamID)
		}
		return nil, err
	}
	if clean.size, err = clean.file.Seek(0, io.SeekCurrent); err == nil {
		_, err = clean.file.Seek(0, io.SeekStart)
	}
	if err != nil {
		clean.close()
		return nil, fmt.Errorf("rewind de-identified scan: %w", err)
	}
	return clean, nil
}

// unprocessable is the 422 problem of kind for an upload of examID
// that err says is unusable.
func unprocessable(kind string, err error, examID string) *Problem {
	p := problem(http.StatusUnprocessableEntity, kind, err.Error())
	p.ExamID = examID
	return p
}
