package lifecycle

import (
	"errors"
	"testing"
)

func TestTransitionTable(t *testing.T) {
	cases := []struct {
		from, to State
		legal    bool
	}{
		{Created, Queued, true},
		{Queued, Claimed, true},
		{Claimed, Executing, true},
		{Executing, RetryWait, true},
		{RetryWait, Queued, true},
		{Executing, Completed, true},
		{Queued, Dead, true},
		{Completed, Queued, false},
		{Dead, Executing, false},
		{Created, Completed, false},
		{RetryWait, Completed, false},
		{Completed, Completed, true}, // a review decision
		{Dead, Created, true},        // an operator's rerun
		{Dead, Queued, false},
	}
	for _, c := range cases {
		err := CheckMove(c.from, c.to)
		if c.legal && err != nil {
			t.Errorf("%s → %s rejected: %v", c.from, c.to, err)
		}
		var illegal ErrIllegalTransition
		if !c.legal && !errors.As(err, &illegal) {
			t.Errorf("%s → %s accepted, want ErrIllegalTransition", c.from, c.to)
		}
	}
}
