package exam

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"
)

// Priority is the bucket an exam is scheduled in.
type Priority string

// The three buckets, most urgent first.
const (
	Urgent Priority = "urgent"
	Normal Priority = "normal"
	Low    Priority = "low"
)

// Buckets are the three buckets, most urgent first.
func Buckets() []Priority { return []Priority{Urgent, Normal, Low} }

// Known says whether p is one of the three buckets.
func (p Priority) Known() bool { return slices.Contains(Buckets(), p) }

// ParsePriority accepts "urgent", "normal" or "low"; "" means normal.
func ParsePriority(s string) (Priority, error) {
	if s == "" {
		return Normal, nil
	}
	if p := Priority(s); p.Known() {
		return p, nil
	}
	return "", errors.New("priority: want urgent, normal or low")
}

// Up is the next more urgent bucket: low → normal → urgent → urgent.
// Aging promotes a stage that waited too long one bucket up.
func (p Priority) Up() Priority {
	switch p {
	case Low:
		return Normal
	case Normal:
		return Urgent
	}
	return Urgent
}

// Rank orders buckets, most urgent first: urgent 0, normal 1, low 2,
// anything else 3.
func (p Priority) Rank() int {
	switch p {
	case Urgent:
		return 0
	case Normal:
		return 1
	case Low:
		return 2
	}
	return 3
}

// Eye is the laterality of the scanned eye, in DICOM's spelling.
type Eye string

// Right (oculus dexter) and left (oculus sinister) eye.
const (
	RightEye Eye = "OD"
	LeftEye  Eye = "OS"
)

// ParseEye accepts OD or OS; "" means unknown and is allowed, since the
// DICOM header usually carries laterality.
func ParseEye(s string) (Eye, error) {
	switch e := Eye(s); e {
	case RightEye, LeftEye, "":
		return e, nil
	}
	return "", errors.New("eye: want OD or OS")
}

var examIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidateID checks an exam ID: 1–128 characters of letters, digits, dot,
// dash and underscore, starting with a letter or digit. A device's exam ID
// is kept only as its reference (IsReference), which object keys and
// workflow IDs carry; an exam's reference is itself a valid exam ID.
func ValidateID(id string) error {
	if !examIDPattern.MatchString(id) {
		// The ID is not repeated: it may be an identifier, and problems
		// are audited.
		return errors.New("exam id: want 1-128 of [A-Za-z0-9._-], starting with a letter or digit")
	}
	return nil
}

var campusPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ValidateCampus checks a campus name: 1–63 lower-case letters, digits
// and dashes, starting with a letter or digit. Campus names appear in
// object keys and workflow IDs.
func ValidateCampus(c string) error {
	if !campusPattern.MatchString(c) {
		return fmt.Errorf("campus %q: want 1-63 of [a-z0-9-], starting with a letter or digit", c)
	}
	return nil
}

// Ref names one exam. A campus is a tenant: exam IDs are unique within a
// campus, and two campuses may both use E-0001 for different exams.
type Ref struct {
	Campus string `json:"campus"`
	ID     string `json:"examId"`
}

// Validate checks both parts of the reference.
func (r Ref) Validate() error {
	if err := ValidateCampus(r.Campus); err != nil {
		return err
	}
	return ValidateID(r.ID)
}

func (r Ref) String() string { return r.Campus + "/" + r.ID }

// Task queues. GPU stages run only on gpuworker nodes.
const (
	WorkflowQueue = "oct-workflows"
	CPUQueue      = "oct-cpu"
	GPUQueue      = "oct-gpu"
)

// Submission is what a device sent and the gateway accepted; it is the
// heart of every exam workflow's input. It never holds a patient identifier in clear:
// PatientRef is a keyed pseudonym.
type Submission struct {
	ExamID      string    `json:"examId"`
	Priority    Priority  `json:"priority"`
	Eye         Eye       `json:"eye,omitempty"`
	CallbackURL string    `json:"callbackUrl,omitempty"`
	PatientRef  string    `json:"patientRef,omitempty"`
	DeviceID    string    `json:"deviceId"`
	Campus      string    `json:"campus"`
	ScanKey     string    `json:"scanKey"`
	ScanDigest  string    `json:"scanDigest"`
	SubmittedAt time.Time `json:"submittedAt"`
	// ScanType is the scan's pattern as the gateway resolved it (cube,
	// line or circle); empty for exams submitted before it was kept,
	// which the stages tell from the volume's shape.
	ScanType string `json:"scanType,omitempty"`
}

// Ref is the submitted exam's reference.
func (s Submission) Ref() Ref { return Ref{Campus: s.Campus, ID: s.ExamID} }

// Summary carries the headline result so status and events can show it
// without reading the report object. A figure the analysis could not
// measure is absent, never zero.
type Summary struct {
	// ScanType is the scan's pattern; Gradable the quality gate's
	// verdict: full, partial or ungradable.
	ScanType string `json:"scanType,omitempty"`
	Gradable string `json:"gradable,omitempty"`
	// NotMeasurable is true when the report carries no measurement (the
	// report says why).
	NotMeasurable bool `json:"notMeasurable,omitempty"`
	// A cube's central subfield thickness, mean thickness and volume.
	CentralSubfieldThicknessUm *float64 `json:"centralSubfieldThicknessUm,omitempty"`
	MeanThicknessUm            *float64 `json:"meanThicknessUm,omitempty"`
	TotalVolumeMm3             *float64 `json:"totalVolumeMm3,omitempty"`
	// A line's central thickness; a circle's global RNFL thickness.
	CentralThicknessUm *float64 `json:"centralThicknessUm,omitempty"`
	RNFLGlobalUm       *float64 `json:"rnflGlobalUm,omitempty"`
	// Lesions counts the lesions the report gives: not those withheld
	// (a kind, or all) nor those on ungraded A-scans. LesionFinding says
	// what the count leaves out.
	Lesions int `json:"lesions"`
	// Withheld names the figures the analysis does not vouch for (a
	// boundary they need is not reliable where they are measured; the
	// report gives the reasons): rnflGlobal, centralThickness,
	// centralSubfieldThickness, etdrs:<subfield>, lesions, …
	Withheld []string `json:"withheld,omitempty"`
	// WithheldReasons says, for each figure in Withheld, why it is not
	// reported.
	WithheldReasons map[string]string `json:"withheldReasons,omitempty"`
	// LesionsWithheld is true when lesions were not reported: Lesions
	// is then 0 and says nothing of their absence.
	LesionsWithheld bool `json:"lesionsWithheld,omitempty"`
	// LesionFinding is the report's lesion finding, word for word (see
	// report.Report.LesionFinding): "No fluid or drusen detected." only
	// when the whole scan was graded and nothing found. Empty before the
	// report is written.
	LesionFinding string `json:"lesionFinding,omitempty"`
}
