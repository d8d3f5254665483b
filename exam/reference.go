package exam

import "regexp"

// An exam's reference is what octflow keeps it under: ReferencePrefix
// and ReferenceDigits lower-case hex digits of a keyed hash of the exam
// ID a device gave, within its campus (intake.Pseudonymizer.Exam). A
// device's exam ID may be an Accession Number or a Patient ID, so it is
// used only to find the reference; workflow IDs, object keys, logs,
// events and reports carry the reference.
const (
	ReferencePrefix = "ex-"
	ReferenceDigits = 24
)

var referencePattern = regexp.MustCompile(`^ex-[0-9a-f]{24}$`)

// IsReference reports whether id has the form of an exam's reference. A
// device may not use such an ID as its own (the API takes it for the
// reference it is).
func IsReference(id string) bool { return referencePattern.MatchString(id) }
