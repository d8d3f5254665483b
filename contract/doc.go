// Package contract is what crosses octflow's workflow boundaries: the
// names of its workflows, queries, updates and signals, the workflow IDs,
// the inputs and outputs that travel through Temporal, and the error
// types a stage fails with. Every process that starts, queries, signals
// or serves a workflow imports it; nobody re-declares these types or
// decodes their payloads by hand.
//
// # A tour
//
// An exam's pipeline is the [ExamWorkflow], started by the gateway under
// [ExamWorkflowID] (the exam's campus and ID: one run per exam) with an
// [ExamInput], a device's submission and an admin's rerun alike by
// [ExamStartOptions] (the memo an [ExamMemo]); [ExamPath] is the
// exam's URL path at the gateway. Each stage is an activity that takes its own input (an
// image stage a [StageInput], the report a [ReportInput], the
// notification a [NotifyInput]) and returns a [StageOutput]: object
// keys, never volume bytes, and what the stages after it are given (the
// summary, what computed it). A running
// stage heartbeats a [Heartbeat] (its node, GPU, when it was taken and
// started). A stage that fails says why with one of the ErrType
// constants; [Classify] turns how an attempt ended into an [Outcome]
// (done, failed, lost, unreachable, aged, unclaimed, refused), which the
// workflow decides its retry by and records as an [Attempt]; a retry's
// wait carries that record ([RetrySummary]), where the exam's timeline
// reads it.
//
// Once the report exists the review is a workflow of its own
// ([ReviewWorkflowID]; decisions arrive as [ReviewRequest] updates), the
// report-ready events go to the campus's inbox workflow, and a campus
// with a PACS gets the results by its export workflow ([ExportState]);
// whoever starts the review or the export starts it with the same
// [StartOptions] ([ReviewStartOptions], [ExportStartOptions]).
// [TaskPriority] gives every task of an exam its bucket's fair share.
//
// It holds types and the few rules every side must apply alike, not
// behaviour: the workflows live in workflows/, the stages in
// activities/, the exam vocabulary in exam/ and the seven states in
// lifecycle/.
package contract
