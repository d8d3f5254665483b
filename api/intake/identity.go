package intake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"go.uber.org/zap"

	"octflow/api/problems"
	"octflow/exam"
	"octflow/octdicom"
)

// StoreScan puts the de-identified scan under key. S3 makes an object
// visible only once it is complete, so a failed put leaves nothing.
func (in *Intake) StoreScan(ctx context.Context, key string, clean *Scan) error {
	if _, err := clean.file.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("rewind de-identified scan: %w", err)
	}
	if err := in.cfg.Store.Put(ctx, key, clean.file, clean.size, "application/dicom"); err != nil {
		return problems.New(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
	}
	return nil
}

// KeepIdentity keeps what the results need of the scan's original
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
func (in *Intake) KeepIdentity(ctx context.Context, ref exam.Ref, up *Upload) error {
	sealer := in.cfg.Identities
	if sealer == nil {
		in.cfg.Logger.Debug("no identity keys: the scan's identity is not kept, and its results cannot be filed back",
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
		in.cfg.Logger.Log(level, "the scan's identity is not kept; its results cannot be filed back",
			zap.String("campus", ref.Campus), zap.String("examId", ref.ID), zap.Error(err))
		return nil
	}
	id.Exam, id.ScanDigest = ref, up.Digest
	sealed, err := octdicom.SealIdentity(sealer, id)
	if err != nil {
		return fmt.Errorf("keep identity: %w", err)
	}
	if err := in.cfg.Store.Put(ctx, exam.IdentityKey(ref, up.Digest), bytes.NewReader(sealed), int64(len(sealed)),
		octdicom.IdentityContentType); err != nil {
		return problems.New(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
	}
	return nil
}

// EnsureIdentity keeps the identity of a resent scan whose exam has none
// (accepted before identities were kept): the resend is the way back's
// second chance.
func (in *Intake) EnsureIdentity(ctx context.Context, ref exam.Ref, up *Upload) error {
	if in.cfg.Identities == nil {
		return nil
	}
	switch ok, err := in.cfg.Store.Exists(ctx, exam.IdentityKey(ref, up.Digest)); {
	case err != nil:
		return problems.New(http.StatusServiceUnavailable, "unavailable", "object store: "+err.Error())
	case ok:
		return nil
	}
	return in.KeepIdentity(ctx, ref, up)
}
