package contract

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"octflow/exam"
)

// StartOptions are how one of an exam's own workflows (its review, its
// export) is started, whoever starts it: the pipeline, as a child it
// abandons (Child), or the gateway, through the client (Client). Each
// workflow's options have one owner here (ReviewStartOptions,
// ExportStartOptions), so the two starts cannot drift apart.
type StartOptions struct {
	ID        string
	TaskQueue string
	// ReusePolicy says whether a closed workflow of the ID may be
	// started again.
	ReusePolicy enumspb.WorkflowIdReusePolicy
	// Priority is the exam's (TaskPriority): the workflow's tasks wait
	// with the exam's other tasks, in its campus's part of its bucket.
	Priority temporal.Priority
	// SearchAttributes are the exam's (SubmissionAttributes), which the
	// Web UI filters by.
	SearchAttributes temporal.SearchAttributes
}

// Child is the options of a start as a child workflow that outlives its
// parent (abandoned when the parent closes). A running workflow of the
// ID fails the start, as a client's start fails on a conflict.
func (o StartOptions) Child() workflow.ChildWorkflowOptions {
	return workflow.ChildWorkflowOptions{
		WorkflowID:            o.ID,
		TaskQueue:             o.TaskQueue,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: o.ReusePolicy,
		Priority:              o.Priority,
		TypedSearchAttributes: o.SearchAttributes,
	}
}

// Client is the options of a start through the client. A running
// workflow of the ID fails the start.
func (o StartOptions) Client() client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       o.ID,
		TaskQueue:                o.TaskQueue,
		WorkflowIDReusePolicy:    o.ReusePolicy,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		Priority:                 o.Priority,
		TypedSearchAttributes:    o.SearchAttributes,
	}
}

// Superseding is o for a run that supersedes an earlier run's report:
// the workflow's ID may be started again after its earlier workflow
// closed however it closed (the earlier report's export delivered, its
// review's window closed), since the new report has results and a review
// of its own. A running workflow of the ID still fails the start.
func (o StartOptions) Superseding() StartOptions {
	o.ReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	return o
}

// examStart is the part of an exam's own workflow's start options that
// comes from the exam: its queue, priority and search attributes.
func examStart(id string, sub exam.Submission, pol exam.Policy, reuse enumspb.WorkflowIdReusePolicy) StartOptions {
	return StartOptions{
		ID:               id,
		TaskQueue:        exam.WorkflowQueue,
		ReusePolicy:      reuse,
		Priority:         TaskPriority(pol, sub.Priority, sub.Campus),
		SearchAttributes: temporal.NewSearchAttributes(SubmissionAttributes(sub)...),
	}
}

// ExportStartOptions are the start options of an exam's export, started
// by its pipeline once the report exists and by an admin's re-export:
// ExportWorkflowID, reused only after a failed export, so results
// delivered once are not sent again by another run of the exam.
func ExportStartOptions(sub exam.Submission, pol exam.Policy) StartOptions {
	return examStart(ExportWorkflowID(sub.Ref()), sub, pol, enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY)
}

// ReviewStartOptions are the start options of an exam's review, started
// by its pipeline once the report is stored: ReviewWorkflowID, never
// reused, so an exam has at most one review whichever of its runs gets
// there first.
func ReviewStartOptions(sub exam.Submission, pol exam.Policy) StartOptions {
	return examStart(ReviewWorkflowID(sub.Ref()), sub, pol, enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE)
}

// ExamMemo is what a run of an exam's pipeline keeps in its memo (the
// Memo fields): nothing that identifies a patient.
type ExamMemo struct {
	// ScanDigest is the scan's instance digest (MemoScanDigest).
	ScanDigest string
	// SubmissionID tells two racing submissions apart (MemoSubmissionID).
	SubmissionID string
	// DeviceID is the submitting device (MemoDeviceID).
	DeviceID string
	// Submitter names the principal who submitted the exam (MemoSubmitter).
	Submitter string
}

// ExamStart is how a run of an exam's pipeline is started.
type ExamStart struct {
	Memo ExamMemo
	// State is the exam's state as the run's search attributes say it
	// when it starts (the gateway's lifecycle.Created); the run upserts
	// every later one.
	State string
	// Rerun says the run is an admin's rerun of the exam: its workflow
	// ID is reused only after a failed run, so two admins at once start
	// one. A first run's ID is never reused, and an urgent first run
	// starts eagerly.
	Rerun bool
	// Supersede says the rerun replaces a COMPLETED run's report: its
	// workflow ID is reused after a completed run too. The conflict
	// policy still fails the start while a run of the exam is open, so
	// one supersede runs at a time.
	Supersede bool
}

// ExamStartOptions are the start options of a run of an exam's
// pipeline, under ExamWorkflowID, with the exam's priority and search
// attributes, started by the gateway on a device's submission or an
// admin's rerun. Temporal's uniqueness on the workflow ID is the lock: a
// start that finds a run of the exam fails with
// WorkflowExecutionAlreadyStarted (the SDK retries a start under one
// request ID, which Temporal answers as the same start). The exam's
// bucket orders its workflow tasks too, not only its stages. An urgent
// exam's first run starts eagerly: where the gateway's process also runs
// the workflow worker, its first workflow task comes back with the start
// and runs there, skipping a queue that may hold a burst (the upload's
// answer waits for it, so only urgent ones).
func ExamStartOptions(sub exam.Submission, pol exam.Policy, s ExamStart) client.StartWorkflowOptions {
	reuse := enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
	switch {
	case s.Supersede:
		reuse = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	case s.Rerun:
		reuse = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY
	}
	return client.StartWorkflowOptions{
		ID:                                       ExamWorkflowID(sub.Ref()),
		TaskQueue:                                exam.WorkflowQueue,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    reuse,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		Memo: map[string]any{
			MemoScanDigest: s.Memo.ScanDigest, MemoSubmissionID: s.Memo.SubmissionID,
			MemoDeviceID: s.Memo.DeviceID, MemoSubmitter: s.Memo.Submitter,
		},
		TypedSearchAttributes: temporal.NewSearchAttributes(append(SubmissionAttributes(sub),
			temporal.NewSearchAttributeKeyKeyword(exam.AttrState).ValueSet(s.State))...),
		Priority:         TaskPriority(pol, sub.Priority, sub.Campus),
		EnableEagerStart: !s.Rerun && !s.Supersede && sub.Priority == exam.Urgent,
	}
}
