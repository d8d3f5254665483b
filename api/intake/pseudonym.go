package intake

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"math/big"

	"octflow/exam"
)

// Pseudonymizer derives stable keyed pseudonyms, so that exams can be
// linked without an identifier ever leaving the gateway: a patient's
// pseudonym within a campus, an exam's reference, and the replacement of
// a DICOM instance UID.
type Pseudonymizer struct{ key []byte }

// NewPseudonymizer uses key (at least 16 bytes) for HMAC-SHA256.
func NewPseudonymizer(key []byte) *Pseudonymizer { return &Pseudonymizer{key: key} }

// Ref returns "pt-" and 24 hex digits of a keyed hash of the patient
// identifier within campus, or "" for "". A campus is a tenant, so the
// same patient has another pseudonym at another campus.
func (p *Pseudonymizer) Ref(campus, id string) string {
	if id == "" {
		return ""
	}
	return "pt-" + hex.EncodeToString(p.sum("patient", campus, id))[:24]
}

// Exam returns the reference octflow keeps an exam under: "ex-" and 24
// hex digits of a keyed hash of the exam ID a device gave, within
// campus. Devices may use an Accession Number or a Patient ID as their
// exam ID, so that ID is never a workflow ID, an object key, a log field
// or an idempotency key; the reference is. A reference given where an
// exam ID is expected is taken as it is (see exam.IsReference).
func (p *Pseudonymizer) Exam(campus, id string) string {
	if exam.IsReference(id) {
		return id
	}
	return exam.ReferencePrefix + hex.EncodeToString(p.sum("exam", campus, id))[:exam.ReferenceDigits]
}

// ExamRef is the exam a request names by id within campus.
func (p *Pseudonymizer) ExamRef(campus, id string) exam.Ref {
	return exam.Ref{Campus: campus, ID: p.Exam(campus, id)}
}

// UID returns the replacement of a DICOM UID in campus's copies: "2.25."
// and the first 128 bits of its keyed hash in decimal, the UUID-derived
// form of PS3.5 B.2. The same UID always gets the same replacement
// within a campus, so the scans of a study stay together, and no one
// without the key can map it back. A campus is a tenant: the same UID
// gets another replacement at another campus, so copies of two campuses
// cannot be linked by their UIDs.
func (p *Pseudonymizer) UID(campus, uid string) string {
	return "2.25." + new(big.Int).SetBytes(p.sum("uid", campus, uid)[:16]).String()
}

// UIDs is UID for campus, as de-identification takes it
// (octdicom.Deidentification.UID).
func (p *Pseudonymizer) UIDs(campus string) func(string) string {
	return func(uid string) string { return p.UID(campus, uid) }
}

func (p *Pseudonymizer) sum(parts ...string) []byte {
	m := hmac.New(sha256.New, p.key)
	for _, s := range parts {
		m.Write([]byte(s))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}
