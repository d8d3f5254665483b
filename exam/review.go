package exam

import (
	"errors"
	"time"
)

// Decision is what a clinician says about a report.
type Decision string

// The three decisions. Approve and reject are final; amend corrects a
// report and may follow a final decision.
const (
	Approve Decision = "approve"
	Amend   Decision = "amend"
	Reject  Decision = "reject"
)

// ParseDecision accepts approve, amend or reject.
func ParseDecision(s string) (Decision, error) {
	switch d := Decision(s); d {
	case Approve, Amend, Reject:
		return d, nil
	}
	return "", errors.New("decision: want approve, amend or reject")
}

// ReviewStatus is where the clinician's review of an exam stands.
type ReviewStatus string

// Review states.
const (
	ReviewPending  ReviewStatus = "pending"
	ReviewApproved ReviewStatus = "approved"
	ReviewAmended  ReviewStatus = "amended"
	ReviewRejected ReviewStatus = "rejected"
	ReviewExpired  ReviewStatus = "expired" // no decision within the review window
	// ReviewSuperseded: the report was replaced by an admin's superseding
	// rerun before the window closed; the new report has a review of its own.
	ReviewSuperseded ReviewStatus = "superseded"
)

// After is the review's status once decision d is recorded. Approve and
// reject are final; an amendment corrects the report at any time.
func (s ReviewStatus) After(d Decision) ReviewStatus {
	switch d {
	case Approve:
		return ReviewApproved
	case Reject:
		return ReviewRejected
	case Amend:
		return ReviewAmended
	}
	return s
}

// Review is one recorded decision.
type Review struct {
	At       time.Time `json:"at"`
	Decision Decision  `json:"decision"`
	Note     string    `json:"note,omitempty"`
	By       string    `json:"by"`
}
