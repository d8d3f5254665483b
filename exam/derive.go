package exam

import "time"

// RunStatus is the part of Temporal's workflow status that matters here.
type RunStatus int

// Workflow run statuses, collapsed.
const (
	Running RunStatus = iota
	Succeeded
	Failed // failed, terminated, timed out or cancelled
)

// PendingStage is Temporal's view of the stage activity in flight.
type PendingStage struct {
	Stage         Stage
	Started       bool      // a worker picked it up
	Heartbeated   bool      // the worker has reported progress
	Attempt       int32     // 1 on the first try
	NextAttemptAt time.Time // set while waiting out a retry backoff
}

// Observation is what Temporal says about an exam at one instant.
type Observation struct {
	Status  RunStatus
	Pending *PendingStage
	// Recorded is the state the workflow last recorded (its search
	// attribute), used between two stages when nothing is pending.
	Recorded State
	Now      time.Time
}

// DeriveState maps Temporal's state onto the seven exam states.
func DeriveState(o Observation) State {
	switch o.Status {
	case Succeeded:
		return Completed
	case Failed:
		return Dead
	}
	if p := o.Pending; p != nil {
		switch {
		case p.Started && p.Heartbeated:
			return Executing
		case p.Started:
			return Claimed
		case p.Attempt > 1 && o.Now.Before(p.NextAttemptAt):
			return RetryWait
		}
		return Queued
	}
	if o.Recorded == "" || o.Recorded == Created {
		return Created
	}
	switch o.Recorded {
	case Completed:
		// The report exists; the workflow stays open for the review.
		return Completed
	case Dead:
		// The workflow recorded the failure and is closing the run.
		return Queued
	}
	return o.Recorded
}
