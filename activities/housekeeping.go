package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"octflow/contract"
	"octflow/exam"
	"octflow/storage"
)

// ArchiveReview writes a review, as it stands, to the exam's review.json
// next to its report: clinicians' decisions outlive Temporal's
// retention.
func (a *Activities) ArchiveReview(ctx context.Context, in contract.ReviewArchive) error {
	return a.putJSON(ctx, exam.ReviewKey(in.Exam), in)
}

// ScanStore lists and removes stored objects, for the scan sweep.
type ScanStore interface {
	Objects(ctx context.Context, prefix string) ([]storage.Object, error)
	Delete(ctx context.Context, key string) error
}

// ScanIndex says whether an exam took a stored scan (by the digest
// prefix in its key).
type ScanIndex interface {
	ScanInUse(ctx context.Context, ref exam.Ref, digest string) (bool, error)
}

// SweepScans removes stored scans older than the grace period that no
// exam references. A scan whose exam cannot be looked up now stays: the
// next sweep decides.
func (a *Activities) SweepScans(ctx context.Context, in contract.SweepInput) (contract.SweepResult, error) {
	var res contract.SweepResult
	objs, err := a.Scans.Objects(ctx, exam.ScansPrefix)
	if err != nil {
		return res, unavailable(ctx, err)
	}
	now := time.Now()
	for _, o := range objs {
		ref, digest, ok := exam.ParseScanKey(o.Key)
		if !ok || now.Sub(o.Modified) < in.Grace {
			continue
		}
		res.Scans++
		activity.RecordHeartbeat(ctx, res)
		used, err := a.Index.ScanInUse(ctx, ref, digest)
		if err != nil {
			return res, unavailable(ctx, err)
		}
		if used {
			continue
		}
		if err := a.Scans.Delete(ctx, o.Key); err != nil {
			return res, unavailable(ctx, err)
		}
		res.Removed++
		a.Logger.Info("removed a scan no exam took", zap.String("campus", ref.Campus), zap.String("examId", ref.ID),
			zap.Time("stored", o.Modified))
	}
	return res, nil
}
