package contract

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"octflow/exam"
)

func TestClassifySaysHowAnAttemptEnded(t *testing.T) {
	app := func(typ string) error { return temporal.NewApplicationError("x", typ) }
	cases := []struct {
		name               string
		err                error
		pinned, infraWaits bool
		want               Outcome
	}{
		{"done", nil, false, false, Done},
		{"own failure", app(ErrTypeStageFailed), false, false, Failed},
		{"a plain error", errors.New("boom"), false, false, Failed},
		{"handed back by its node", app(ErrTypeNodeLost), false, false, Lost},
		{"heartbeat timeout", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil), false, false, Lost},
		{"stage timeout", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil), false, false, Lost},
		{"aged in a shared queue", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil), false, false, Aged},
		{"its node did not take it", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil), true, false, Unclaimed},
		{"store unreachable, waited out", app(ErrTypeInfrastructure), false, true, Unreachable},
		{"store unreachable, no outage budget", app(ErrTypeInfrastructure), false, false, Failed},
		{"invalid input", app(ErrTypeInvalidVolume), false, true, Refused},
		{"panic", app(ErrTypeStagePanic), false, false, Refused},
		{"report exists", app(ErrTypeReportExists), false, false, Refused},
		{"non-retryable", temporal.NewNonRetryableApplicationError("x", "Other", nil), false, false, Refused},
		{"a worker that does not run the stage, waited out", notRegistered(), false, true, Unreachable},
		{"a worker that does not run the stage, no outage budget", notRegistered(), false, false, Failed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Classify(c.err, c.pinned, c.infraWaits); got != c.want {
				t.Errorf("Classify = %s, want %s", got, c.want)
			}
		})
	}
}

func TestAttemptNodeReadsTheFailureOrTheLastHeartbeat(t *testing.T) {
	failed := temporal.NewApplicationError("x", ErrTypeStageFailed, FailureDetails{Node: "gpu-a"})
	if got := AttemptNode(failed); got != "gpu-a" {
		t.Errorf("from the failure's details: %q", got)
	}
	lost := temporal.NewHeartbeatTimeoutError(Heartbeat{Node: "gpu-b"})
	if got := AttemptNode(lost); got != "gpu-b" {
		t.Errorf("from the last heartbeat: %q", got)
	}
	if got := AttemptNode(errors.New("boom")); got != "" {
		t.Errorf("from a plain error: %q", got)
	}
}

func TestARetrySummaryCutsItsFreeTextWithoutBreakingARune(t *testing.T) {
	node := strings.Repeat("é", 40) // 80 bytes, two per rune
	a, ok := AttemptOfRetrySummary(RetrySummary(Attempt{Stage: exam.Layers, Number: 2, Outcome: Lost, Node: node, FailureType: "NodeLost"}))
	if !ok || a.Stage != exam.Layers || a.Number != 2 || a.Outcome != Lost || a.FailureType != "NodeLost" {
		t.Fatalf("read back %+v, %v", a, ok)
	}
	if a.Node != strings.Repeat("é", maxNoteField/2) || !utf8.ValidString(a.Node) {
		t.Errorf("node cut to %q", a.Node)
	}
	if _, ok := AttemptOfRetrySummary("urgent SLA"); ok {
		t.Error("another timer's summary read as an attempt")
	}
}

// ActivityNotRegisteredError stands for the SDK's error of that name
// (internal, not exported): the failure converter names a Go error's
// failure by its type's name, as it does the SDK's.
type ActivityNotRegisteredError struct{}

func (ActivityNotRegisteredError) Error() string { return "unable to find activityType=MapVessels" }

// notRegistered is the error a workflow gets back when a worker without
// the stage's activity took its task: the SDK's error, through the
// failure converter, as Temporal carries it.
func notRegistered() error {
	fc := temporal.GetDefaultFailureConverter()
	return fc.FailureToError(fc.ErrorToFailure(&ActivityNotRegisteredError{}))
}
