package exam

// Object keys. Every key is a pure function of the exam ID (and, for the
// scan, of its digest), so a re-executed stage overwrites its own output
// instead of leaving a second copy. Keys never contain patient data.

// ScanKey is where the uploaded DICOM is kept. The digest is part of the
// key so that a conflicting upload under the same exam ID can never
// overwrite the scan an accepted exam is processing.
func ScanKey(examID, digest string) string {
	if len(digest) > 16 {
		digest = digest[:16]
	}
	return prefix(examID) + "scan-" + digest + ".dcm"
}

// DenoisedKey is the denoised volume (DICOM, without patient identifier).
func DenoisedKey(examID string) string { return prefix(examID) + "denoised.dcm" }

// LayersKey is the layer boundaries (JSON).
func LayersKey(examID string) string { return prefix(examID) + "layers.json" }

// LesionsKey is the lesion list (JSON).
func LesionsKey(examID string) string { return prefix(examID) + "lesions.json" }

// LesionLabelsKey is the lesion masks as a label volume (gzip NRRD).
func LesionLabelsKey(examID string) string { return prefix(examID) + "lesion-labels.nrrd" }

// MeasurementsKey is the measurements (JSON).
func MeasurementsKey(examID string) string { return prefix(examID) + "measurements.json" }

// ReportJSONKey is the structured report.
func ReportJSONKey(examID string) string { return prefix(examID) + "report.json" }

// ReportPDFKey is the printable report.
func ReportPDFKey(examID string) string { return prefix(examID) + "report.pdf" }

func prefix(examID string) string { return "exams/" + examID + "/" }
