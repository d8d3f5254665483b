package contract

import (
	"net/url"

	"octflow/exam"
)

// Workflow types, as registered on the workflow worker.
const (
	// ExamWorkflow is an exam's pipeline: stages, aging, SLA, report and
	// the report-ready push. The name predates the split from the review.
	ExamWorkflow = "ExamWorkflow"
	// ReviewWorkflow holds the clinician's review of a finished report.
	ReviewWorkflow = "ReviewWorkflow"
	// FleetWorkflow keeps what every GPU node last reported.
	FleetWorkflow = "FleetWorkflow"
	// InboxWorkflow keeps a campus's recent report-ready events.
	InboxWorkflow = "InboxWorkflow"
	// ScanSweepWorkflow removes stored scans no exam took.
	ScanSweepWorkflow = "ScanSweepWorkflow"
)

// Activities other than the stages' (each stage declares its own,
// activities.Pipeline), and the notify stage's, which the review
// schedules too, for its reminders, whatever pipeline an exam ran.
const (
	// NotifyWorkstation pushes an exam's report-ready event: the notify
	// stage's activity, and the review's reminder.
	NotifyWorkstation = "NotifyWorkstation"
	// ArchiveReview writes a review to the exam's objects.
	ArchiveReview = "ArchiveReview"
	// SweepScans removes stored scans no exam references.
	SweepScans = "SweepScans"
)

// ScanSweepScheduleID is the Temporal schedule that runs the sweep.
const ScanSweepScheduleID = "octflow-scan-sweep"

// ScanSweepWorkflowID is the workflow ID the schedule starts the sweep
// under (Temporal appends each run's scheduled time).
const ScanSweepWorkflowID = "octflow-scan-sweep"

// Queries, updates and signals.
const (
	// ReviewUpdate carries a clinician's ReviewRequest; ReviewWorkflow
	// serves it.
	ReviewUpdate = "review"
	// ReviewQuery returns a review's ReviewState.
	ReviewQuery = "review-state"
	// FleetQuery returns every node's FleetNode (the api's: it names the
	// stages each node holds).
	FleetQuery = "nodes"
	// NodeStateQuery, with a node's ID, returns its NodeState: what a
	// node reads of the fleet, and all a GPU node may read.
	NodeStateQuery = "node-state"
	// ResetBreakerUpdate asks a node (by ID) to close its breaker.
	ResetBreakerUpdate = "reset-breaker"
	// NodeReportSignal carries a NodeReport to the fleet.
	NodeReportSignal = "node-report"
	// MarkNodeUpdate is an operator's mark of a node (a NodeMark):
	// degraded, or healthy again.
	MarkNodeUpdate = "mark-node"
	// HedgeSignal tells an exam that the stage attempt it names runs on a
	// degraded node past its deadline: the exam runs the stage again on
	// another node, and the first result wins (a Hedge).
	HedgeSignal = "hedge-stage"
	// ReviewSupersedeSignal tells an exam's open review that its report
	// was superseded: it carries the new report's ReviewStart, with which
	// the review closes as superseded and continues as the new report's.
	ReviewSupersedeSignal = "review-superseded"
	// InboxEventSignal carries a ReportReadyEvent to a campus inbox.
	InboxEventSignal = "report-ready"
	// InboxQuery returns the inbox's events after a sequence number.
	InboxQuery = "events-since"
	// MoveBuildSignal wakes a long-running workflow (the fleet, an inbox)
	// after another build became current, so that it continues as new on
	// that build now rather than at its next event (package deployment
	// sends it on a promotion). It carries nothing.
	MoveBuildSignal = "move-build"
)

// ExamWorkflowID is the workflow ID of an exam's pipeline,
// "exam/<campus>/<reference>" (exam.IsReference). Temporal allows one open workflow per ID,
// which makes submission idempotent within a campus; neither part can
// hold a slash, so no two exams share an ID.
func ExamWorkflowID(r exam.Ref) string { return "exam/" + r.Campus + "/" + r.ID }

// ReviewWorkflowID is the workflow ID of an exam's review.
func ReviewWorkflowID(r exam.Ref) string { return "review/" + r.Campus + "/" + r.ID }

// FleetWorkflowID is the one fleet workflow.
const FleetWorkflowID = "octflow-fleet"

// InboxWorkflowID is the workflow ID of a campus's inbox.
func InboxWorkflowID(campus string) string { return "inbox-" + campus }

// Memo fields of an exam's pipeline run, written by the gateway
// (ExamMemo). They identify no patient.
const (
	// MemoScanDigest is the scan's instance digest: SHA-256 of its
	// transfer syntax and data set, not of the file meta a router
	// rewrites (octdicom.NewInstanceHash).
	MemoScanDigest = "scanDigest"
	// MemoSubmissionID tells two racing submissions of one exam apart.
	MemoSubmissionID = "submissionId"
	// MemoDeviceID is the submitting device.
	MemoDeviceID = "deviceId"
	// MemoSubmitter names the principal who submitted the exam.
	MemoSubmitter = "submittedBy"
)

// ExamPath is the gateway's path of the exam ref, or of one of its
// resources (sub: "" or e.g. "/report"), with the exam's campus in its
// query: /v1/exams/{examId}{sub}?campus={campus}. The gateway's
// Location headers and the report-ready events name it.
func ExamPath(ref exam.Ref, sub string) string {
	return "/v1/exams/" + url.PathEscape(ref.ID) + sub + "?campus=" + url.QueryEscape(ref.Campus)
}
