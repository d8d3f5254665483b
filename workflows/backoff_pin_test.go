package workflows

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"octflow/codec"
	"octflow/contract"
	"octflow/exam"
)

// sleepRecorder notes every retry wait's timer (named by the attempt it
// follows, contract.RetrySummary), by workflow ID: here the waits of the
// infrastructure backoff.
type sleepRecorder struct {
	interceptor.WorkerInterceptorBase
	mu     sync.Mutex
	sleeps map[string][]time.Duration
}

func (r *sleepRecorder) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &sleepInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, r: r}
}

type sleepInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	r *sleepRecorder
}

func (s *sleepInbound) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return s.Next.Init(&sleepOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}, r: s.r})
}

type sleepOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	r *sleepRecorder
}

func (s *sleepOutbound) NewTimerWithOptions(ctx workflow.Context, d time.Duration, opts workflow.TimerOptions) workflow.Future {
	// Test bookkeeping, not workflow state: what is recorded never
	// steers the workflow.
	//workflowcheck:ignore
	if _, retry := contract.AttemptOfRetrySummary(opts.Summary); retry && !workflow.IsReplaying(ctx) {
		id := workflow.GetInfo(ctx).WorkflowExecution.ID
		s.r.mu.Lock()
		s.r.sleeps[id] = append(s.r.sleeps[id], d)
		s.r.mu.Unlock()
	}
	return s.Next.NewTimerWithOptions(ctx, d, opts)
}

// twoExams starts the exams as children, at the same moment, and waits
// for both: the test environment gives every top-level workflow the same
// run ID, and every child a run ID of its own, as Temporal does.
func twoExams(ctx workflow.Context, ins []contract.ExamInput) error {
	var futures []workflow.ChildWorkflowFuture
	for _, in := range ins {
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID: contract.ExamWorkflowID(in.Submission.Ref()), TaskQueue: exam.WorkflowQueue})
		futures = append(futures, workflow.ExecuteChildWorkflow(cctx, contract.ExamWorkflow, in))
	}
	for _, f := range futures {
		_ = f.Get(ctx, nil) // each ends on the outage; its waits are what counts
	}
	return nil
}

// Two exams whose stage cannot reach the object store at the same moment
// must not come back in lockstep: each run draws its own delays, and
// every delay stays within [0, the backoff's cap].
func TestTwoExamsFailingTogetherDoNotRetryInLockstep(t *testing.T) {
	rec := newStages(map[exam.Stage]error{exam.Layers: infraDown()})
	rec.metrics.mustBeMade(t, shipped())
	var suite testsuite.WorkflowTestSuite
	suite.SetMetricsHandler(rec.metrics)
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(ExamWorkflow(shipped()), workflow.RegisterOptions{Name: contract.ExamWorkflow})
	env.RegisterWorkflowWithOptions(ReviewWorkflow, workflow.RegisterOptions{Name: contract.ReviewWorkflow})
	env.RegisterWorkflow(twoExams)
	rec.register(env)
	sleeps := &sleepRecorder{sleeps: map[string][]time.Duration{}}
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{rec, sleeps}})

	var ins []contract.ExamInput
	var ids []string
	for _, id := range []string{"E1", "E2"} {
		in := testInput()
		in.Submission.ExamID = id
		in.Policy.InfraRetryFor = 4 * time.Minute // past the cap: capped delays too
		ins = append(ins, in)
		ids = append(ids, contract.ExamWorkflowID(in.Submission.Ref()))
	}
	env.ExecuteWorkflow(twoExams, ins)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}

	a, b := sleeps.sleeps[ids[0]], sleeps.sleeps[ids[1]]
	if len(a) < 7 || len(b) < 7 {
		t.Fatalf("backoffs %v and %v: want enough of them to reach the cap", a, b)
	}
	for i, seq := range [][]time.Duration{a, b} {
		for n, d := range seq {
			if d < 0 || d > infraBackoffCap {
				t.Errorf("exam %d, backoff %d: %s outside [0, %s]", i+1, n+1, d, infraBackoffCap)
			}
		}
	}
	if infraBackoffCap != time.Minute {
		t.Errorf("the infrastructure backoff's cap is %s, want 1 min", infraBackoffCap)
	}
	// The same moment, the same attempt, but different delays: at the
	// first wait already, and at every one after.
	n := min(len(a), len(b))
	for i := range n {
		if a[i] == b[i] {
			t.Errorf("backoff %d is %s for both exams: they retry in lockstep (%v, %v)", i+1, a[i], a[:n], b[:n])
		}
	}
}

// The delay is drawn from the run, the stage and the attempt: the same on
// every replay, and spread over many runs failing at the same moment.
func TestInfrastructureBackoffIsPerRunAndStableOnReplay(t *testing.T) {
	const runs, tries = 200, 8
	firsts := map[time.Duration]int{}
	seqs := map[string]string{}
	for r := range runs {
		run := fmt.Sprintf("0195b2a4-7c1e-7000-8000-%012d", r)
		var seq []time.Duration
		for n := 1; n <= tries; n++ {
			d := infraBackoff(run, exam.Layers, n)
			if d != infraBackoff(run, exam.Layers, n) {
				t.Fatalf("run %s, try %d: the delay changes between calls (it must replay)", run, n)
			}
			ceiling := min(infraBackoffCap, infraBackoffBase<<(n-1))
			if d < 0 || d > ceiling || d > infraBackoffCap {
				t.Errorf("run %s, try %d: %s outside [0, %s]", run, n, d, ceiling)
			}
			seq = append(seq, d)
		}
		firsts[seq[0]]++
		key := fmt.Sprint(seq)
		if other, ok := seqs[key]; ok {
			t.Errorf("runs %s and %s draw the same delays %v", other, run, seq)
		}
		seqs[key] = run
	}
	// 200 runs over a 1 s range of first delays: lockstep would put all
	// of them on one value; allow a few collisions.
	if len(firsts) < runs*9/10 {
		t.Errorf("%d runs drew only %d different first delays", runs, len(firsts))
	}
	// The stage is part of the draw too: two stages of one run failing
	// together do not come back together.
	var same int
	for n := 1; n <= tries; n++ {
		if infraBackoff("run-1", exam.Layers, n) == infraBackoff("run-1", exam.Denoise, n) {
			same++
		}
	}
	if same == tries {
		t.Error("two stages of one run draw the same delays")
	}
}

// A retry wait's summary stays within Temporal's default bound on a
// summary (limit.userMetadataSummarySize, 400 bytes) once sealed in the
// longest campus's scope, with the fields it cuts at their longest.
func TestARetryWaitsSealedSummaryFitsTemporalsBound(t *testing.T) {
	c, err := codec.Open("testdata/codec-keys.json")
	if err != nil {
		t.Fatal(err)
	}
	dc, _ := codec.Converters(c.InScope(codec.CampusScope(strings.Repeat("c", 63))))
	long := strings.Repeat("n", 300)
	summary := contract.RetrySummary(contract.Attempt{Stage: exam.Measure, Number: 100, Outcome: contract.Unreachable,
		FailureType: long, Node: long, Failure: long})
	p, err := dc.ToPayload(summary)
	if err != nil {
		t.Fatal(err)
	}
	if size := proto.Size(p); size > 400 {
		t.Errorf("sealed summary of %d bytes, over 400: %s", size, summary)
	}
	if a, ok := contract.AttemptOfRetrySummary(summary); !ok || a.Stage != exam.Measure || a.Number != 100 || a.Outcome != contract.Unreachable {
		t.Errorf("the summary %q reads back as %+v, %v", summary, a, ok)
	}
}
