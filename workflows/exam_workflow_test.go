package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"octflow/activities"
	"octflow/contract"
	"octflow/exam"
)

func testInput() contract.ExamInput {
	pol := exam.DefaultPolicy()
	pol.RetryBase, pol.RetryCap, pol.HeartbeatTimeout = time.Second, 4*time.Second, time.Minute
	return contract.ExamInput{
		Submission: exam.Submission{ExamID: "E1", Priority: exam.Low, DeviceID: "dev-1", Campus: "north",
			ScanKey: exam.ScanKey(exam.Ref{Campus: "north", ID: "E1"}, "abcdef0123456789abcdef"), ScanDigest: "abcdef0123456789abcdef",
			CallbackURL: "https://ws.example/hook"},
		Policy: pol,
	}
}

// stages stands in for the stage activities and the Temporal matching
// service: it notes what each call got, on which queue and with which
// schedule-to-start timeout it was scheduled, and fails calls as told.
type stages struct {
	interceptor.WorkerInterceptorBase
	// pipeline is the pipeline whose stages it stands in for.
	pipeline exam.Pipeline
	mu       sync.Mutex
	calls    []exam.Stage
	queues   map[exam.Stage]string
	// fail fails every call of a stage; failOnce the next n calls.
	fail     map[exam.Stage]error
	failNext map[exam.Stage][]error
	// saturated says how many times a stage's bucket is too busy to start
	// it: a stage scheduled with a schedule-to-start timeout then times
	// out as the server would; one scheduled without one just waits.
	saturated map[exam.Stage]int
	// scheduled holds the options each stage was last scheduled with.
	scheduled map[exam.Stage]workflow.ActivityOptions
	timeouts  []time.Duration // every schedule-to-start timeout given, in order
	// archives are the reviews written to review.json, in order;
	// archiveIDs every write's activity ID, archiveFail what the next
	// writes fail with.
	archives    []contract.ReviewArchive
	archiveIDs  []string
	archiveFail []error
	// notifyOptions holds the options of every try of the notify
	// activity, in order.
	notifyOptions []workflow.ActivityOptions
	// nodeQueue is what GPU stages return as the queue of the node that
	// ran them ("": none, as a node without affinity).
	nodeQueue string
	// queueLog is every queue each stage was scheduled on, in order.
	queueLog map[exam.Stage][]string
	// inputs holds what each stage was last called with, as it went.
	inputs map[exam.Stage]json.RawMessage
	// activityIDs is every activity ID each stage ran under, in order.
	activityIDs map[exam.Stage][]string
	// slow holds the activity IDs that run for so long (real time) before
	// they end well, unless cancelled; cancelled notes those the workflow
	// cancelled.
	slow      map[string]time.Duration
	cancelled []string
	// commands is what the pipeline asked for, in order: "activity
	// <stage>" for each try of a stage, "child <type>" for each child
	// workflow started; children holds each child's options and input.
	commands []string
	children map[string]child
	// started is the ID of every workflow that ran, in order.
	started []string
	// What the history holds (history_test.go): every state and stage
	// upserted, every timer, each try's ID and bucket as scheduled, and
	// how each try ended (by activity ID: nil, done); metrics counts what
	// the workflows count.
	states  []string
	waits   []wait
	tries   map[exam.Stage][]string
	buckets map[exam.Stage][]exam.Priority
	ended   map[string]error
	metrics *counters
}

// child is a child workflow as the pipeline started it.
type child struct {
	opts workflow.ChildWorkflowOptions
	in   any
}

func (r *stages) register(env *testsuite.TestWorkflowEnvironment) {
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{r}})
	env.RegisterActivityWithOptions(func(ctx context.Context, a contract.ReviewArchive) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.archiveIDs = append(r.archiveIDs, activity.GetInfo(ctx).ActivityID)
		if len(r.archiveFail) > 0 {
			err := r.archiveFail[0]
			r.archiveFail = r.archiveFail[1:]
			return err
		}
		r.archives = append(r.archives, a)
		return nil
	}, activity.RegisterOptions{Name: contract.ArchiveReview})
	for _, spec := range r.pipeline {
		stage := spec.Stage
		env.RegisterActivityWithOptions(func(ctx context.Context, in json.RawMessage) (contract.StageOutput, error) {
			r.mu.Lock()
			r.calls = append(r.calls, stage)
			r.queues[stage] = activity.GetInfo(ctx).TaskQueue
			r.inputs[stage] = in
			r.activityIDs[stage] = append(r.activityIDs[stage], activity.GetInfo(ctx).ActivityID)
			err := r.fail[stage]
			if next := r.failNext[stage]; len(next) > 0 {
				err, r.failNext[stage] = next[0], next[1:]
			}
			if r.saturated[stage] > 0 && r.scheduled[stage].ScheduleToStartTimeout > 0 {
				r.saturated[stage]--
				err = temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
			}
			id := activity.GetInfo(ctx).ActivityID
			slow := r.slow[id]
			r.mu.Unlock()
			if slow > 0 {
				select {
				case <-ctx.Done():
					return contract.StageOutput{}, ctx.Err()
				case <-time.After(slow):
				}
			}
			r.mu.Lock()
			r.ended[id] = err
			r.mu.Unlock()
			if err != nil {
				return contract.StageOutput{}, err
			}
			out := contract.StageOutput{Keys: []string{string(stage)}, Node: "worker-1"}
			if spec.GPU {
				gpu := 2
				out.NodeQueue, out.Node, out.GPU, out.Algorithm = r.nodeQueue, "gpu-node", &gpu, "fake-"+string(stage)+"/v1"
			}
			switch stage {
			case exam.Measure:
				out.Summary = &exam.Summary{CentralSubfieldThicknessUm: ptr(250.0)}
			case exam.Render:
				// The measure stage's summary with the report's lesions.
				out.Summary = &exam.Summary{CentralSubfieldThicknessUm: ptr(250.0), Lesions: 2}
				out.ReportAt = ptr(fakeReportAt)
			}
			if stage == exam.Notify {
				out.Delivered = true
			}
			return out, nil
		}, activity.RegisterOptions{Name: spec.Activity})
	}
}

// fakeReportAt is when the fake report stage says it made the report.
var fakeReportAt = time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)

// InterceptWorkflow records the options of every activity the workflow
// schedules.
func (r *stages) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &scheduleRecorder{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, r: r}
}

type scheduleRecorder struct {
	interceptor.WorkflowInboundInterceptorBase
	r *stages
}

// ExecuteWorkflow notes the workflow's ID: which workflows ran.
func (s *scheduleRecorder) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	s.r.mu.Lock()
	s.r.started = append(s.r.started, workflow.GetInfo(ctx).WorkflowExecution.ID)
	s.r.mu.Unlock()
	return s.Next.ExecuteWorkflow(ctx, in)
}

func (s *scheduleRecorder) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return s.Next.Init(&scheduleOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}, r: s.r})
}

type scheduleOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	r *stages
}

func (s *scheduleOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	opts := workflow.GetActivityOptions(ctx)
	spec, isStage := s.r.pipeline.OfActivity(activityType)
	s.r.mu.Lock()
	s.r.scheduled[spec.Stage] = opts
	s.r.timeouts = append(s.r.timeouts, opts.ScheduleToStartTimeout)
	s.r.queueLog[spec.Stage] = append(s.r.queueLog[spec.Stage], opts.TaskQueue)
	if isStage {
		s.r.tries[spec.Stage] = append(s.r.tries[spec.Stage], opts.ActivityID)
		s.r.buckets[spec.Stage] = append(s.r.buckets[spec.Stage], bucketOf(opts))
	}
	if activityType == contract.NotifyWorkstation {
		s.r.notifyOptions = append(s.r.notifyOptions, opts)
	}
	s.r.commands = append(s.r.commands, "activity "+string(spec.Stage))
	s.r.mu.Unlock()
	// The workflow cancels a try by its context: note which.
	workflow.Go(ctx, func(ctx workflow.Context) {
		ctx.Done().Receive(ctx, nil)
		s.r.mu.Lock()
		s.r.cancelled = append(s.r.cancelled, opts.ActivityID)
		s.r.mu.Unlock()
	})
	return s.Next.ExecuteActivity(ctx, activityType, args...)
}

func (s *scheduleOutbound) ExecuteChildWorkflow(ctx workflow.Context, childType string, args ...any) workflow.ChildWorkflowFuture {
	s.r.mu.Lock()
	s.r.commands = append(s.r.commands, "child "+childType)
	if s.r.children == nil {
		s.r.children = map[string]child{}
	}
	s.r.children[childType] = child{opts: workflow.GetChildWorkflowOptions(ctx), in: args[0]}
	s.r.mu.Unlock()
	return s.Next.ExecuteChildWorkflow(ctx, childType, args...)
}

func newEnv(t *testing.T, fail map[exam.Stage]error) (*testsuite.TestWorkflowEnvironment, *stages) {
	t.Helper()
	return newEnvOver(t, fail, shipped())
}

// newEnvOver is newEnv with the exam's workflow run over pipeline.
func newEnvOver(t *testing.T, fail map[exam.Stage]error, pipeline exam.Pipeline) (*testsuite.TestWorkflowEnvironment, *stages) {
	t.Helper()
	rec := newStages(fail)
	rec.pipeline = pipeline
	rec.metrics.mustBeMade(t, pipeline)
	var suite testsuite.WorkflowTestSuite
	suite.SetMetricsHandler(rec.metrics)
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(ExamWorkflow(pipeline), workflow.RegisterOptions{Name: contract.ExamWorkflow})
	env.RegisterWorkflowWithOptions(ReviewWorkflow, workflow.RegisterOptions{Name: contract.ReviewWorkflow})
	rec.register(env)
	return env, rec
}

// newStages is a recorder whose stages fail as fail says.
func newStages(fail map[exam.Stage]error) *stages {
	return &stages{pipeline: shipped(), queues: map[exam.Stage]string{}, fail: fail, failNext: map[exam.Stage][]error{},
		saturated: map[exam.Stage]int{}, scheduled: map[exam.Stage]workflow.ActivityOptions{}, queueLog: map[exam.Stage][]string{},
		inputs: map[exam.Stage]json.RawMessage{}, activityIDs: map[exam.Stage][]string{}, slow: map[string]time.Duration{},
		tries: map[exam.Stage][]string{}, buckets: map[exam.Stage][]exam.Priority{}, ended: map[string]error{}, metrics: newCounters()}
}

func TestExamWorkflowRunsStagesInPipelineOrderOnTheirQueues(t *testing.T) {
	env, rec := newEnv(t, nil)
	env.ExecuteWorkflow(contract.ExamWorkflow, testInput())
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec.calls, shipped().Stages()) {
		t.Fatalf("stages ran %v, want %v", rec.calls, shipped().Stages())
	}
	for _, s := range shipped().Stages() {
		want := exam.CPUQueue
		if shipped().GPU(s) {
			want = exam.GPUQueue
		}
		if rec.queues[s] != want {
			t.Errorf("stage %s ran on %q, want %q", s, rec.queues[s], want)
		}
	}
	var res contract.ExamResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Report.JSONKey != "exams/north/E1/report.json" || res.Report.PDFKey != "exams/north/E1/report.pdf" {
		t.Errorf("report keys = %+v", res.Report)
	}
	if res.Summary.CentralSubfieldThicknessUm == nil || *res.Summary.CentralSubfieldThicknessUm != 250 {
		t.Errorf("summary = %+v, want the measure stage's", res.Summary)
	}
	// COMPLETED by legal moves only, and the workstation told.
	if st, bad := rec.lastState(), rec.illegalStates(); st != "COMPLETED/" || len(bad) > 0 ||
		rec.metrics.get("octflow_illegal_transitions_total") != 0 {
		t.Errorf("state %s, illegal moves %v (%d counted)", st, bad, rec.metrics.get("octflow_illegal_transitions_total"))
	}
	if res.NotifyFailure != nil || rec.ended["notify-1"] != nil || len(rec.tries[exam.Notify]) != 1 {
		t.Errorf("notification %+v after tries %v, want one delivered", res.NotifyFailure, rec.tries[exam.Notify])
	}
}

func TestOnceTheReportIsStoredThePipelineStartsItsReviewAndEnds(t *testing.T) {
	env, rec := newEnv(t, nil)
	var reviews []contract.ReviewStart
	env.OnWorkflow(contract.ReviewWorkflow, mock.Anything, mock.Anything).Return(
		func(_ workflow.Context, in contract.ReviewStart) (contract.ReviewState, error) {
			reviews = append(reviews, in)
			return contract.ReviewState{Status: exam.ReviewExpired}, nil
		})
	in := testInput()
	env.ExecuteWorkflow(contract.ExamWorkflow, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	// After the report stage, before the report-ready push: a
	// workstation told of the report finds its review open.
	render, review, notify := slices.Index(rec.commands, "activity report"), slices.Index(rec.commands, "child "+contract.ReviewWorkflow),
		slices.Index(rec.commands, "activity notify")
	if render < 0 || review < render || notify < review || slices.Contains(rec.commands[review+1:], "child "+contract.ReviewWorkflow) {
		t.Fatalf("the pipeline asked for %v, want one review started between the report and the notification", rec.commands)
	}
	// A child it does not wait for, under the options every start of an
	// exam's review has.
	opts, want := rec.children[contract.ReviewWorkflow].opts, contract.ReviewStartOptions(in.Submission, in.Policy).Child()
	if opts.WorkflowID != "review/north/E1" || opts.WorkflowID != want.WorkflowID || opts.TaskQueue != want.TaskQueue ||
		opts.ParentClosePolicy != enumspb.PARENT_CLOSE_POLICY_ABANDON || opts.WorkflowIDReusePolicy != want.WorkflowIDReusePolicy ||
		opts.Priority != want.Priority || opts.TypedSearchAttributes.Size() != want.TypedSearchAttributes.Size() {
		t.Errorf("the review was started with %+v, want %+v", opts, want)
	}
	// With the report's summary and time: the window runs from the report.
	if len(reviews) != 1 {
		t.Fatalf("%d reviews ran, want one", len(reviews))
	}
	r := reviews[0]
	if r.Submission.ExamID != "E1" || r.Policy.ReviewWindow != in.Policy.ReviewWindow || !r.ReportAt.Equal(fakeReportAt) ||
		r.Summary.Lesions != 2 || r.Summary.CentralSubfieldThicknessUm == nil {
		t.Errorf("the review started with %+v, want the report's summary and time", r)
	}
}

// Another run of the exam (an admin's rerun) finds the review the first
// one started: no second review, and no failure of the exam.
func TestASecondRunOfAnExamStartsNoSecondReview(t *testing.T) {
	env, rec := newEnv(t, nil)
	env.RegisterWorkflow(twoRuns)
	env.ExecuteWorkflow(twoRuns, testInput())
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("the second run failed: %v", err)
	}
	starts, reviews := 0, 0
	for _, c := range rec.commands {
		if c == "child "+contract.ReviewWorkflow {
			starts++
		}
	}
	for _, id := range rec.started {
		if id == "review/north/E1" {
			reviews++
		}
	}
	if starts != 2 || reviews != 1 {
		t.Errorf("the two runs asked for %d reviews and %d ran, want 2 asked and 1 run", starts, reviews)
	}
}

// twoRuns runs an exam, then runs it again.
func twoRuns(ctx workflow.Context, in contract.ExamInput) error {
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: contract.ExamWorkflowID(in.Submission.Ref()),
		TaskQueue: exam.WorkflowQueue})
	for range 2 {
		if err := workflow.ExecuteChildWorkflow(cctx, contract.ExamWorkflow, in).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// Each stage is given its own input: an image stage the exam, the
// report stage also the measure stage's summary and what computed each
// stage before it, as the stages' outputs said, the notify stage the
// exam and the report's summary.
func TestEachStageIsGivenWhatTheStagesBeforeItSaid(t *testing.T) {
	env, rec := newEnv(t, nil)
	env.ExecuteWorkflow(contract.ExamWorkflow, testInput())
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	for _, spec := range shipped() {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(rec.inputs[spec.Stage], &fields); err != nil {
			t.Fatalf("%s's input %s: %v", spec.Stage, rec.inputs[spec.Stage], err)
		}
		want := []string{"exam"}
		switch spec.Stage {
		case exam.Render:
			want = []string{"algorithms", "exam", "summary"}
		case exam.Notify:
			want = []string{"exam", "summary"}
		}
		if got := slices.Sorted(maps.Keys(fields)); !slices.Equal(got, want) {
			t.Errorf("stage %s is given %v, want %v", spec.Stage, got, want)
		}
	}
	var report contract.ReportInput
	if err := json.Unmarshal(rec.inputs[exam.Render], &report); err != nil {
		t.Fatal(err)
	}
	want := map[exam.Stage]string{exam.Denoise: "fake-denoise/v1", exam.Layers: "fake-layers/v1", exam.Lesions: "fake-lesions/v1",
		exam.Measure: "fake-measure/v1"}
	if report.Exam.ExamID != "E1" || !maps.Equal(report.Algorithms, want) || report.Summary.CentralSubfieldThicknessUm == nil ||
		report.Summary.Lesions != 0 {
		t.Errorf("the report stage is given %+v, want the measure stage's summary and the algorithms %v", report, want)
	}
	var notify contract.NotifyInput
	if err := json.Unmarshal(rec.inputs[exam.Notify], &notify); err != nil {
		t.Fatal(err)
	}
	if notify.Exam.ExamID != "E1" || notify.Summary.Lesions != 2 || notify.Reminder != 0 {
		t.Errorf("the notify stage is given %+v, want the report's summary", notify)
	}
}

func TestInvalidVolumeMakesTheExamDeadWithoutRetry(t *testing.T) {
	bad := temporal.NewNonRetryableApplicationError("SOP class is not OCT", contract.ErrTypeInvalidVolume, nil)
	env, rec := newEnv(t, map[exam.Stage]error{exam.Denoise: bad})
	env.ExecuteWorkflow(contract.ExamWorkflow, testInput())
	err := env.GetWorkflowError()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != contract.ErrTypeInvalidVolume {
		t.Fatalf("workflow error = %v, want an %s application error", err, contract.ErrTypeInvalidVolume)
	}
	if !slices.Equal(rec.calls, []exam.Stage{exam.Denoise}) {
		t.Errorf("stages ran %v, want only one denoise attempt", rec.calls)
	}
	if st := rec.lastState(); st != "DEAD/denoise" {
		t.Errorf("state %s, want DEAD at denoise", st)
	}
}

func TestAPanickedStageIsNotRetriedAndNamesTheStage(t *testing.T) {
	// What activities.Activities.run makes of a panic.
	panicked := temporal.NewNonRetryableApplicationError("layers panicked: index out of range [7] with length 3", contract.ErrTypeStagePanic, nil)
	env, rec := newEnv(t, map[exam.Stage]error{exam.Layers: panicked})
	env.ExecuteWorkflow(contract.ExamWorkflow, testInput())
	var app *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &app) || app.Type() != contract.ErrTypeStagePanic {
		t.Fatalf("workflow error = %v, want a %s", err, contract.ErrTypeStagePanic)
	}
	if !slices.Equal(rec.calls, []exam.Stage{exam.Denoise, exam.Layers}) {
		t.Errorf("stages ran %v, want one layers attempt", rec.calls)
	}
}

func TestFailedAndLostAttemptsAreRetriedWithinTheirBudgetsThenDead(t *testing.T) {
	oom := func() error { return errors.New("CUDA out of memory") }
	lostBeat := func() error { return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil) }
	handedBack := func() error {
		return temporal.NewApplicationErrorWithOptions("layers was lost with node gpu-a", contract.ErrTypeNodeLost,
			temporal.ApplicationErrorOptions{NextRetryDelay: time.Millisecond})
	}
	cases := []struct {
		name     string
		lost     int32 // the policy's LostAttempts (MaxAttempts is 3)
		fail     func() error
		wantRuns int
		want     contract.Outcome
	}{
		{"own failures spend MaxAttempts", 0, oom, 3, contract.Failed},
		{"own failures spend MaxAttempts whatever LostAttempts", 2, oom, 3, contract.Failed},
		{"lost attempts spend LostAttempts on top", 2, lostBeat, 5, contract.Lost},
		{"a node's hand-back is a lost attempt", 1, handedBack, 4, contract.Lost},
		{"without LostAttempts a lost attempt spends MaxAttempts", 0, lostBeat, 3, contract.Lost},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, rec := newEnv(t, nil)
			for range 10 {
				rec.failNext[exam.Layers] = append(rec.failNext[exam.Layers], c.fail())
			}
			in := testInput()
			in.Policy.LostAttempts = c.lost
			env.ExecuteWorkflow(contract.ExamWorkflow, in)
			if err := env.GetWorkflowError(); err == nil {
				t.Fatal("workflow succeeded, want failure")
			}
			want := []exam.Stage{exam.Denoise}
			for range c.wantRuns {
				want = append(want, exam.Layers)
			}
			if !slices.Equal(rec.calls, want) {
				t.Errorf("stages ran %v, want %v", rec.calls, want)
			}
			if st := rec.lastState(); st != "DEAD/layers" {
				t.Errorf("state = %s, want DEAD at layers", st)
			}
			var ids []string
			for i := range c.wantRuns {
				ids = append(ids, fmt.Sprintf("layers-%d", i+1))
			}
			if got := rec.tries[exam.Layers]; !slices.Equal(got, ids) {
				t.Errorf("layers' tries %v, want %v", got, ids)
			}
			// Every try but the last is retried after a wait whose timer
			// carries its record; the last spends the budget, with no
			// wait after it, and the exam is DEAD with its failure.
			retried := rec.retried()
			if len(retried) != c.wantRuns-1 {
				t.Fatalf("retry waits %+v, want %d", retried, c.wantRuns-1)
			}
			for i, a := range retried {
				// Failed and lost tries each spend one: try n is attempt n.
				if a.Stage != exam.Layers || a.Number != int32(i+1) || a.Outcome != c.want {
					t.Errorf("retried try %d = %+v, want layers attempt %d %s", i+1, a, i+1, c.want)
				}
				if max := in.Policy.RetryBase << i; a.RetryAfter <= 0 || a.RetryAfter > max {
					t.Errorf("try %d waited %s, want within (0, %s]", i+1, a.RetryAfter, max)
				}
			}
			var app *temporal.ApplicationError
			if err := env.GetWorkflowError(); !errors.As(err, &app) || !strings.Contains(app.Message(), failureMessage(c.fail())) {
				t.Errorf("the exam failed with %v, want the last try's failure", err)
			}
		})
	}
}

func TestWithoutAnInfrastructureBudgetAnOutageSpendsAttempts(t *testing.T) {
	env, rec := newEnv(t, nil)
	for range 5 {
		rec.failNext[exam.Layers] = append(rec.failNext[exam.Layers], infraDown())
	}
	in := testInput()
	in.Policy.InfraRetryFor = 0
	env.ExecuteWorkflow(contract.ExamWorkflow, in)
	if err := env.GetWorkflowError(); err == nil {
		t.Fatal("the exam completed through five outages with no budget for them")
	}
	// Two tries retried as failures (spending attempts), the third
	// spending the last: DEAD.
	var outcomes []contract.Outcome
	for _, a := range rec.retried() {
		outcomes = append(outcomes, a.Outcome)
	}
	if want := []contract.Outcome{contract.Failed, contract.Failed}; !slices.Equal(outcomes, want) || len(rec.tries[exam.Layers]) != 3 ||
		rec.lastState() != "DEAD/layers" {
		t.Errorf("layers' tries %v, retried as %v (%s), want three, two retried as %v, and DEAD", rec.tries[exam.Layers], outcomes,
			rec.lastState(), want)
	}
}

func TestEachAttemptIsRecordedWithWhereItRanAndHowItEnded(t *testing.T) {
	env, rec := newEnv(t, nil)
	rec.nodeQueue = exam.NodeQueue("gpu-a")
	rec.failNext[exam.Layers] = []error{temporal.NewApplicationErrorWithOptions("CUDA out of memory", contract.ErrTypeStageFailed,
		temporal.ApplicationErrorOptions{Details: []any{contract.FailureDetails{Node: "gpu-a"}}})}
	in := testInput()
	in.Policy.NodeAffinityWait = 30 * time.Second
	env.ExecuteWorkflow(contract.ExamWorkflow, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	// Each try as its history holds it: its ID (stage and try) and queue
	// as scheduled, how it ended, and the node and GPU its output names
	// or, for a retried try, the record of the wait after it.
	retried := rec.retried()
	var got []string
	for _, spec := range shipped() {
		for i, id := range rec.tries[spec.Stage] {
			ended := "done"
			if rec.ended[id] != nil {
				ended = "ended " + failureMessage(rec.ended[id])
			}
			got = append(got, fmt.Sprintf("%s %s %s", id, ended, rec.queueLog[spec.Stage][i]))
		}
	}
	// Every stage once, in the pipeline's order; a GPU stage after the
	// first goes to the node that ran the one before; layers fails there
	// once, and its retry goes to any node.
	node := exam.NodeQueue("gpu-a")
	var want []string
	pinned := false
	for _, spec := range shipped() {
		s := spec.Stage
		queue := spec.Queue()
		if spec.GPU && pinned {
			queue = node
		}
		if s == exam.Layers {
			want = append(want, "layers-1 ended CUDA out of memory "+queue, "layers-2 done "+exam.GPUQueue)
		} else {
			want = append(want, fmt.Sprintf("%s-1 done %s", s, queue))
		}
		pinned = pinned || spec.GPU
	}
	if !slices.Equal(got, want) {
		t.Errorf("tries\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The failed try's record names the node its failure names.
	if len(retried) != 1 {
		t.Fatalf("retry waits %+v, want one", retried)
	}
	if f := retried[0]; f.Stage != exam.Layers || f.Number != 1 || f.Outcome != contract.Failed || f.FailureType != contract.ErrTypeStageFailed ||
		f.Node != "gpu-a" || f.RetryAfter <= 0 {
		t.Errorf("the failed try's record %+v", f)
	}
	if ids := rec.activityIDs[exam.Layers]; !slices.Equal(ids, []string{"layers-1", "layers-2"}) {
		t.Errorf("layers' activity IDs %v, want one per try", ids)
	}
}

func TestALostAttemptSendsTheNextTryToTheSharedQueue(t *testing.T) {
	env, rec := newEnv(t, nil)
	rec.nodeQueue = exam.NodeQueue("gpu-a")
	rec.failNext[exam.Layers] = []error{temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)}
	in := testInput()
	in.Policy.NodeAffinityWait = 30 * time.Second
	env.ExecuteWorkflow(contract.ExamWorkflow, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.queueLog[exam.Layers], []string{exam.NodeQueue("gpu-a"), exam.GPUQueue}; !slices.Equal(got, want) {
		t.Errorf("layers scheduled on %v, want %v", got, want)
	}
}

func TestRetryDelaysAreFullJitterAndTheSameOnReplay(t *testing.T) {
	pol := exam.Policy{RetryBase: time.Second, RetryCap: 4 * time.Second}
	seen := map[time.Duration]bool{}
	for i := range 200 {
		run := fmt.Sprintf("run-%d", i)
		for n := int32(1); n <= 4; n++ {
			d := retryDelay(run, exam.Layers, n, pol, errors.New("x"))
			if ceiling := min(pol.RetryCap, pol.RetryBase<<(n-1)); d < time.Millisecond || d > ceiling {
				t.Fatalf("delay %s after %d failures, want within [1ms, %s]", d, n, ceiling)
			}
			if again := retryDelay(run, exam.Layers, n, pol, errors.New("x")); again != d {
				t.Fatalf("delay %s, then %s for the same run and try", d, again)
			}
			if n == 1 {
				seen[d/(100*time.Millisecond)] = true
			}
		}
	}
	// Full jitter: the first delays spread over the whole [0, 1 s).
	if len(seen) < 10 {
		t.Errorf("first delays fell in %d of 10 tenths of the window", len(seen))
	}
	named := temporal.NewApplicationErrorWithOptions("handed back", contract.ErrTypeNodeLost, temporal.ApplicationErrorOptions{NextRetryDelay: 3 * time.Millisecond})
	if d := retryDelay("run", exam.Layers, 3, pol, named); d != 3*time.Millisecond {
		t.Errorf("a failure naming its delay waited %s", d)
	}
}

func infraDown() error {
	return temporal.NewApplicationError("unavailable: get exams/E1/denoised.dcm: connection refused", contract.ErrTypeInfrastructure)
}

func TestAStageThatCannotReachTheStoreIsRescheduledWithoutSpendingAttempts(t *testing.T) {
	env, rec := newEnv(t, nil)
	// Five outages in a row: more than the stage's three attempts.
	rec.failNext[exam.Layers] = []error{infraDown(), infraDown(), infraDown(), infraDown(), infraDown()}
	env.ExecuteWorkflow(contract.ExamWorkflow, testInput())
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("exam failed: %v", err)
	}
	layers := 0
	for _, s := range rec.calls {
		if s == exam.Layers {
			layers++
		}
	}
	if layers != 6 {
		t.Errorf("layers ran %d times, want 5 refused + 1", layers)
	}
	// An outage spends no attempt: every try of layers is attempt 1.
	var waits []time.Duration
	for _, a := range rec.retried() {
		if a.Stage != exam.Layers || a.Number != 1 || a.Outcome != contract.Unreachable {
			t.Errorf("a retried try of layers is %+v, want attempt 1, unreachable", a)
		}
		waits = append(waits, a.RetryAfter)
	}
	// Each wait in RETRY_WAIT, then QUEUED again.
	if n := strings.Count(strings.Join(rec.states, " "), "RETRY_WAIT/layers QUEUED/layers"); n != 5 {
		t.Errorf("states %v: RETRY_WAIT then QUEUED %d times, want 5", rec.states, n)
	}
	// Ceilings of 2, 4, 8, 16 and 32 s, each delay in its upper half.
	if len(waits) != 5 {
		t.Fatalf("retry waits %v, want 5", waits)
	}
	for i, w := range waits {
		ceiling := infraBackoffBase << i
		if w < ceiling/2 || w > ceiling {
			t.Errorf("backoff %d lasted %s, want within [%s, %s]", i+1, w, ceiling/2, ceiling)
		}
	}
}

func TestAnOutageLongerThanTheInfrastructureBudgetEndsTheExam(t *testing.T) {
	env, _ := newEnv(t, map[exam.Stage]error{exam.Denoise: infraDown()})
	in := testInput()
	in.Policy.InfraRetryFor = 5 * time.Minute
	env.ExecuteWorkflow(contract.ExamWorkflow, in)
	var app *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &app) || app.Type() != contract.ErrTypeInfrastructure {
		t.Fatalf("workflow error = %v, want the infrastructure failure", err)
	}
}

func TestFailedNotificationStillCompletesTheExam(t *testing.T) {
	refused := temporal.NewNonRetryableApplicationError("workstation refused", "CallbackRejected", nil)
	env, rec := newEnv(t, map[exam.Stage]error{exam.Notify: refused})
	env.ExecuteWorkflow(contract.ExamWorkflow, testInput())
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow failed: %v", err)
	}
	if st := rec.lastState(); st != "COMPLETED/" {
		t.Errorf("state %s, want COMPLETED", st)
	}
	// The result says the notification failed: the timeline reads it there.
	var res contract.ExamResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if f := res.NotifyFailure; f == nil || f.Stage != exam.Notify || f.Outcome != contract.Refused || f.Failure != "workstation refused" || f.Number != 1 {
		t.Errorf("result's notification failure = %+v, want the refused try", f)
	}
}

func TestStageWaitingPastItsAgingThresholdIsPromotedOneBucket(t *testing.T) {
	cases := []struct {
		name       string
		aging      map[exam.Priority]time.Duration
		promotions []exam.Priority // the buckets the denoise stage ends up in, in order
		timeouts   []time.Duration // the schedule-to-start timeouts denoise was given
	}{
		{"aging on: low → normal → urgent", map[exam.Priority]time.Duration{exam.Low: 30 * time.Minute, exam.Normal: 20 * time.Minute},
			[]exam.Priority{exam.Normal, exam.Urgent}, []time.Duration{30 * time.Minute, 20 * time.Minute, 0}},
		{"aging off: the stage waits where it is", map[exam.Priority]time.Duration{},
			nil, []time.Duration{0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, rec := newEnv(t, nil)
			rec.saturated[exam.Denoise] = 5 // more than it takes to reach urgent
			in := testInput()               // a low-priority exam
			in.Policy.Aging = c.aging
			env.ExecuteWorkflow(contract.ExamWorkflow, in)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			// A promotion is the stage scheduled again in the bucket
			// above (as its tries' fairness keys say, where the timeline
			// reads it), and counted.
			var got []exam.Priority
			for stage, buckets := range rec.buckets {
				for i := 1; i < len(buckets); i++ {
					if buckets[i] == buckets[i-1] {
						continue
					}
					if stage != exam.Denoise {
						t.Errorf("promotion of %s", stage)
					}
					if rec.metrics.get(fmt.Sprintf("octflow_promotions_total{from=%s,to=%s}", buckets[i-1], buckets[i])) != 1 {
						t.Errorf("the promotion from %s to %s was not counted: %v", buckets[i-1], buckets[i], rec.metrics.named("octflow_promotions"))
					}
					got = append(got, buckets[i])
				}
			}
			if !slices.Equal(got, c.promotions) {
				t.Errorf("promotions to %v, want %v", got, c.promotions)
			}
			if n := len(c.timeouts); !slices.Equal(rec.timeouts[:n], c.timeouts) {
				t.Errorf("denoise was scheduled with schedule-to-start timeouts %v, want %v", rec.timeouts[:n], c.timeouts)
			}
			if bad, n := rec.illegalStates(), rec.metrics.get("octflow_illegal_transitions_total"); len(bad) > 0 || n != 0 {
				t.Errorf("illegal moves %v (%d counted)", bad, n)
			}
		})
	}
}

func TestLaterGPUStagesGoToTheNodeThatRanTheFirstAndBackWhenItIsGone(t *testing.T) {
	node := exam.NodeQueue("gpu-a")
	cases := []struct {
		name     string
		wait     time.Duration
		gone     map[exam.Stage]int // how often the node does not take a stage in time
		want     map[exam.Stage][]string
		timeouts []time.Duration // the schedule-to-start timeouts of the GPU stages, in order
	}{
		{"the node takes every stage", 30 * time.Second, nil,
			map[exam.Stage][]string{exam.Denoise: {exam.GPUQueue}, exam.Layers: {node}, exam.Lesions: {node}, exam.Measure: {node}},
			[]time.Duration{30 * time.Minute, 30 * time.Second, 30 * time.Second, 30 * time.Second}},
		{"the node is gone before layers: back to the shared queue", 30 * time.Second, map[exam.Stage]int{exam.Layers: 1},
			map[exam.Stage][]string{exam.Denoise: {exam.GPUQueue}, exam.Layers: {node, exam.GPUQueue}, exam.Lesions: {node}, exam.Measure: {node}},
			[]time.Duration{30 * time.Minute, 30 * time.Second, 30 * time.Minute, 30 * time.Second, 30 * time.Second}},
		{"no affinity: every GPU stage on the shared queue", 0, nil,
			map[exam.Stage][]string{exam.Denoise: {exam.GPUQueue}, exam.Layers: {exam.GPUQueue}, exam.Lesions: {exam.GPUQueue}, exam.Measure: {exam.GPUQueue}},
			[]time.Duration{30 * time.Minute, 30 * time.Minute, 30 * time.Minute, 30 * time.Minute}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, rec := newEnv(t, nil)
			rec.nodeQueue = node
			maps.Copy(rec.saturated, c.gone)
			in := testInput() // low: 30 min aging
			in.Policy.NodeAffinityWait = c.wait
			env.ExecuteWorkflow(contract.ExamWorkflow, in)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			for stage, want := range c.want {
				if got := rec.queueLog[stage]; !slices.Equal(got, want) {
					t.Errorf("%s scheduled on %v, want %v", stage, got, want)
				}
			}
			if got := rec.timeouts[:len(c.timeouts)]; !slices.Equal(got, c.timeouts) {
				t.Errorf("GPU stages' schedule-to-start timeouts %v, want %v", got, c.timeouts)
			}
			for stage, buckets := range rec.buckets {
				if slices.ContainsFunc(buckets, func(b exam.Priority) bool { return b != exam.Low }) {
					t.Errorf("%s scheduled in %v: a fallback from the node was taken for aging", stage, buckets)
				}
			}
			if promoted := rec.metrics.named("octflow_promotions"); len(promoted) != 0 {
				t.Errorf("promotions counted: %v", promoted)
			}
			if st, bad := rec.lastState(), rec.illegalStates(); st != "COMPLETED/" || len(bad) > 0 ||
				rec.metrics.get("octflow_illegal_transitions_total") != 0 {
				t.Errorf("state %s, illegal moves %v", st, bad)
			}
		})
	}
}

func TestUrgentSLAIsFlaggedOnlyWhenTheReportIsLate(t *testing.T) {
	cases := []struct {
		name     string
		retryIn  time.Duration // the wait before layers' second attempt
		breached bool
	}{
		{"report after the SLA", 20 * time.Minute, true},
		{"report within the SLA", time.Second, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, rec := newEnv(t, nil)
			rec.failNext[exam.Layers] = []error{temporal.NewApplicationErrorWithOptions("node lost", "StageFailed",
				temporal.ApplicationErrorOptions{NextRetryDelay: c.retryIn})}
			in := testInput()
			in.Submission.Priority = exam.Urgent
			in.Policy.RetryBase, in.Policy.RetryCap, in.Policy.UrgentSLA = time.Second, time.Hour, 15*time.Minute
			env.ExecuteWorkflow(contract.ExamWorkflow, in)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			breaches := rec.metrics.get("octflow_urgent_sla_breaches_total")
			if (breaches == 1) != c.breached || breaches > 1 || rec.lastState() != "COMPLETED/" {
				t.Errorf("%s with %d SLA breaches counted, want COMPLETED with a breach %v", rec.lastState(), breaches, c.breached)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestAHedgedStageTakesTheFirstResultAndCancelsTheOther(t *testing.T) {
	gpuA, gpuB := exam.NodeQueue("gpu-a"), exam.NodeQueue("gpu-b")
	cases := []struct {
		name string
		slow map[string]time.Duration
		// hedge names the try the fleet says is late, queue the node it
		// chose to run it.
		hedge, queue string
		want         []string // layers' tries as the history holds them: try, how it ended, queue
		won          string   // which try the hedge's count says won ("": no hedge)
		calls        int      // calls of layers
		cancelled    []string
		fail         []error // what layers' calls end with, in order (nil: well)
	}{
		{"the hedge ends first", map[string]time.Duration{"layers-1": time.Minute}, "layers-1", "",
			[]string{"1 cancelled " + gpuA, "2 done " + exam.GPUQueue}, "hedge", 2, []string{"layers-1"}, nil},
		{"the hedge goes to the node the fleet chose", map[string]time.Duration{"layers-1": time.Minute}, "layers-1", gpuB,
			[]string{"1 cancelled " + gpuA, "2 done " + gpuB}, "hedge", 2, []string{"layers-1"}, nil},
		{"a hedge to a node of another GPU queue goes to the exam's own queue", map[string]time.Duration{"layers-1": time.Minute}, "layers-1",
			exam.NodeQueueOf(exam.CampusGPUQueue("south"), "gpu-s"),
			[]string{"1 cancelled " + gpuA, "2 done " + exam.GPUQueue}, "hedge", 2, []string{"layers-1"}, nil},
		{"a hedge to a queue that is no node's goes to the exam's own queue", map[string]time.Duration{"layers-1": time.Minute}, "layers-1",
			exam.CPUQueue, []string{"1 cancelled " + gpuA, "2 done " + exam.GPUQueue}, "hedge", 2, []string{"layers-1"}, nil},
		{"the original ends first", map[string]time.Duration{"layers-1": 300 * time.Millisecond, "layers-2": time.Minute}, "layers-1", "",
			[]string{"1 done " + gpuA, "2 cancelled " + exam.GPUQueue}, "original", 2, []string{"layers-2"}, nil},
		{"a signal for an earlier try is ignored", map[string]time.Duration{"layers-1": 300 * time.Millisecond}, "layers-0", "",
			[]string{"1 done " + gpuA}, "", 1, nil, nil},
		{"the original fails while the hedge runs", map[string]time.Duration{"layers-1": 300 * time.Millisecond, "layers-2": 600 * time.Millisecond},
			"layers-1", "", []string{"1 failed " + gpuA, "2 done " + exam.GPUQueue}, "hedge", 2, nil, []error{errors.New("CUDA error")}},
		{"both fail: the original's failure decides, and one attempt is spent",
			map[string]time.Duration{"layers-1": 300 * time.Millisecond}, "layers-1", "",
			[]string{"1 failed " + gpuA, "2 failed " + exam.GPUQueue, "3 done " + exam.GPUQueue}, "neither", 3, nil,
			[]error{errors.New("CUDA error"), errors.New("CUDA error on the other node")}},
		{"a hedge a degraded node hands back is hedged again", map[string]time.Duration{"layers-1": time.Minute}, "layers-1", "",
			[]string{"1 cancelled " + gpuA, "2 failed NodeDegraded " + exam.GPUQueue, "3 done " + exam.GPUQueue}, "hedge", 3, []string{"layers-1"},
			[]error{nil, temporal.NewApplicationError("node gpu-a is degraded", contract.ErrTypeNodeDegraded)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, rec := newEnv(t, nil)
			// The review is not what this test watches, and its week of
			// timers cannot be skipped while the loser of a hedge still
			// runs in real time.
			env.OnWorkflow(contract.ReviewWorkflow, mock.Anything, mock.Anything).Return(contract.ReviewState{}, nil)
			rec.nodeQueue = gpuA
			maps.Copy(rec.slow, c.slow)
			rec.failNext[exam.Layers] = c.fail
			in := testInput()
			in.Policy.NodeAffinityWait = 30 * time.Second
			env.RegisterDelayedCallback(func() {
				env.SignalWorkflow(contract.HedgeSignal, contract.Hedge{ActivityID: c.hedge, Node: "gpu-a", Reason: "node gpu-a is degraded",
					Queue: c.queue})
			}, 100*time.Millisecond)
			env.ExecuteWorkflow(contract.ExamWorkflow, in)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			var got []string
			for i, id := range rec.tries[exam.Layers] {
				ended := "done"
				var app *temporal.ApplicationError
				switch err := rec.ended[id]; {
				case slices.Contains(rec.cancelled, id):
					ended = "cancelled"
				case errors.As(err, &app) && app.Type() != "":
					ended = "failed " + app.Type()
				case err != nil:
					ended = "failed"
				}
				got = append(got, fmt.Sprintf("%d %s %s", contract.TryOf(id), ended, rec.queueLog[exam.Layers][i]))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("layers' tries %v, want %v", got, c.want)
			}
			// The hedge is counted with the try that won.
			want := map[string]int64{}
			if c.won != "" {
				want["octflow_stage_hedges_total{stage=layers,won="+c.won+"}"] = 1
			}
			if got := rec.metrics.named("octflow_stage_hedges_total"); !maps.Equal(got, want) {
				t.Errorf("hedges counted %v, want %v", got, want)
			}
			// Both failed: one attempt spent, by the original's failure.
			if c.won == "neither" {
				if r := rec.retriedLocked(); len(r) != 1 || r[0].Number != 1 || r[0].Outcome != contract.Failed || r[0].Node != "" && r[0].Node != "gpu-node" {
					t.Errorf("retried %+v, want attempt 1 failed, once", r)
				}
			}
			calls := 0
			for _, s := range rec.calls {
				if s == exam.Layers {
					calls++
				}
			}
			// The original won on the degraded node: the next stage does
			// not wait for that node.
			if c.name == "the original ends first" && rec.queueLog[exam.Lesions][0] != exam.GPUQueue {
				t.Errorf("after the original won on the degraded node, lesions went to %v", rec.queueLog[exam.Lesions])
			}
			if calls != c.calls || !slices.Equal(rec.cancelled, c.cancelled) {
				t.Errorf("layers ran %d times, %v cancelled; want %d runs, %v cancelled", calls, rec.cancelled, c.calls, c.cancelled)
			}
			if renders := slices.Index(rec.calls, exam.Render); renders < 0 || slices.Contains(rec.calls[renders+1:], exam.Render) {
				t.Errorf("the report stage ran %v, want exactly once", rec.calls)
			}
			if st := rec.states[len(rec.states)-1]; st != "COMPLETED/" {
				t.Errorf("state %s", st)
			}
		})
	}
}

// A node says which queue is its own; an exam pins its next GPU stages
// there only when it is a node queue of the exam's own GPU queue.
func TestAnExamPinsItsStagesOnlyToANodeQueueOfItsOwnGPUQueue(t *testing.T) {
	for _, tc := range []struct {
		name, gpuQueue, nodeQueue, want string
	}{
		{"a shared node's", "", exam.NodeQueue("gpu-a"), exam.NodeQueue("gpu-a")},
		{"a campus's node's, for a shared exam", "", exam.NodeQueueOf(exam.CampusGPUQueue("south"), "gpu-s"), exam.GPUQueue},
		{"the campus's own node's", exam.CampusGPUQueue("north"), exam.NodeQueueOf(exam.CampusGPUQueue("north"), "gpu-n"),
			exam.NodeQueueOf(exam.CampusGPUQueue("north"), "gpu-n")},
		{"a shared node's, for a campus's exam", exam.CampusGPUQueue("north"), exam.NodeQueue("gpu-a"), exam.CampusGPUQueue("north")},
		{"the CPU queue", "", exam.CPUQueue, exam.GPUQueue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, rec := newEnv(t, nil)
			rec.nodeQueue = tc.nodeQueue
			in := testInput()
			in.Policy.NodeAffinityWait = 30 * time.Second
			in.Policy.GPUQueue = tc.gpuQueue
			env.ExecuteWorkflow(contract.ExamWorkflow, in)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if got := rec.queueLog[exam.Layers]; len(got) != 1 || got[0] != tc.want {
				t.Errorf("layers went to %v, want %s", got, tc.want)
			}
		})
	}
}

// shipped is the pipeline the workers register the workflows over.
func shipped() exam.Pipeline { return activities.Pipeline().Specs() }

func TestAPipelineTheWorkflowsCannotRunIsRefused(t *testing.T) {
	without := func(stage exam.Stage) exam.Pipeline {
		var out exam.Pipeline
		for _, s := range shipped() {
			if s.Stage != stage {
				out = append(out, s)
			}
		}
		return out
	}
	twice := append(shipped(), shipped()[0])
	stated := func(stage exam.Stage, input exam.InputKind) exam.Pipeline {
		out := shipped()
		for i := range out {
			if out[i].Stage == stage {
				out[i].Input = input
			}
		}
		return out
	}
	gpuNotify := shipped()
	for i := range gpuNotify {
		if gpuNotify[i].Stage == exam.Notify {
			gpuNotify[i].GPU = true
		}
	}
	for name, tc := range map[string]struct {
		stages exam.Pipeline
		want   string
	}{
		"no report stage":                      {without(exam.Render), "no report stage"},
		"no notify stage":                      {without(exam.Notify), "notify stage must run NotifyWorkstation"},
		"notify on a GPU":                      {gpuNotify, "notify stage must run NotifyWorkstation"},
		"a stage named twice":                  {twice, "named twice"},
		"a stage stating no input":             {stated(exam.Layers, ""), "layers states no input"},
		"a notify stage taking the exam alone": {stated(exam.Notify, exam.ImageInput), "taking a notify input"},
		"the shipped pipeline":                 {shipped(), ""},
	} {
		t.Run(name, func(t *testing.T) {
			var suite testsuite.WorkflowTestSuite
			err := Register(suite.NewTestWorkflowEnvironment(), tc.stages)
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Register = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
