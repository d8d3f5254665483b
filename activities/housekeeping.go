package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"octflow/contract"
	"octflow/exam"
	"octflow/storage"
)

// Housekeeping is octflow's upkeep of what it stores, beside the
// pipeline: the review archive (ArchiveReview) and the scan sweep
// (SweepScans), bound to what they run through. RegisterHousekeeping
// registers them.
type Housekeeping struct {
	// Store is where reviews are archived and repaired records written.
	Store ObjectStore
	// Scans lists, reads and removes the stored scans for the sweep, and
	// Index asks Temporal whether an exam took one.
	Scans  ScanStore
	Index  ScanIndex
	Logger *zap.Logger
}

// RegisterHousekeeping registers housekeeping's activities on r, run
// with h.
func RegisterHousekeeping(r worker.ActivityRegistry, h *Housekeeping) {
	r.RegisterActivityWithOptions(h.ArchiveReview, activity.RegisterOptions{Name: contract.ArchiveReview})
	r.RegisterActivityWithOptions(h.SweepScans, activity.RegisterOptions{Name: contract.SweepScans})
}

// ArchiveReview writes a review, as it stands, to the exam's review.json
// next to its report: clinicians' decisions outlive Temporal's
// retention. A review closed because its report was superseded is
// written under its report's run too (exam.RunReviewKey), beside that
// run's kept report, where the next review's archives leave it.
func (h *Housekeeping) ArchiveReview(ctx context.Context, in contract.ReviewArchive) error {
	store := objects{store: h.Store}
	if in.SupersededBy != "" && in.ReportRun != "" {
		if err := store.putJSON(ctx, exam.RunReviewKey(in.Exam, in.ReportRun), in); err != nil {
			return err
		}
	}
	return store.putJSON(ctx, exam.ReviewKey(in.Exam), in)
}

// ScanStore lists, reads and removes stored objects, for the scan sweep.
type ScanStore interface {
	Objects(ctx context.Context, prefix string) ([]storage.Object, error)
	ReadAll(ctx context.Context, key string) ([]byte, error)
	Delete(ctx context.Context, key string) error
}

// ScanIndex says whether Temporal holds an exam started with a stored
// scan (by the digest prefix in its key). The sweep asks it only to
// repair a missing record: Temporal's silence deletes nothing.
type ScanIndex interface {
	ScanInUse(ctx context.Context, ref exam.Ref, digest string) (bool, error)
}

// SweepScans removes the stored scans that octflow knows no exam will
// ever need, and nothing else. Retention is octflow's own, never
// Temporal's: a scan goes only when
//
//   - its exam's record names another scan (an upload refused as a
//     conflict, or one that lost a race for the exam ID), or
//   - its intake marker, past the grace period, has no record and
//     Temporal holds no exam started with it: the start never took and no
//     device was told 202.
//
// A scan its exam's record names stays, whatever Temporal says (its
// retention passed, its database was restored from a backup). A scan
// with neither marker nor record is not octflow's to judge: it stays and
// is counted. Scans younger than the grace period are not looked at.
func (h *Housekeeping) SweepScans(ctx context.Context, in contract.SweepInput) (contract.SweepResult, error) {
	var res contract.SweepResult
	objs, err := h.Scans.Objects(ctx, exam.ScansPrefix)
	if err != nil {
		return res, unavailable(ctx, err)
	}
	now := time.Now()
	stored := make(map[string]bool, len(objs))
	for _, o := range objs {
		stored[o.Key] = true
	}
	records := map[exam.Ref]*exam.Record{}
	recordOf := func(ref exam.Ref) (*exam.Record, error) {
		if rec, ok := records[ref]; ok {
			return rec, nil
		}
		var rec *exam.Record
		if stored[exam.RecordKey(ref)] {
			var err error
			if rec, err = h.readRecord(ctx, ref); err != nil {
				return nil, err
			}
		}
		records[ref] = rec
		return rec, nil
	}
	for _, o := range objs {
		ref, digest, ok := exam.ParseScanKey(o.Key)
		if !ok || now.Sub(o.Modified) < in.Grace {
			continue
		}
		res.Scans++
		activity.RecordHeartbeat(ctx, res)
		rec, err := recordOf(ref)
		if errors.Is(err, errUnreadable) {
			res.Unaccounted++
			h.Logger.Error("an exam's record cannot be read; its scan stays", zap.String("campus", ref.Campus),
				zap.String("examId", ref.ID), zap.Error(err))
			continue
		} else if err != nil {
			return res, err
		}
		marker := exam.IntakeKey(ref, digest)
		switch {
		case rec != nil && strings.HasPrefix(rec.ScanDigest, digest):
			res.Kept++
			continue
		case rec != nil:
			// The exam took another scan; this one can never be its.
		case !stored[marker]:
			res.Unaccounted++
			h.Logger.Warn("a stored scan has neither record nor intake marker; it stays",
				zap.String("campus", ref.Campus), zap.String("examId", ref.ID))
			continue
		default:
			var intake exam.Intake
			err := h.readJSON(ctx, marker, &intake)
			if err == nil && !strings.HasPrefix(intake.ScanDigest, digest) {
				err = fmt.Errorf("intake marker %s names scan %q: %w", marker, intake.ScanDigest, errUnreadable)
			}
			if errors.Is(err, errUnreadable) {
				res.Unaccounted++
				h.Logger.Error("an intake marker cannot be read; its scan stays", zap.Error(err))
				continue
			} else if err != nil {
				return res, err
			}
			if now.Sub(intake.At) < in.Grace {
				// A resend wrote it again since the listing: that start is
				// under way.
				continue
			}
			used, err := h.Index.ScanInUse(ctx, ref, digest)
			if err != nil {
				return res, unavailable(ctx, err)
			}
			if used {
				// The gateway stopped between the start and the record.
				rec := exam.Record{Exam: ref, ScanDigest: intake.ScanDigest, AcceptedAt: intake.At}
				if err := (objects{store: h.Store}).putJSON(ctx, exam.RecordKey(ref), rec); err != nil {
					return res, unavailable(ctx, err)
				}
				records[ref] = &rec
				res.Repaired++
				res.Kept++
				continue
			}
		}
		// Asked again right before the delete, not from the listing: a
		// resend may have made this scan an exam's since.
		switch fresh, err := h.readRecord(ctx, ref); {
		case errors.Is(err, errUnreadable):
			res.Unaccounted++
			continue
		case err != nil:
			return res, err
		case fresh != nil && strings.HasPrefix(fresh.ScanDigest, digest):
			records[ref] = fresh
			res.Kept++
			continue
		}
		// The scan, then the sealed identity kept beside it, then the
		// marker: a sweep cut off half way finds the rest by the marker.
		for _, key := range []string{o.Key, exam.IdentityKey(ref, digest), marker} {
			if key != o.Key && !stored[key] {
				continue
			}
			if err := h.Scans.Delete(ctx, key); err != nil {
				return res, unavailable(ctx, err)
			}
		}
		res.Removed++
		h.Logger.Info("removed a scan no exam took", zap.String("campus", ref.Campus), zap.String("examId", ref.ID),
			zap.Time("stored", o.Modified))
	}
	// A marker whose scan was never stored (its put failed) guards
	// nothing, nor does the identity kept for that scan.
	for _, o := range objs {
		scan, ok := exam.IntakeScanKey(o.Key)
		if !ok || stored[scan] || now.Sub(o.Modified) < in.Grace {
			continue
		}
		if ref, digest, ok := exam.ParseScanKey(scan); ok && stored[exam.IdentityKey(ref, digest)] {
			if err := h.Scans.Delete(ctx, exam.IdentityKey(ref, digest)); err != nil {
				return res, unavailable(ctx, err)
			}
		}
		if err := h.Scans.Delete(ctx, o.Key); err != nil {
			return res, unavailable(ctx, err)
		}
	}
	return res, nil
}

// readRecord reads an exam's record as it is now (nil: it has none). A
// record that names no scan is unreadable: nothing is decided on it.
func (h *Housekeeping) readRecord(ctx context.Context, ref exam.Ref) (*exam.Record, error) {
	var rec exam.Record
	switch err := h.readJSON(ctx, exam.RecordKey(ref), &rec); {
	case errors.Is(err, storage.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case rec.ScanDigest == "":
		return nil, fmt.Errorf("the record of exam %s names no scan: %w", ref, errUnreadable)
	}
	return &rec, nil
}

// errUnreadable marks a stored record or marker that is not valid JSON.
var errUnreadable = errors.New("unreadable")

// readJSON decodes a stored object the sweep reads.
func (h *Housekeeping) readJSON(ctx context.Context, key string, v any) error {
	b, err := h.Scans.ReadAll(ctx, key)
	if err != nil {
		return unavailable(ctx, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w: %w", key, errUnreadable, err)
	}
	return nil
}
