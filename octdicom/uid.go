package octdicom

import (
	"crypto/sha256"
	"math/big"
	"strings"
)

// DerivedUID is a DICOM UID that is a pure function of its parts: "2.25."
// and the decimal of a UUID (PS3.5 §B.2) made of the SHA-256 of the
// parts, its version field 8 (RFC 9562: custom) and its variant RFC
// 4122's. The same parts give the same UID on every call and on every
// machine, so a retried export sends the same instances; different parts
// give different UIDs (to the odds of a 122-bit collision). The parts
// are octflow's own references (a campus, an exam's keyed reference, a
// report's run), never a patient identifier, and a UID cannot be read
// back into them.
func DerivedUID(parts ...string) string {
	h := sha256.New()
	h.Write([]byte("octflow-uid/1"))
	for _, p := range parts {
		// A NUL between parts: ("ab", "c") and ("a", "bc") differ.
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x80 // version 8
	u[8] = u[8]&0x3f | 0x80 // variant 10
	return "2.25." + new(big.Int).SetBytes(u[:]).String()
}

// ValidUID reports whether s is a DICOM UID: 1 to 64 characters of
// digits and dots, components without leading zeros (PS3.5 §9.1).
func ValidUID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range strings.Split(s, ".") {
		if c == "" || len(c) > 1 && c[0] == '0' {
			return false
		}
		for _, r := range c {
			if r < '0' || r > '9' {
				return false
			}
		}
	}
	return true
}
