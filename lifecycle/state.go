package lifecycle

import "fmt"

// State is where an exam stands, in the seed's seven names.
type State string

// The seven states.
const (
	Created   State = "CREATED"    // accepted, workflow started, no stage scheduled yet
	Queued    State = "QUEUED"     // a stage waits on its task queue
	Claimed   State = "CLAIMED"    // a worker took the stage and has not reported progress yet
	Executing State = "EXECUTING"  // the stage runs and heartbeats
	RetryWait State = "RETRY_WAIT" // the stage failed and waits for its next attempt
	Completed State = "COMPLETED"  // the report exists
	Dead      State = "DEAD"       // failed for good; the reason is in lastFailure
)

// States lists the seven states in the order an exam meets them.
var States = []State{Created, Queued, Claimed, Executing, RetryWait, Completed, Dead}

// transitions is the table of legal moves: every state has its targets.
// Queued → Queued is the move to the next stage or a promotion; Executing
// → Queued is a finished stage followed by the next; Completed →
// Completed is a review decision, which changes no state; Dead → Created
// is an operator's rerun.
var transitions = map[State][]State{
	Created:   {Queued, Dead},
	Queued:    {Queued, Claimed, Executing, RetryWait, Completed, Dead},
	Claimed:   {Executing, Queued, RetryWait, Completed, Dead},
	Executing: {Queued, RetryWait, Completed, Dead},
	RetryWait: {Queued, Claimed, Executing, Dead},
	Completed: {Completed},
	Dead:      {Created},
}

// Terminal reports whether the exam's pipeline is over: nothing runs
// unless an operator reruns a DEAD exam.
func (s State) Terminal() bool { return s == Completed || s == Dead }

// CanMove reports whether from → to is a legal transition.
func CanMove(from, to State) bool {
	for _, t := range transitions[from] {
		if t == to {
			return true
		}
	}
	return false
}

// ErrIllegalTransition is returned by CheckMove for a move the table forbids.
type ErrIllegalTransition struct{ From, To State }

func (e ErrIllegalTransition) Error() string {
	return fmt.Sprintf("illegal exam state transition %s → %s", e.From, e.To)
}

// CheckMove returns ErrIllegalTransition unless from → to is legal.
func CheckMove(from, to State) error {
	if !CanMove(from, to) {
		return ErrIllegalTransition{From: from, To: to}
	}
	return nil
}
