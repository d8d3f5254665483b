package contract

import (
	"testing"

	"octflow/exam"
)

// A stage's try is read back out of its activity ID; an ID of another
// shape names no stage (and try 1).
func TestAnActivityIDNamesItsStageAndTry(t *testing.T) {
	cases := []struct {
		id    string
		stage exam.Stage
		try   int32
		ok    bool
	}{
		{ActivityID(exam.Layers, 3), exam.Layers, 3, true},
		{ActivityID("vessel-map", 1), "vessel-map", 1, true},
		{"7", "", 1, false},
		{"layers-0", "", 1, false},
		{"layers-x", "", 1, false},
		{"-2", "", 1, false},
	}
	for _, c := range cases {
		stage, try, ok := ParseActivityID(c.id)
		if stage != c.stage || ok != c.ok || (ok && try != c.try) || TryOf(c.id) != c.try {
			t.Errorf("%q: %q try %d (%t), TryOf %d; want %q try %d (%t)", c.id, stage, try, ok, TryOf(c.id), c.stage, c.try, c.ok)
		}
	}
}
