package workflows

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"octflow/contract"
)

// TestTheExportNeverResendsARefusal pins the export workflow's own
// defence against resending what a PACS refused: the activity marks a
// refusal non-retryable, but a refusal that arrives marked retryable
// (an activity that forgot, a wrapper that lost the flag) must end the
// export just the same: sent once, failed, and failed as a refusal.
func TestTheExportNeverResendsARefusal(t *testing.T) {
	down := temporal.NewApplicationError("the PACS did not answer", contract.ErrTypePACSUnavailable)
	cases := []struct {
		name    string
		answers []error // one per send; any send after them is delivered
		sends   int
	}{
		{"a refusal marked retryable", []error{temporal.NewApplicationError("the PACS refused the results (409)", contract.ErrTypeExportRefused)}, 1},
		{"a refusal marked non-retryable", []error{temporal.NewNonRetryableApplicationError("the PACS refused the results (409)", contract.ErrTypeExportRefused, nil)}, 1},
		{"a refusal marked retryable, after the PACS was down", []error{down, temporal.NewApplicationError("the PACS refused the results (409)", contract.ErrTypeExportRefused)}, 2},
		{"a refusal with a cause, marked retryable", []error{temporal.NewApplicationErrorWithCause("the PACS refused the results (409)", contract.ErrTypeExportRefused, errors.New("Failed SOP Sequence: reason 0110"))}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var suite testsuite.WorkflowTestSuite
			metrics := newCounters()
			metrics.mustBeMade(t, shipped())
			suite.SetMetricsHandler(metrics)
			env := suite.NewTestWorkflowEnvironment()
			env.RegisterWorkflowWithOptions(ExportWorkflow, workflow.RegisterOptions{Name: contract.ExportWorkflow})
			answers, sends := c.answers, 0
			env.RegisterActivityWithOptions(func(ctx context.Context, in contract.StageInput) (contract.ExportOutput, error) {
				sends++
				if len(answers) > 0 {
					err := answers[0]
					answers = answers[1:]
					return contract.ExportOutput{}, err
				}
				return contract.ExportOutput{Instances: []string{"2.25.10"}}, nil
			}, activity.RegisterOptions{Name: contract.ExportToPACS})
			in := testInput()
			in.Policy.ExportRetryFor = time.Hour
			env.ExecuteWorkflow(ExportWorkflow, contract.ExportStart{Submission: in.Submission, Policy: in.Policy})
			var st contract.ExportState
			if v, err := env.QueryWorkflow(contract.ExportQuery); err != nil || v.Get(&st) != nil {
				t.Fatalf("export state: %v", err)
			}
			if sends != c.sends || st.Status != contract.ExportFailed {
				t.Fatalf("the export resent what the PACS refused: %d sends, status %s (want it sent %d time(s), then %s): a refused object must not be sent again",
					sends, st.Status, c.sends, contract.ExportFailed)
			}
			var app *temporal.ApplicationError
			if err := env.GetWorkflowError(); !errors.As(err, &app) || !app.NonRetryable() || app.Type() != contract.ErrTypeExportRefused {
				t.Errorf("a refused export ends with %v, want a non-retryable %s failure (an admin re-runs it once the cause is fixed)", err, contract.ErrTypeExportRefused)
			}
		})
	}
}

// TestExportRetryable walks the errors a send can end with: only a PACS
// that did not answer, or a send that ran out of its start-to-close
// time, is tried again; a refusal never is, however it is marked or
// wrapped.
func TestExportRetryable(t *testing.T) {
	refused := temporal.NewApplicationError("the PACS refused the results (409)", contract.ErrTypeExportRefused)
	down := temporal.NewApplicationError("the PACS did not answer", contract.ErrTypePACSUnavailable)
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"the PACS did not answer", down, true},
		{"the PACS did not answer, wrapped", fmt.Errorf("activity: %w", down), true},
		{"a send that ran out of time", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil), true},
		{"an error the activity did not type", errors.New("connection reset"), true},
		{"a refusal marked retryable", refused, false},
		{"a refusal marked retryable, wrapped", fmt.Errorf("activity: %w", refused), false},
		{"a refusal marked non-retryable", temporal.NewNonRetryableApplicationError("refused", contract.ErrTypeExportRefused, nil), false},
		{"objects that cannot be built", temporal.NewNonRetryableApplicationError("no identity", contract.ErrTypeInvalidVolume, nil), false},
		{"a PACS error marked non-retryable", temporal.NewNonRetryableApplicationError("down", contract.ErrTypePACSUnavailable, nil), false},
		{"a send never started", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil), false},
		{"a send out of its whole budget", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE, nil), false},
	} {
		if got := exportRetryable(c.err); got != c.want {
			verb := map[bool]string{true: "retries", false: "does not retry"}
			t.Errorf("the export %s %s (%v); want it to %s it", verb[got], c.name, c.err,
				map[bool]string{true: "retry", false: "not retry"}[c.want])
		}
	}
}
