package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// Pseudonymizer turns a patient identifier into a stable keyed pseudonym,
// so that exams of one patient can be linked without the identifier ever
// leaving the gateway.
type Pseudonymizer struct{ key []byte }

// NewPseudonymizer uses key (at least 16 bytes) for HMAC-SHA256.
func NewPseudonymizer(key []byte) *Pseudonymizer { return &Pseudonymizer{key: key} }

// Ref returns "pt-" and 24 hex digits of HMAC-SHA256(key, id), or "" for "".
func (p *Pseudonymizer) Ref(id string) string {
	if id == "" {
		return ""
	}
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte(id))
	return "pt-" + hex.EncodeToString(m.Sum(nil))[:24]
}
