package workflows

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"octflow/activities"
	"octflow/exam"
)

func testInput() exam.Input {
	return exam.Input{
		Submission: exam.Submission{ExamID: "E1", Priority: exam.Low, DeviceID: "dev-1", Campus: "north",
			ScanKey: exam.ScanKey("E1", "abcdef0123456789abcdef"), ScanDigest: "abcdef0123456789abcdef",
			CallbackURL: "https://ws.example/hook"},
		Policy: exam.Policy{RetryBase: time.Second, RetryCap: 4 * time.Second, HeartbeatTimeout: time.Minute},
	}
}

// recorder stands in for the stage activities and notes what each call
// got and on which queue it was scheduled.
type recorder struct {
	mu     sync.Mutex
	calls  []exam.Stage
	queues map[exam.Stage]string
	fail   map[exam.Stage]error
	// failOnce fails a stage's first call only.
	failOnce map[exam.Stage]error
}

func (r *recorder) register(env *testsuite.TestWorkflowEnvironment) {
	for _, stage := range exam.Pipeline {
		env.RegisterActivityWithOptions(func(ctx context.Context, in activities.StageInput) (activities.StageOutput, error) {
			r.mu.Lock()
			r.calls = append(r.calls, stage)
			r.queues[stage] = activity.GetInfo(ctx).TaskQueue
			err := r.fail[stage]
			if e, ok := r.failOnce[stage]; ok {
				err = e
				delete(r.failOnce, stage)
			}
			r.mu.Unlock()
			if err != nil {
				return activities.StageOutput{}, err
			}
			out := activities.StageOutput{Keys: []string{string(stage)}}
			if stage == exam.Measure {
				out.Summary = &exam.Summary{CentralSubfieldThicknessUm: 250}
			}
			if stage == exam.Notify {
				out.Delivered = true
			}
			return out, nil
		}, activity.RegisterOptions{Name: stage.ActivityName()})
	}
}

func newEnv(t *testing.T, fail map[exam.Stage]error) (*testsuite.TestWorkflowEnvironment, *recorder) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(ExamWorkflow)
	rec := &recorder{queues: map[exam.Stage]string{}, fail: fail}
	rec.register(env)
	return env, rec
}

func TestExamWorkflowRunsStagesInPipelineOrderOnTheirQueues(t *testing.T) {
	env, rec := newEnv(t, nil)
	env.ExecuteWorkflow(ExamWorkflow, testInput())
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec.calls, exam.Pipeline) {
		t.Fatalf("stages ran %v, want %v", rec.calls, exam.Pipeline)
	}
	for _, s := range exam.Pipeline {
		want := exam.CPUQueue
		if s.NeedsGPU() {
			want = exam.GPUQueue
		}
		if rec.queues[s] != want {
			t.Errorf("stage %s ran on %q, want %q", s, rec.queues[s], want)
		}
	}
	var res exam.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Report.JSONKey != "exams/E1/report.json" || res.Report.PDFKey != "exams/E1/report.pdf" {
		t.Errorf("report keys = %+v", res.Report)
	}
	if res.Summary.CentralSubfieldThicknessUm != 250 {
		t.Errorf("summary = %+v, want the measure stage's", res.Summary)
	}
	p := queryProgress(t, env)
	if p.State != exam.Completed || !p.Notified || p.IllegalMoves != 0 {
		t.Errorf("progress = %+v", p)
	}
}

func TestInvalidVolumeMakesTheExamDeadWithoutRetry(t *testing.T) {
	bad := temporal.NewNonRetryableApplicationError("SOP class is not OCT", activities.ErrTypeInvalidVolume, nil)
	env, rec := newEnv(t, map[exam.Stage]error{exam.Denoise: bad})
	env.ExecuteWorkflow(ExamWorkflow, testInput())
	err := env.GetWorkflowError()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != activities.ErrTypeInvalidVolume {
		t.Fatalf("workflow error = %v, want an %s application error", err, activities.ErrTypeInvalidVolume)
	}
	if !slices.Equal(rec.calls, []exam.Stage{exam.Denoise}) {
		t.Errorf("stages ran %v, want only one denoise attempt", rec.calls)
	}
	if p := queryProgress(t, env); p.State != exam.Dead || p.Stage != exam.Denoise {
		t.Errorf("progress = %+v, want DEAD at denoise", p)
	}
}

func TestTransientFailureIsRetriedUpToMaxAttemptsThenDead(t *testing.T) {
	env, rec := newEnv(t, map[exam.Stage]error{exam.Layers: errors.New("CUDA out of memory")})
	env.ExecuteWorkflow(ExamWorkflow, testInput())
	if err := env.GetWorkflowError(); err == nil {
		t.Fatal("workflow succeeded, want failure")
	}
	want := []exam.Stage{exam.Denoise, exam.Layers, exam.Layers, exam.Layers}
	if !slices.Equal(rec.calls, want) {
		t.Errorf("stages ran %v, want %v", rec.calls, want)
	}
	if p := queryProgress(t, env); p.State != exam.Dead {
		t.Errorf("state = %s, want DEAD", p.State)
	}
}

func TestFailedNotificationStillCompletesTheExam(t *testing.T) {
	refused := temporal.NewNonRetryableApplicationError("workstation refused", "CallbackRejected", nil)
	env, _ := newEnv(t, map[exam.Stage]error{exam.Notify: refused})
	env.ExecuteWorkflow(ExamWorkflow, testInput())
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow failed: %v", err)
	}
	p := queryProgress(t, env)
	if p.State != exam.Completed || p.Notified || p.NotifyError == "" {
		t.Errorf("progress = %+v, want COMPLETED, not notified, with the error", p)
	}
}

func queryProgress(t *testing.T, env *testsuite.TestWorkflowEnvironment) Progress {
	t.Helper()
	v, err := env.QueryWorkflow(ProgressQuery)
	if err != nil {
		t.Fatal(err)
	}
	var p Progress
	if err := v.Get(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestStageWaitingPastItsAgingThresholdIsPromotedOneBucket(t *testing.T) {
	env, rec := newEnv(t, nil)
	// The server reports a schedule-to-start timeout when the stage waited
	// its bucket's aging threshold without being picked up.
	rec.failOnce = map[exam.Stage]error{exam.Denoise: temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)}
	env.ExecuteWorkflow(ExamWorkflow, testInput()) // a low-priority exam
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	wantStages := append([]exam.Stage{exam.Denoise}, exam.Pipeline...)
	if !slices.Equal(rec.calls, wantStages) {
		t.Fatalf("stages ran %v, want %v", rec.calls, wantStages)
	}
	p := queryProgress(t, env)
	if p.EffectivePriority != exam.Normal || len(p.Promotions) != 1 || p.Promotions[0].From != exam.Low || p.Promotions[0].Stage != exam.Denoise {
		t.Errorf("progress = %+v, want one promotion low → normal at denoise", p)
	}
	if p.IllegalMoves != 0 {
		t.Errorf("%d illegal moves", p.IllegalMoves)
	}
}

func TestUrgentExamPastItsSLAIsFlaggedButCompletes(t *testing.T) {
	env, rec := newEnv(t, nil)
	// One failure whose retry waits longer than the SLA.
	rec.failOnce = map[exam.Stage]error{exam.Layers: errors.New("node lost")}
	in := testInput()
	in.Submission.Priority = exam.Urgent
	in.Policy.RetryBase, in.Policy.RetryCap, in.Policy.UrgentSLA = 20*time.Minute, 20*time.Minute, 15*time.Minute
	env.ExecuteWorkflow(ExamWorkflow, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if p := queryProgress(t, env); !p.SLABreached || p.State != exam.Completed {
		t.Errorf("progress = %+v, want COMPLETED with the SLA breach recorded", p)
	}
}

func TestReviewAcceptsOneFinalDecisionThenOnlyAmendments(t *testing.T) {
	env, _ := newEnv(t, nil)
	in := testInput()
	in.Policy.ReviewWindow = time.Hour
	outcomes := map[string]error{}
	review := func(id string, d exam.Decision) {
		env.UpdateWorkflow(ReviewUpdate, id, &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { outcomes[id] = err }, OnComplete: func(any, error) {},
		}, exam.ReviewInput{Decision: d, Note: id, By: "dr test"})
	}
	env.RegisterDelayedCallback(func() {
		review("approve", exam.Approve)
		review("approve-again", exam.Approve)
		review("reject-after-approve", exam.Reject)
		review("amend", exam.Amend)
	}, time.Minute)
	env.ExecuteWorkflow(ExamWorkflow, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	for id, refused := range map[string]bool{"approve": false, "approve-again": true, "reject-after-approve": true, "amend": false} {
		if got := outcomes[id] != nil; got != refused {
			t.Errorf("%s: refused = %v (%v), want %v", id, got, outcomes[id], refused)
		}
	}
	var res exam.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Review != exam.ReviewAmended || len(res.Reviews) != 2 || res.Reviews[1].Decision != exam.Amend || res.Reviews[0].By != "dr test" {
		t.Errorf("result review = %s %+v", res.Review, res.Reviews)
	}
}

func TestUrgentExamAwaitingReviewIsRemindedUntilTheWindowCloses(t *testing.T) {
	env, rec := newEnv(t, nil)
	in := testInput()
	in.Submission.Priority = exam.Urgent
	in.Policy.ReviewWindow, in.Policy.ReviewReminder = time.Hour, 20*time.Minute
	env.ExecuteWorkflow(ExamWorkflow, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	notifies := 0
	for _, s := range rec.calls {
		if s == exam.Notify {
			notifies++
		}
	}
	if notifies != 3 {
		t.Errorf("%d report-ready pushes, want the first and reminders at 20 and 40 min", notifies)
	}
	var res exam.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Review != exam.ReviewExpired {
		t.Errorf("review = %s, want expired", res.Review)
	}
}
