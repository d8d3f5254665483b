package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"math/big"
)

// Pseudonymizer derives stable keyed pseudonyms, so that exams can be
// linked without an identifier ever leaving the gateway: a patient's
// pseudonym within a campus, and the replacement of a DICOM instance UID.
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
// (imaging.Deidentification.UID).
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
