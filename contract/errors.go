package contract

// Application error types a stage fails with. The workflow and the GPU
// node's breaker switch on them; the API shows them as lastFailure.type.
const (
	// ErrTypeInvalidVolume is input no retry can fix: the exam is DEAD at
	// once with the reason. It says nothing about the node.
	ErrTypeInvalidVolume = "InvalidVolume"
	// ErrTypeStagePanic is a stage that panicked on its input. The panic
	// follows the exam, not the node: it is not retried (the next node
	// would panic the same way) and not counted by the node's breaker.
	ErrTypeStagePanic = "StagePanic"
	// ErrTypeInfrastructure is a stage that could not reach the object
	// store (or another backing service). It is not the stage's fault: the
	// workflow schedules the stage again after a backoff, for a bounded
	// time, without spending the stage's attempts, and the node's breaker
	// does not count it.
	ErrTypeInfrastructure = "Infrastructure"
	// ErrTypeReportExists is a report stage that would overwrite the
	// report another run of the exam wrote: reports are never replaced.
	ErrTypeReportExists = "ReportExists"
	// ErrTypeStageFailed is any other stage failure: retried with a
	// jittered backoff up to the policy's attempts, and counted by the
	// node's breaker.
	ErrTypeStageFailed = "StageFailed"
)

// FailureDetails are attached to a stage's failure, so the exam's
// timeline can say on which node an attempt failed.
type FailureDetails struct {
	Node string `json:"node"`
}

// ErrTypeNodeLost is an attempt handed back by a node that was killed
// while it held it and has started again (gpuworker.Takes): the stage
// did not fail, so it spends one of the lost attempts, not the stage's
// own, and the node's breaker does not count it; the workflow retries it
// at once, on any node.
const ErrTypeNodeLost = "NodeLost"

// ErrTypeNodeDegraded is a stage handed back unstarted by a node the
// fleet holds degraded: a poll it made before it knew took the stage.
// The stage spends nothing (Unclaimed) and goes back to the shared queue
// at once; the node's breaker does not count it.
const ErrTypeNodeDegraded = "NodeDegraded"

// ErrTypeActivityNotRegistered is the SDK's failure of a task whose
// activity type the worker that polled it does not run: during a
// deploy, a worker of an older build took a stage a newer pipeline added.
// It is no failure of the stage: the workflow treats it as an
// unreachable backing service, scheduling the stage again after a
// backoff without spending its attempts, until a worker that runs it
// takes it.
const ErrTypeActivityNotRegistered = "ActivityNotRegisteredError"
