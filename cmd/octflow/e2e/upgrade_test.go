package e2e

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"octflow/activities"
	"octflow/api"
	"octflow/api/intake"
	"octflow/app"
	"octflow/codec"
	"octflow/contract"
	"octflow/deployment"
	"octflow/exam"
	"octflow/gpuworker"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
	"octflow/workers"
	"octflow/workflows"
)

// upgradeDeployment is the Worker Deployment the upgrade test's builds
// poll as.
const upgradeDeployment = "octflow-upgrade-test"

// startBuild starts a pipeline worker of build, running stages, polling
// as that build of upgradeDeployment; the first build started becomes
// current.
func (h *harness) startBuild(build string, stages activities.Stages) *app.App {
	h.t.Helper()
	sealer, err := codec.Open(h.sys.Secrets.CodecKeysFile)
	if err != nil {
		h.t.Fatal(err)
	}
	a, err := app.Start(context.Background(), app.Options{Stack: h.sys.StackConfig, Identity: "worker-" + build, Logger: h.log,
		StopTimeout: h.cfg.StopTimeout, Codec: sealer, Stages: stages,
		Worker: &app.WorkerOptions{PromoteFirst: true,
			Pipeline: workers.PipelineOptions{Deployment: deployment.VersionOf(upgradeDeployment, build)}}})
	if err != nil {
		h.t.Fatal(err)
	}
	h.extra = append(h.extra, a)
	return a
}

// withToyAfter is the shipped pipeline with the toy stage added after
// stage: a workflow change no GetVersion guards. After measure, an exam
// in a GPU stage replays on it up to its report; after denoise, an exam
// past denoise does not replay on it at all.
func withToyAfter(stage exam.Stage) activities.Stages {
	var stages activities.Stages
	for _, s := range activities.Pipeline() {
		stages = append(stages, s)
		if s.Spec.Stage == stage {
			stages = append(stages, toyStage())
		}
	}
	return stages
}

// An upgrade with an exam in flight, by Worker Versioning: build 1 runs
// the shipped pipeline; build 2 adds a stage (unguarded by GetVersion).
// The replay gate passes build 2 (the exam in flight is pinned to build
// 1 and stays there) and refuses a build that claims build 1's ID with
// build 2's kind of change, naming the exam. Once build 2 is promoted,
// the exam in flight finishes on build 1 without a failed workflow task
// and without the added stage, a new exam runs build 2's pipeline, the
// fleet moves to build 2 at its continue-as-new, and build 1 may not go
// while its exam's review is open. A rollback sends new exams to build 1
// again.
func TestAnUpgradeKeepsAnExamInFlightOnTheBuildThatStartedIt(t *testing.T) {
	const b1, b2 = "1.0.0+upgrade-test", "1.1.0+upgrade-test"
	release := make(chan struct{})
	h := newHarness(t, 0, func(c *devsystem.Config) {
		c.APIOnly = true
		c.WorkerInterceptors = withFaults(func(ctx context.Context, node string, stage exam.Stage) error {
			if stage != exam.Layers || !isExam(ctx, "inflight") {
				return nil
			}
			for { // held in its GPU stage across the upgrade
				activity.RecordHeartbeat(ctx)
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(500 * time.Millisecond):
				}
			}
		})
	})
	ctx := context.Background()
	c := h.sys.App.Client()
	m := deployment.Manager{Client: c, Name: upgradeDeployment, Identity: "upgrade test"}
	h.startBuild(b1, activities.Pipeline())
	h.startParts(false, gpuworker.Config{NodeID: "gpu-upgrade"})
	if st, err := m.Status(ctx); err != nil || st.Current() != b1 {
		t.Fatalf("after the first start the current build is %q (%v), want %s", st.Current(), err, b1)
	}

	submit := func(id string, seed uint64) {
		t.Helper()
		_, scan := phantomDICOM(t, tiny(seed))
		if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: id}, scan); err != nil || code != http.StatusAccepted {
			t.Fatalf("submit %s: %d %v", id, code, err)
		}
	}
	submit("inflight", 901)
	h.waitFor("inflight", time.Minute, func(st *api.ExamStatus) bool {
		return st.Stage == exam.Layers && st.State == lifecycle.Executing
	})

	// Build 2 starts beside build 1 and takes nothing until promoted.
	h.startBuild(b2, withToyAfter(exam.Measure))
	if st, err := m.Status(ctx); err != nil || st.Current() != b1 {
		t.Fatalf("starting build 2 moved the current build to %q (%v)", st.Current(), err)
	}
	// The fleet runs build 1: an operator is told it has not moved.
	if left, err := m.Unmoved(ctx, b2); err != nil || !slices.Contains(left, contract.FleetWorkflowID) {
		t.Fatalf("build 2 just started; not on it: %q %v; want the fleet", left, err)
	}

	dc, fc := h.sys.App.Converters().Data, h.sys.App.Converters().Failure
	gate := func(build string, stages activities.Stages) deployment.Verdict {
		t.Helper()
		v, err := deployment.Gate{Client: c, Deployment: upgradeDeployment, BuildID: build, DataConverter: dc, FailureConverter: fc,
			Register: func(r worker.WorkflowRegistry) error { return workflows.Register(r, stages.Specs()) }}.Check(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := gate(b2, withToyAfter(exam.Measure)); !v.Passed() || v.Replayed == 0 {
		t.Fatalf("the gate refused build 2, or replayed nothing: %+v", v)
	}
	// The same change under build 2's own ID passes: the exam in flight
	// would not replay on it, but it is pinned to build 1 and stays there
	// (reported, not refused).
	if v := gate(b2, withToyAfter(exam.Denoise)); !v.Passed() || !strings.Contains(stays(v), h.examWF("inflight")) {
		t.Fatalf("the gate refused build 2, or did not report the exam that stays on build 1: %+v", v)
	}
	v := gate(b1, withToyAfter(exam.Denoise))
	if v.Passed() || !strings.Contains(refusals(v), h.examWF("inflight")) {
		t.Fatalf("the gate passed a build that claims build 1's ID with a stage added after denoise, or did not name the exam: %+v", v)
	}

	// A ramp of every new exam to build 2 (a ramp takes a share of new
	// exams, chosen by their workflow IDs; all of them here, so that the
	// test knows which).
	if err := m.Ramp(ctx, b2, 100); err != nil {
		t.Fatal(err)
	}
	submit("ramped", 904)
	if st := h.waitTerminal("ramped"); st.State != lifecycle.Completed {
		t.Fatalf("the exam under the ramp ended %s", st.State)
	}
	if _, err := m.Promote(ctx, b2); err != nil {
		t.Fatal(err)
	}
	if st, err := m.Status(ctx); err != nil || st.Current() != b2 || slices.ContainsFunc(st.Versions, func(v deployment.Version) bool { return v.Ramping }) {
		t.Fatalf("after promoting the ramped build: %+v %v; want it current and no ramp", st, err)
	}
	submit("after", 902)
	if st := h.waitTerminal("after"); st.State != lifecycle.Completed {
		t.Fatalf("the exam started after the upgrade ended %s", st.State)
	}
	close(release)
	if st := h.waitTerminal("inflight"); st.State != lifecycle.Completed {
		t.Fatalf("the exam in flight ended %s", st.State)
	}

	ranToy := func(id string) bool {
		_, err := h.store.ReadAll(ctx, exam.ObjectKey(h.ref(id), "toy.json"))
		return err == nil
	}
	for _, tc := range []struct {
		id, build string
		toy       bool
	}{{"inflight", b1, false}, {"ramped", b2, true}, {"after", b2, true}} {
		if ranToy(tc.id) != tc.toy {
			t.Errorf("exam %s ran the added stage: %v, want %v", tc.id, !tc.toy, tc.toy)
		}
		if got := pinnedBuild(t, c, h.examWF(tc.id)); got != tc.build {
			t.Errorf("exam %s is pinned to %q, want %s", tc.id, got, tc.build)
		}
		if n := failedWorkflowTasks(t, c, h.examWF(tc.id)); n != 0 {
			t.Errorf("exam %s had %d failed workflow tasks", tc.id, n)
		}
		if n := h.executions(tc.id); n != 1 {
			t.Errorf("exam %s ran %d times", tc.id, n)
		}
	}

	// The fleet and the campus's inbox move to build 2: the promotion
	// wakes them, and each continues as new on it.
	inbox := contract.InboxWorkflowID(h.sys.Secrets.Campus)
	waitPinned(t, c, contract.FleetWorkflowID, b2)
	waitPinned(t, c, inbox, b2)
	if left, err := m.Unmoved(ctx, b2); err != nil || len(left) != 0 {
		t.Fatalf("the fleet and the inbox are on build 2, yet not moved: %q %v", left, err)
	}
	// Build 1 runs the in-flight exam's review: it may not go.
	if r, err := m.Retirable(ctx, b1); err != nil || r.MayGo {
		t.Fatalf("build 1 may go while its exam's review is open: %+v %v", r, err)
	}

	// Roll back: new exams run build 1 again.
	if prev, err := m.Rollback(ctx, b1); err != nil || prev != b2 {
		t.Fatalf("rollback: was %q, %v", prev, err)
	}
	// No event reaches the inbox meanwhile: the rollback's wake moves it.
	waitPinned(t, c, inbox, b1)
	submit("rolledback", 903)
	if st := h.waitTerminal("rolledback"); st.State != lifecycle.Completed {
		t.Fatalf("the exam after the rollback ended %s", st.State)
	}
	if ranToy("rolledback") || pinnedBuild(t, c, h.examWF("rolledback")) != b1 {
		t.Errorf("the exam after the rollback ran build 2 (toy stage %v, pinned to %q)", ranToy("rolledback"), pinnedBuild(t, c, h.examWF("rolledback")))
	}
}

func refusals(v deployment.Verdict) string {
	var s []string
	for _, r := range v.Refusals {
		s = append(s, r.String())
	}
	return strings.Join(s, "; ")
}

func stays(v deployment.Verdict) string {
	var s []string
	for _, r := range v.Stay {
		s = append(s, r.String())
	}
	return strings.Join(s, "; ")
}

// pinnedBuild is the build a workflow's latest run is pinned to.
func pinnedBuild(t *testing.T, c client.Client, id string) string {
	t.Helper()
	d, err := c.DescribeWorkflowExecution(context.Background(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	return d.GetWorkflowExecutionInfo().GetVersioningInfo().GetDeploymentVersion().GetBuildId()
}

// waitPinned waits up to a minute for a workflow's latest run to be
// pinned to build.
func waitPinned(t *testing.T, c client.Client, id, build string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for got := pinnedBuild(t, c, id); got != build; got = pinnedBuild(t, c, id) {
		if time.Now().After(deadline) {
			t.Fatalf("%s is pinned to %q a minute after the change, want %s", id, got, build)
		}
		time.Sleep(time.Second)
	}
}

// failedWorkflowTasks counts a workflow's failed workflow tasks (a
// nondeterminism fails one).
func failedWorkflowTasks(t *testing.T, c client.Client, id string) int {
	t.Helper()
	n := 0
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(errors.Join(errors.New("read history"), err))
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED {
			n++
		}
	}
	return n
}
