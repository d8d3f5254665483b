package contract

import (
	"time"

	"octflow/exam"
)

// The export of an exam's results to its campus's PACS.
const (
	// ExportWorkflow sends a completed exam's results to the campus's
	// PACS as DICOM objects, on its own after the report exists.
	ExportWorkflow = "ExportWorkflow"
	// ExportToPACS is the activity that builds the objects and sends them
	// by STOW-RS.
	ExportToPACS = "ExportToPACS"
	// ExportQuery returns an export's ExportState.
	ExportQuery = "export-state"
)

// ExportWorkflowID is the workflow ID of an exam's export.
func ExportWorkflowID(r exam.Ref) string { return "export/" + r.Campus + "/" + r.ID }

// Error types of the export.
const (
	// ErrTypeExportRefused is a PACS that refused the objects (a Failed
	// SOP Sequence, a 4xx), or an export that cannot be built: no retry
	// of the same objects can help; an admin re-runs it after the fix.
	ErrTypeExportRefused = "ExportRefused"
	// ErrTypePACSUnavailable is a PACS that did not answer, or answered
	// 5xx or 429: the export is retried with a jittered backoff.
	ErrTypePACSUnavailable = "PACSUnavailable"
)

// ExportStatus is where an export stands.
type ExportStatus string

// The export's statuses.
const (
	ExportPending   ExportStatus = "pending"
	ExportDelivered ExportStatus = "delivered"
	ExportFailed    ExportStatus = "failed"
)

// ExportStart starts an exam's ExportWorkflow.
type ExportStart struct {
	Submission exam.Submission `json:"submission"`
	Policy     exam.Policy     `json:"policy"`
}

// ExportState is where an export stands, through ExportQuery and as
// ExportWorkflow's result.
type ExportState struct {
	Status ExportStatus `json:"status"`
	// Tries counts the sends so far.
	Tries int32 `json:"tries"`
	// Instances are the SOP Instance UIDs the PACS took.
	Instances []string `json:"instances,omitempty"`
	// Failure is the last send's failure.
	Failure     string     `json:"failure,omitempty"`
	DeliveredAt *time.Time `json:"deliveredAt,omitempty"`
}

// ExportOutput is what a send delivered.
type ExportOutput struct {
	// Instances are the SOP Instance UIDs the PACS took, in the order
	// they were sent.
	Instances []string `json:"instances"`
}
