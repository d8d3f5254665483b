package exam

import (
	"fmt"
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
	return "", fmt.Errorf("decision %q: want approve, amend or reject", s)
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
)

// Review is one recorded decision.
type Review struct {
	At       time.Time `json:"at"`
	Decision Decision  `json:"decision"`
	Note     string    `json:"note,omitempty"`
	By       string    `json:"by"`
}

// ReviewInput is what the api sends to the exam's workflow.
type ReviewInput struct {
	Decision Decision `json:"decision"`
	Note     string   `json:"note"`
	By       string   `json:"by"`
}

// ReportReadyEvent is one report-ready event in a campus's inbox, as the
// clinicians' event stream serves it. Seq numbers events per campus.
type ReportReadyEvent struct {
	Seq      int64     `json:"seq"`
	At       time.Time `json:"at"`
	ExamID   string    `json:"examId"`
	Campus   string    `json:"campus"`
	Priority Priority  `json:"priority"`
	Eye      Eye       `json:"eye,omitempty"`
	Summary  Summary   `json:"summary"`
	// Reminder counts repeated pushes for an urgent exam awaiting review.
	Reminder int `json:"reminder,omitempty"`
}
