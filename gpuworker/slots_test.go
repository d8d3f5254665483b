package gpuworker

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
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

func newSlots(gpus int) (*Slots, *SimulatedInventory, *Breaker, *fakeClock) {
	inv := NewSimulatedInventory(SimulatedGPUs{Count: gpus, MemoryGiB: 16})
	b, clock := newTestBreaker()
	s := NewSlots(inv, b, activities.Pipeline().Specs(), nil)
	s.recheck = 10 * time.Millisecond
	return s, inv, b, clock
}

func TestSlotsNeverExceedTheGPUCount(t *testing.T) {
	s, _, _, _ := newSlots(2)
	var permits []*worker.SlotPermit
	for range 2 {
		p := s.TryReserveSlot(nil)
		if p == nil {
			t.Fatal("a free GPU was refused")
		}
		permits = append(permits, p)
	}
	if s.TryReserveSlot(nil) != nil {
		t.Fatal("a third slot was granted on two GPUs")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.ReserveSlot(ctx, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReserveSlot on a full node: %v, want it to block", err)
	}
	got := make(chan *worker.SlotPermit)
	go func() {
		p, _ := s.ReserveSlot(context.Background(), nil)
		got <- p
	}()
	s.release(permits[0])
	select {
	case p := <-got:
		if p == nil {
			t.Fatal("nil permit")
		}
	case <-time.After(time.Second):
		t.Fatal("a released slot was not handed to the waiting reservation")
	}
}

func TestStageIsBoundOnlyToAGPUWithEnoughFreeMemory(t *testing.T) {
	s, inv, _, _ := newSlots(2)
	inv.Set(0, 3*1024, true) // 3 GiB free: enough for denoise, not for layers
	ctx := context.Background()
	layers, releaseLayers, err := s.bind(ctx, exam.Layers) // needs 4 GiB
	if err != nil || layers.Index != 1 {
		t.Fatalf("layers bound to GPU %d (%v), want GPU 1", layers.Index, err)
	}
	denoise, releaseDenoise, err := s.bind(ctx, exam.Denoise)
	if err != nil || denoise.Index != 0 {
		t.Fatalf("denoise bound to GPU %d (%v), want GPU 0", denoise.Index, err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, _, err := s.bind(short, exam.Layers); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a third stage was bound on two busy GPUs: %v", err)
	}
	releaseDenoise()
	if _, _, err := s.bind(short, exam.Layers); err == nil {
		t.Fatal("layers bound to GPU 0, which lacks the memory")
	}
	releaseLayers()
	if g, _, err := s.bind(ctx, exam.Layers); err != nil || g.Index != 1 {
		t.Fatalf("after release: GPU %d, %v", g.Index, err)
	}
}

func TestUnhealthyOrFullGPUsGetNoSlot(t *testing.T) {
	s, inv, _, _ := newSlots(3)
	inv.Set(0, 16*1024, false) // unhealthy
	inv.Set(1, 100, true)      // no memory left for any stage
	if s.TryReserveSlot(nil) == nil {
		t.Fatal("the healthy GPU was refused")
	}
	if s.TryReserveSlot(nil) != nil {
		t.Fatal("a slot was granted on an unhealthy or full GPU")
	}
}

func TestOpenBreakerWithholdsSlotsAndHalfOpenAdmitsOneProbe(t *testing.T) {
	s, _, b, clock := newSlots(4)
	for range 4 {
		b.Record(true)
	}
	if s.TryReserveSlot(nil) != nil {
		t.Fatal("slot granted while the breaker is open")
	}
	clock.advance(time.Minute)
	probe := s.TryReserveSlot(nil)
	if probe == nil {
		t.Fatal("no probe slot after the cooldown")
	}
	if s.TryReserveSlot(nil) != nil {
		t.Fatal("a second slot while the probe is out")
	}
	// The poll came back empty: the probe slot is returned unused, and the
	// next reservation may probe instead.
	s.release(probe)
	if s.TryReserveSlot(nil) == nil {
		t.Fatal("the probe was lost with its unused slot")
	}
}

func TestGPUComesBackAfterPanicsErrorsAndCancellationAndOnlyNodeFaultsCount(t *testing.T) {
	s, _, b, _ := newSlots(1)
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{s.Interceptor("gpu-test")}})
	var mu sync.Mutex
	var gpuSeen []int
	env.RegisterActivityWithOptions(func(ctx context.Context, mode string) error {
		gate, ok := activities.GPUGateFrom(ctx)
		if !ok {
			return errors.New("no GPU gate in the stage's context")
		}
		i, release, err := gate(ctx, exam.Denoise)
		if err != nil {
			return err
		}
		defer release()
		mu.Lock()
		gpuSeen = append(gpuSeen, i)
		mu.Unlock()
		switch mode {
		case "panic":
			panic("driver crashed")
		case "fail":
			return errors.New("CUDA error")
		case "fail again":
			return errors.New("CUDA error")
		case "panicked":
			return temporal.NewNonRetryableApplicationError("denoise panicked: index out of range", contract.ErrTypeStagePanic, nil)
		case "store down":
			return temporal.NewApplicationError("unavailable: dial tcp: connection refused", contract.ErrTypeInfrastructure)
		}
		return nil
	}, activity.RegisterOptions{Name: "Denoise"})

	modes := []string{"panic", "fail", "fail again", "panicked", "store down", "ok"}
	for _, mode := range modes {
		_, err := env.ExecuteActivity("Denoise", mode)
		if (err == nil) != (mode == "ok") {
			t.Errorf("%s: err = %v", mode, err)
		}
		if len(s.bound) != 0 {
			t.Fatalf("after %s the GPU is still bound", mode)
		}
	}
	if len(gpuSeen) != len(modes) || gpuSeen[0] != 0 {
		t.Errorf("stages saw GPUs %v, want GPU 0 each time", gpuSeen)
	}
	// Only the CUDA errors are the node's: a panic follows
	// the exam, and an unreachable object store fails every node alike.
	if st := b.Status(); st.Samples != 3 || math.Abs(st.FailureRate-2.0/3) > 1e-9 {
		t.Errorf("breaker saw %+v, want 2 failures of 3", st)
	}
	// A stage cancelled while waiting for a GPU leaves nothing bound.
	_, release, _ := s.bind(context.Background(), exam.Denoise)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := s.bind(ctx, exam.Measure); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	release()
	if len(s.bound) != 0 {
		t.Fatal("GPU still bound after release")
	}
}

func TestAProbeThatProvesNothingDoesNotWedgeTheBreaker(t *testing.T) {
	s, _, b, clock := newSlots(1)
	for range 4 {
		b.Record(true)
	}
	clock.advance(time.Minute)
	if s.TryReserveSlot(nil) == nil {
		t.Fatal("no probe slot")
	}
	// The probe's stage hit an invalid scan: not the node's fault, not
	// counted either way.
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{s.Interceptor("gpu-test")}})
	env.RegisterActivityWithOptions(func(context.Context) error {
		return temporal.NewNonRetryableApplicationError("not an OCT volume", "InvalidVolume", nil)
	}, activity.RegisterOptions{Name: "Denoise"})
	if _, err := env.ExecuteActivity("Denoise"); err == nil {
		t.Fatal("stage succeeded")
	}
	if st := b.Status(); st.State != BreakerHalfOpen || !b.Allow() {
		t.Fatalf("breaker %+v admits no new probe", st)
	}
}

func TestAFreedGPUGoesToTheMostUrgentWaitingStagePinnedFirst(t *testing.T) {
	for _, c := range []struct {
		name  string
		aging time.Duration
		want  []string
	}{
		{"urgent, then the exams under way, then new ones", time.Minute,
			[]string{"urgent pinned", "urgent new", "normal pinned", "low pinned", "normal new", "low new"}},
		{"a stage that waited past the bind aging goes first", 0,
			[]string{"low new", "normal new", "normal pinned", "low pinned", "urgent new", "urgent pinned"}},
	} {
		t.Run(c.name, func(t *testing.T) { testBindOrder(t, c.aging, c.want) })
	}
}

func testBindOrder(t *testing.T, aging time.Duration, want []string) {
	s, _, _, _ := newSlots(1)
	s.bindAging = aging
	ctx := context.Background()
	_, release, err := s.bind(ctx, exam.Denoise) // the one GPU is busy
	if err != nil {
		t.Fatal(err)
	}
	// Stages arrive in the worst order for a first-come GPU.
	arrivals := []struct {
		name   string
		bucket exam.Priority
		pinned bool
	}{
		{"low new", "low", false},
		{"normal new", "normal", false},
		{"normal pinned", "normal", true},
		{"low pinned", "low", true},
		{"urgent new", "urgent", false},
		{"urgent pinned", "urgent", true},
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for i, a := range arrivals {
		wg.Go(func() {
			_, rel, err := s.bindAs(ctx, exam.Denoise, bindRank(a.bucket, a.pinned), nil)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, a.name)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			rel()
		})
		// Each waits before the next comes.
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			s.mu.Lock()
			n := len(s.waiting)
			s.mu.Unlock()
			if n == i+1 {
				break
			}
		}
	}
	release()
	wg.Wait()
	if !slices.Equal(order, want) {
		t.Errorf("GPU went to %v, want %v", order, want)
	}
}
