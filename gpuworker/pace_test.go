package gpuworker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"octflow/activities"
	"octflow/contract"
	"octflow/exam"
)

// A node measures the stages it runs: those that ended well give their
// compute time, a stage in flight is listed while it runs, and nothing
// is kept while the fleet holds the node degraded, when the node also
// takes no new stage and hands back one that reaches it unstarted.
func TestANodeMeasuresItsStagesAndADegradedOneTakesNone(t *testing.T) {
	s, _, b, _ := newSlots(1)
	s.pace = NewPace(func(context.Context) error { return nil })
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{s.Interceptor("gpu-test")}})
	var running, afterRelease []contract.RunningStage
	env.RegisterActivityWithOptions(func(ctx context.Context, mode string) error {
		gate, _ := activities.GPUGateFrom(ctx)
		_, release, err := gate(ctx, exam.Layers)
		if err != nil {
			return err
		}
		running = s.pace.Report("L4").Running
		time.Sleep(20 * time.Millisecond)
		release()
		afterRelease = s.pace.Report("L4").Running
		if mode == "fail" {
			return errors.New("CUDA error")
		}
		return nil
	}, activity.RegisterOptions{Name: "SegmentLayers"})

	for _, mode := range []string{"ok", "fail", "ok"} {
		_, _ = env.ExecuteActivity("SegmentLayers", mode)
	}
	if len(running) != 1 || running[0].Stage != exam.Layers || running[0].Computing <= 0 || running[0].Held < running[0].Computing {
		t.Errorf("while it computed, the node listed %+v; want the layers stage, computing", running)
	}
	if len(afterRelease) != 1 || afterRelease[0].Computing != 0 {
		t.Errorf("once it freed its GPU, the node listed %+v; want the stage held, not computing", afterRelease)
	}
	rep := s.pace.Report("L4")
	if got := rep.Stages[exam.Layers]; got.Runs != 2 || got.MedianMs < 20 || got.MedianMs > 2000 || len(rep.Running) != 0 {
		t.Errorf("pace %+v; want two runs of layers (the failed one not counted), about 20 ms, none running", rep)
	}
	if err := s.pace.runProbe(context.Background(), time.Second); err != nil || s.pace.Report("L4").Probes != 1 {
		t.Errorf("probe: %v, %+v", err, s.pace.Report("L4"))
	}
	// A probe slower than its limit counts as taking the limit; the next
	// does not start while it runs, and each report counts how long it
	// has run so far: a hung probe reads slower and slower.
	stuck := make(chan struct{})
	var started atomic.Int32
	slow := NewPace(func(context.Context) error { started.Add(1); <-stuck; return nil })
	for range 3 {
		if err := slow.runProbe(context.Background(), 30*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if rep := slow.Report("L4"); started.Load() != 1 || rep.Probes != 3 || rep.ProbeMs < 30 {
		t.Errorf("a stuck probe: started %d times, %+v; want it started once and three figures of 30 ms or more", started.Load(), rep)
	}
	close(stuck)

	// Degraded: no new slot, a stage that arrives anyway is handed back
	// unstarted (spending nothing, not counted by the breaker), and the
	// stage figures are dropped.
	before := b.Status().Samples
	s.SetDegraded(true)
	s.pace.setDegraded(true)
	if s.TryReserveSlot(nil) != nil {
		t.Error("a degraded node was granted a slot on the shared queue")
	}
	// Its own queue it still polls, to hand pinned stages back at once.
	if p := s.NodeQueueSupplier().TryReserveSlot(nil); p == nil {
		t.Error("a degraded node stopped polling its own queue: its pinned stages would wait out the affinity wait")
	} else {
		s.release(p)
	}
	_, err := env.ExecuteActivity("SegmentLayers", "ok")
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != contract.ErrTypeNodeDegraded ||
		contract.Classify(err, false, true) != contract.Unclaimed {
		t.Errorf("a stage reaching a degraded node: %v; want it handed back as %s (unclaimed)", err, contract.ErrTypeNodeDegraded)
	}
	if b.Status().Samples != before {
		t.Error("the breaker counted a stage handed back")
	}
	if rep := s.pace.Report("L4"); len(rep.Stages) != 0 {
		t.Errorf("a degraded node kept its stage figures: %+v", rep.Stages)
	}
	s.SetDegraded(false)
	if p := s.TryReserveSlot(nil); p == nil {
		t.Error("a node healthy again was refused a slot")
	}
}
