package exam

import (
	"path"
	"strings"
)

// Object keys. Every key is a pure function of the exam (and, for the
// scan, of its digest), so a re-executed stage overwrites its own output
// instead of leaving a second copy. Keys start with the exam's campus, so
// one campus's objects can be granted, listed, backed up or deleted
// apart from another's. Keys never contain patient data.

// ScanKey is where the de-identified scan is kept. The digest (of the
// instance as sent: octdicom.NewInstanceHash) is part of the key so that a conflicting upload under
// the same exam ID can never overwrite the scan an accepted exam is
// processing.
func ScanKey(r Ref, digest string) string {
	return r.prefix() + "scan-" + shortDigest(digest) + ".dcm"
}

// RecordKey is the exam's own Record.
func RecordKey(r Ref) string { return r.prefix() + "exam.json" }

// IntakeKey is the Intake marker of a scan (by its digest) whose exam is
// starting.
func IntakeKey(r Ref, digest string) string {
	return r.prefix() + "intake-" + shortDigest(digest) + ".json"
}

// shortDigest is the digest as keys carry it: its first 16 hex digits.
func shortDigest(digest string) string {
	if len(digest) > 16 {
		return digest[:16]
	}
	return digest
}

// ObjectKey is the key of the exam's object name: what every stage's
// output keys are made of.
func ObjectKey(r Ref, name string) string { return r.prefix() + name }

// DenoisedKey is the denoised volume (DICOM, without patient identifier).
func DenoisedKey(r Ref) string { return ObjectKey(r, "denoised.dcm") }

// IntensityKey holds what normalisation found of the scan's intensity
// encoding.
func IntensityKey(r Ref) string { return ObjectKey(r, "intensity.json") }

// LayersKey is the layer boundaries (JSON).
func LayersKey(r Ref) string { return ObjectKey(r, "layers.json") }

// LesionsKey is the lesion list (JSON).
func LesionsKey(r Ref) string { return ObjectKey(r, "lesions.json") }

// LesionLabelsKey is the lesion masks as a label volume (gzip NRRD).
func LesionLabelsKey(r Ref) string { return ObjectKey(r, "lesion-labels.nrrd") }

// MeasurementsKey is the measurements (JSON).
func MeasurementsKey(r Ref) string { return ObjectKey(r, "measurements.json") }

// ReportJSONKey is the structured report.
func ReportJSONKey(r Ref) string { return ObjectKey(r, "report.json") }

// ReportPDFKey is the printable report.
func ReportPDFKey(r Ref) string { return ObjectKey(r, "report.pdf") }

// RunReportJSONKey and RunReportPDFKey keep the report of run once a
// later run's report superseded it (ReportJSONKey holds the current
// one). A run ID holds no slash and no patient data.
func RunReportJSONKey(r Ref, run string) string { return ObjectKey(r, "report-"+run+".json") }

// RunReportPDFKey is the printable report of run, once superseded.
func RunReportPDFKey(r Ref, run string) string { return ObjectKey(r, "report-"+run+".pdf") }

// ExportsKey is what the exam's exports sent to the PACS, run by run:
// the references a later run's results replace (no patient identifier,
// only the UIDs octflow derived for its own objects).
func ExportsKey(r Ref) string { return ObjectKey(r, "exports.json") }

// ReviewKey is the clinician's review: every decision, kept beyond
// Temporal's retention.
func ReviewKey(r Ref) string { return r.prefix() + "review.json" }

// RunReviewKey keeps the review of run's report once a later run's
// report superseded it.
func RunReviewKey(r Ref, run string) string { return r.prefix() + "review-" + run + ".json" }

// ScansPrefix is where every campus's exams keep their objects.
const ScansPrefix = "exams/"

func (r Ref) prefix() string { return ScansPrefix + r.Campus + "/" + r.ID + "/" }

// ParseScanKey reads the exam and the digest prefix out of a scan's key.
// A key of any other shape (no campus, another object of the exam) is
// not a scan key.
func ParseScanKey(key string) (r Ref, digest string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(key, ScansPrefix), "/")
	if !strings.HasPrefix(key, ScansPrefix) || len(parts) != 3 {
		return Ref{}, "", false
	}
	name, isScan := strings.CutPrefix(parts[2], "scan-")
	digest, dicom := strings.CutSuffix(name, ".dcm")
	if !isScan || !dicom || digest == "" {
		return Ref{}, "", false
	}
	r = Ref{Campus: parts[0], ID: parts[1]}
	if r.Validate() != nil {
		return Ref{}, "", false
	}
	return r, digest, true
}

// IntakeScanKey is the key of the scan an intake marker's key guards.
func IntakeScanKey(markerKey string) (string, bool) {
	dir, name := path.Split(markerKey)
	name, ok := strings.CutPrefix(name, "intake-")
	if !ok || !strings.HasPrefix(dir, ScansPrefix) {
		return "", false
	}
	digest, ok := strings.CutSuffix(name, ".json")
	if !ok || digest == "" {
		return "", false
	}
	return dir + "scan-" + digest + ".dcm", true
}

// IdentityKey is where the original identity of a scan (by the digest
// of the instance as sent) is kept, sealed for its campus: what the
// results need to be filed back under the patient's own study (see
// package octdicom). Like the scan's, its key carries the digest, so a
// conflicting upload under the same exam ID can never replace the
// identity an accepted exam's results are filed under.
func IdentityKey(r Ref, digest string) string {
	return r.prefix() + "identity-" + shortDigest(digest) + ".sealed"
}
