package exam

import "time"

// Record is an exam's own record, kept with its objects beyond
// Temporal's retention: the gateway writes it once Temporal holds the
// exam and before the device is told 202. It names the scan the exam
// took, so a stored scan is removed only when octflow itself knows that
// no exam will ever need it, never because Temporal no longer knows the
// exam (its retention passed, or its database was restored from a
// backup older than the exam).
type Record struct {
	Exam Ref `json:"exam"`
	// ScanDigest is the scan's instance digest (hex): SHA-256 of its
	// transfer syntax and data set (octdicom.NewInstanceHash).
	ScanDigest string    `json:"scanDigest"`
	Priority   Priority  `json:"priority"`
	AcceptedAt time.Time `json:"acceptedAt"`
}

// Intake marks a scan stored for an exam whose start is under way. The
// gateway writes it before it stores the scan and removes it once the
// exam's Record is written; a marker left with no record past the sweep's
// grace period shows the start never took (no device was told 202).
type Intake struct {
	Exam       Ref       `json:"exam"`
	ScanDigest string    `json:"scanDigest"`
	At         time.Time `json:"at"`
}
