package exam

// Object keys. Every key is a pure function of the exam (and, for the
// scan, of its digest), so a re-executed stage overwrites its own output
// instead of leaving a second copy. Keys start with the exam's campus, so
// one campus's objects can be granted, listed, backed up or deleted
// apart from another's. Keys never contain patient data.

// ScanKey is where the de-identified scan is kept. The digest (of the
// upload as sent) is part of the key so that a conflicting upload under
// the same exam ID can never overwrite the scan an accepted exam is
// processing.
func ScanKey(r Ref, digest string) string {
	if len(digest) > 16 {
		digest = digest[:16]
	}
	return r.prefix() + "scan-" + digest + ".dcm"
}

// DenoisedKey is the denoised volume (DICOM, without patient identifier).
func DenoisedKey(r Ref) string { return r.prefix() + "denoised.dcm" }

// LayersKey is the layer boundaries (JSON).
func LayersKey(r Ref) string { return r.prefix() + "layers.json" }

// LesionsKey is the lesion list (JSON).
func LesionsKey(r Ref) string { return r.prefix() + "lesions.json" }

// LesionLabelsKey is the lesion masks as a label volume (gzip NRRD).
func LesionLabelsKey(r Ref) string { return r.prefix() + "lesion-labels.nrrd" }

// MeasurementsKey is the measurements (JSON).
func MeasurementsKey(r Ref) string { return r.prefix() + "measurements.json" }

// ReportJSONKey is the structured report.
func ReportJSONKey(r Ref) string { return r.prefix() + "report.json" }

// ReportPDFKey is the printable report.
func ReportPDFKey(r Ref) string { return r.prefix() + "report.pdf" }

// ReviewKey is the clinician's review: every decision, kept beyond
// Temporal's retention.
func ReviewKey(r Ref) string { return r.prefix() + "review.json" }

// ScansPrefix is where every campus's exams keep their objects.
const ScansPrefix = "exams/"

func (r Ref) prefix() string { return ScansPrefix + r.Campus + "/" + r.ID + "/" }
