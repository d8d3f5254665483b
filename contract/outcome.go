package contract

import (
	"errors"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// Classify says how an attempt that ended with err ended (nil: Done).
// It is the one classification of attempts: the exam workflow decides
// its retries by it and records the outcome in the attempt
// (RetrySummary), where the exam's timeline reads it. A
// schedule-to-start timeout while pinned to the node that holds the
// exam's data is that node not taking the stage
// (Unclaimed), as is a stage a degraded node handed back unstarted; one
// in a shared queue is aging (Aged). A stage that ended
// without an answer, or that its node handed back on restart, was Lost.
// An unreachable backing service, or a worker that does not run the
// stage (ErrTypeActivityNotRegistered), is Unreachable only when the
// policy waits outages out (infraWaits); otherwise it is a failure like
// any other.
func Classify(err error, pinned, infraWaits bool) Outcome {
	if err == nil {
		return Done
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		switch timeout.TimeoutType() {
		case enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START:
			if pinned {
				return Unclaimed
			}
			return Aged
		case enumspb.TIMEOUT_TYPE_HEARTBEAT, enumspb.TIMEOUT_TYPE_START_TO_CLOSE:
			return Lost
		}
		return Refused
	}
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		return Refused
	}
	var app *temporal.ApplicationError
	if !errors.As(err, &app) {
		return Failed
	}
	switch app.Type() {
	case ErrTypeNodeLost:
		return Lost
	case ErrTypeNodeDegraded:
		return Unclaimed
	case ErrTypeInfrastructure, ErrTypeActivityNotRegistered:
		if infraWaits {
			return Unreachable
		}
	case ErrTypeInvalidVolume, ErrTypeStagePanic, ErrTypeReportExists:
		return Refused
	}
	if app.NonRetryable() {
		return Refused
	}
	return Failed
}

// AttemptNode is the node an attempt that ended with err ran on, as its
// failure says: a stage's error carries it in its details
// (FailureDetails), a stage lost with its node in its last heartbeat;
// otherwise the identity of the worker that reported the failure.
func AttemptNode(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.HasDetails() {
		var d FailureDetails
		if app.Details(&d) == nil && d.Node != "" {
			return d.Node
		}
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) && timeout.HasLastHeartbeatDetails() {
		var hb Heartbeat
		if timeout.LastHeartbeatDetails(&hb) == nil && hb.Node != "" {
			return hb.Node
		}
	}
	var activity *temporal.ActivityError
	if errors.As(err, &activity) {
		return activity.Identity()
	}
	return ""
}
