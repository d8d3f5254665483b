package contract

import (
	"time"

	"octflow/exam"
)

// ReviewRequest is a clinician's decision, the argument of ReviewUpdate.
type ReviewRequest struct {
	Decision exam.Decision `json:"decision"`
	Note     string        `json:"note"`
	By       string        `json:"by"`
}

// ReviewStart starts an exam's ReviewWorkflow once its report exists.
type ReviewStart struct {
	Submission exam.Submission `json:"submission"`
	Policy     exam.Policy     `json:"policy"`
	Summary    exam.Summary    `json:"summary"`
	// ReportAt is when the report was finished; the window runs from it.
	ReportAt time.Time `json:"reportAt"`
	// ReportRun is the pipeline run that wrote the report (empty in a
	// review started before it was passed: the review's parent run).
	ReportRun string `json:"reportRun,omitempty"`
	// Supersedes is, for the review of a report that replaced another,
	// the run whose report it replaced.
	Supersedes string `json:"supersedes,omitempty"`
}

// ReviewState is where a review stands, through ReviewQuery and as
// ReviewWorkflow's result.
type ReviewState struct {
	Status  exam.ReviewStatus `json:"status"`
	Reviews []exam.Review     `json:"reviews"`
	// ClosesAt is the end of the review window.
	ClosesAt time.Time `json:"closesAt"`
	// Reminders counts repeated pushes for an urgent exam.
	Reminders int `json:"reminders,omitempty"`
}

// ReportReadyEvent is one report-ready event in a campus's inbox, as the
// clinicians' event stream serves it. Seq numbers events per campus.
type ReportReadyEvent struct {
	Seq      int64         `json:"seq"`
	At       time.Time     `json:"at"`
	ExamID   string        `json:"examId"`
	Campus   string        `json:"campus"`
	Priority exam.Priority `json:"priority"`
	Eye      exam.Eye      `json:"eye,omitempty"`
	Summary  exam.Summary  `json:"summary"`
	// Reminder counts repeated pushes for an urgent exam awaiting review.
	Reminder int `json:"reminder,omitempty"`
	// Kind is the event's kind, its SSE event name: report-ready (also
	// when empty), or results-filed once the exam's results reached the
	// campus's PACS.
	Kind EventKind `json:"kind,omitempty"`
}

// EventKind names a campus event's kind.
type EventKind string

// The kinds of campus events.
const (
	EventReportReady  EventKind = "report-ready"
	EventResultsFiled EventKind = "results-filed"
)

// Name is the kind's SSE event name.
func (k EventKind) Name() string {
	if k == "" {
		return string(EventReportReady)
	}
	return string(k)
}

// InboxState is a campus inbox, carried across continue-as-new.
type InboxState struct {
	Campus string             `json:"campus"`
	Next   int64              `json:"next"`
	Events []ReportReadyEvent `json:"events"`
	// HistoryLimit is how many history events a run may grow to before it
	// continues as new (0: the default, 2000).
	HistoryLimit int `json:"historyLimit,omitempty"`
}

// ReviewArchive is what ArchiveReview writes to the exam's review.json:
// every decision, kept with the report beyond Temporal's retention.
type ReviewArchive struct {
	Exam     exam.Ref          `json:"exam"`
	Status   exam.ReviewStatus `json:"status"`
	Reviews  []exam.Review     `json:"reviews"`
	ClosesAt time.Time         `json:"closesAt"`
	// Closed is set once the window has closed, or the report was
	// superseded: the file is final.
	Closed bool `json:"closed"`
	// ReportRun is the run whose report the review was of (empty when
	// the review did not know it).
	ReportRun string `json:"reportRun,omitempty"`
	// SupersededBy is the run whose report replaced the reviewed one
	// (Status is then superseded): the archive is also kept under the
	// reviewed run's own key (exam.RunReviewKey), which the next
	// review's archives do not overwrite.
	SupersededBy string `json:"supersededBy,omitempty"`
}

// SweepInput tells the scan sweep how old a stored scan must be before
// it may go: younger ones may belong to a submission still starting.
type SweepInput struct {
	Grace time.Duration `json:"grace"`
}

// SweepResult counts what a sweep saw and removed.
type SweepResult struct {
	// Scans counts the scans past the grace period; Kept those an exam's
	// record names (Repaired of them had their record written by this
	// sweep); Removed those no exam will need; Unaccounted those with
	// neither record nor intake marker, which stay.
	Scans       int `json:"scans"`
	Kept        int `json:"kept,omitempty"`
	Repaired    int `json:"repaired,omitempty"`
	Removed     int `json:"removed"`
	Unaccounted int `json:"unaccounted,omitempty"`
}
