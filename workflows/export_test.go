package workflows

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"octflow/contract"
)

func TestAnExportIsRetriedWhileThePACSIsDownAndFailsOnARefusal(t *testing.T) {
	down := func() error {
		return temporal.NewApplicationError("the PACS did not answer", contract.ErrTypePACSUnavailable)
	}
	refusal := temporal.NewNonRetryableApplicationError("the PACS refused the results (409): 2.25.1: reason 272", contract.ErrTypeExportRefused, nil)
	cases := []struct {
		name      string
		answers   []error // one per send; then the send succeeds
		retryFor  time.Duration
		want      contract.ExportStatus
		wantTries int32 // 0: as many as the budget allows
	}{
		{"delivered at once", nil, time.Hour, contract.ExportDelivered, 1},
		{"the PACS comes back", []error{down(), down(), down()}, time.Hour, contract.ExportDelivered, 4},
		{"a refusal is final", []error{refusal}, time.Hour, contract.ExportFailed, 1},
		{"a send that timed out is tried again", []error{temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil)}, time.Hour, contract.ExportDelivered, 2},
		{"down past the budget", []error{down(), down(), down(), down(), down(), down(), down(), down(), down(), down()}, 20 * time.Second, contract.ExportFailed, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var suite testsuite.WorkflowTestSuite
			metrics := newCounters()
			metrics.mustBeMade(t, shipped())
			suite.SetMetricsHandler(metrics)
			env := suite.NewTestWorkflowEnvironment()
			env.RegisterWorkflowWithOptions(ExportWorkflow, workflow.RegisterOptions{Name: contract.ExportWorkflow})
			answers := c.answers
			var sends []time.Time
			env.RegisterActivityWithOptions(func(ctx context.Context, in contract.StageInput) (contract.ExportOutput, error) {
				sends = append(sends, env.Now())
				if len(answers) > 0 {
					err := answers[0]
					answers = answers[1:]
					return contract.ExportOutput{}, err
				}
				return contract.ExportOutput{Instances: []string{"2.25.10", "2.25.11"}}, nil
			}, activity.RegisterOptions{Name: contract.ExportToPACS})
			in := testInput()
			in.Policy.ExportRetryFor = c.retryFor
			env.ExecuteWorkflow(ExportWorkflow, contract.ExportStart{Submission: in.Submission, Policy: in.Policy})
			err := env.GetWorkflowError()
			var st contract.ExportState
			if v, qerr := env.QueryWorkflow(contract.ExportQuery); qerr == nil {
				_ = v.Get(&st)
			}
			if st.Status != c.want || int32(len(sends)) != st.Tries || (c.wantTries > 0 && st.Tries != c.wantTries) {
				t.Fatalf("export %+v after %d sends, want %s after %d", st, len(sends), c.want, c.wantTries)
			}
			if c.wantTries == 0 && (st.Tries < 2 || int(st.Tries) > len(c.answers) || sends[len(sends)-1].Sub(sends[0]) < c.retryFor) {
				t.Errorf("gave up after %d sends over %s, want the %s budget spent first", st.Tries, sends[len(sends)-1].Sub(sends[0]), c.retryFor)
			}
			var app *temporal.ApplicationError
			switch c.want {
			case contract.ExportDelivered:
				if err != nil || len(st.Instances) != 2 || st.DeliveredAt == nil {
					t.Errorf("delivered export: err %v, state %+v", err, st)
				}
			case contract.ExportFailed:
				if !errors.As(err, &app) || !app.NonRetryable() || st.Failure == "" {
					t.Errorf("failed export: err %v, state %+v", err, st)
				}
			}
			// Jittered waits, growing with the tries, never none.
			for i := 1; i < len(sends); i++ {
				if gap := sends[i].Sub(sends[i-1]); gap < time.Second || gap > exportBackoffBase<<(i-1) {
					t.Errorf("send %d came %s after the one before, want within [1s, %s]", i+1, gap, exportBackoffBase<<(i-1))
				}
			}
		})
	}
}

func TestThePipelineStartsTheExportOnceTheReportExistsOnlyForACampusWithAPACS(t *testing.T) {
	for _, export := range []bool{false, true} {
		env, rec := newEnv(t, nil)
		env.RegisterWorkflowWithOptions(ExportWorkflow, workflow.RegisterOptions{Name: contract.ExportWorkflow})
		var exported []contract.StageInput
		env.RegisterActivityWithOptions(func(_ context.Context, in contract.StageInput) (contract.ExportOutput, error) {
			exported = append(exported, in)
			// The report was rendered before the export began (the notify
			// stage runs beside the export: read under the recorder's lock).
			rec.mu.Lock()
			calls := slices.Clone(rec.calls)
			rec.mu.Unlock()
			if len(calls) == 0 || !containsStage(calls, "report") {
				t.Errorf("export before the report: stages so far %v", calls)
			}
			return contract.ExportOutput{Instances: []string{"2.25.10"}}, nil
		}, activity.RegisterOptions{Name: contract.ExportToPACS})
		in := testInput()
		in.Export = export
		env.ExecuteWorkflow(contract.ExamWorkflow, in)
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{false: 0, true: 1}[export]; len(exported) != want {
			t.Errorf("export %v: %d exports, want %d", export, len(exported), want)
		}
		if export && len(exported) == 1 && exported[0].Exam.ExamID != in.Submission.ExamID {
			t.Errorf("exported %+v", exported[0].Exam)
		}
	}
}

func containsStage[S ~string](stages []S, s S) bool {
	for _, x := range stages {
		if x == s {
			return true
		}
	}
	return false
}
