package gpuworker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"octflow/contract"
	"octflow/exam"
)

// DefaultStageMemoryMiB is the GPU memory each image stage is assumed to
// need; a site overrides it with what its models really use.
func DefaultStageMemoryMiB() map[exam.Stage]uint64 {
	return map[exam.Stage]uint64{
		exam.Denoise: 2048,
		exam.Layers:  4096,
		exam.Lesions: 2048,
		exam.Measure: 1024,
	}
}

// Slots hands a node's GPUs to stages: at most one stage per GPU, only
// on healthy GPUs with enough free memory for the stage, and none while
// the node's breaker is open.
//
// Temporal reserves a slot before it polls, when the task (and so the
// stage's memory need) is not known yet. So Slots works in two steps: as
// the worker's activity SlotSupplier it grants at most as many slots as
// there are usable GPUs, and as an activity interceptor it binds the
// polled stage to a concrete free GPU with enough memory, puts the GPU
// index in the stage's context and frees it on every way out (success,
// failure, cancellation, panic). It also feeds each outcome to the breaker.
type Slots struct {
	inv     Inventory
	breaker *Breaker
	need    map[exam.Stage]uint64
	minNeed uint64
	recheck time.Duration

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced whenever a slot or GPU frees up
	reserved int
	bound    map[int]bool
}

// NewSlots builds the supplier over inv. need gives each stage's GPU
// memory in MiB (nil: DefaultStageMemoryMiB).
func NewSlots(inv Inventory, breaker *Breaker, need map[exam.Stage]uint64) *Slots {
	if need == nil {
		need = DefaultStageMemoryMiB()
	}
	s := &Slots{inv: inv, breaker: breaker, need: need, recheck: time.Second,
		changed: make(chan struct{}), bound: map[int]bool{}}
	for _, m := range need {
		if s.minNeed == 0 || m < s.minNeed {
			s.minNeed = m
		}
	}
	return s
}

// slotPermit is what a granted slot carries.
type slotPermit struct {
	used  bool // a task arrived for it
	probe bool // it was the breaker's half-open probe
}

// ReserveSlot blocks until a GPU could take a stage and the breaker
// allows one.
func (s *Slots) ReserveSlot(ctx context.Context, _ worker.SlotReservationInfo) (*worker.SlotPermit, error) {
	for {
		p, wake := s.tryReserve()
		if p != nil {
			return p, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
		case <-time.After(s.recheck): // GPU memory and health change on their own
		}
	}
}

// TryReserveSlot grants a slot only if one is free now.
func (s *Slots) TryReserveSlot(worker.SlotReservationInfo) *worker.SlotPermit {
	p, _ := s.tryReserve()
	return p
}

// MarkSlotUsed notes that a task arrived for the slot.
func (s *Slots) MarkSlotUsed(info worker.SlotMarkUsedInfo) { s.markUsed(info.Permit()) }

// ReleaseSlot returns a slot. An unused probe slot gives the breaker its
// probe back, or the node would stay half-open with no probe to run.
func (s *Slots) ReleaseSlot(info worker.SlotReleaseInfo) { s.release(info.Permit()) }

func (s *Slots) markUsed(permit *worker.SlotPermit) {
	if p, ok := permit.UserData.(*slotPermit); ok {
		s.mu.Lock()
		p.used = true
		s.mu.Unlock()
	}
}

func (s *Slots) release(permit *worker.SlotPermit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserved--
	if p, ok := permit.UserData.(*slotPermit); ok && p.probe && !p.used {
		s.breaker.CancelProbe()
	}
	s.signalLocked()
}

// MaxSlots is the number of GPUs.
func (s *Slots) MaxSlots() int {
	gpus, err := s.inv.GPUs()
	if err != nil {
		return 0
	}
	return len(gpus)
}

// InFlight is the number of stages bound to a GPU right now.
func (s *Slots) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bound)
}

func (s *Slots) tryReserve() (*worker.SlotPermit, <-chan struct{}) {
	gpus, err := s.inv.GPUs()
	s.mu.Lock()
	defer s.mu.Unlock()
	wake := s.changed
	if err != nil {
		return nil, wake
	}
	usable := 0
	for _, g := range gpus {
		// A GPU running our stage counts: its memory is ours.
		if g.Healthy && (s.bound[g.Index] || g.MemoryFreeMiB >= s.minNeed) {
			usable++
		}
	}
	if s.reserved >= usable {
		return nil, wake
	}
	ok, probe := s.breaker.admit()
	if !ok {
		return nil, wake
	}
	s.reserved++
	return &worker.SlotPermit{UserData: &slotPermit{probe: probe}}, nil
}

func (s *Slots) signalLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// bind waits for a free, healthy GPU with the stage's memory and marks
// it in use. The returned func frees it.
func (s *Slots) bind(ctx context.Context, stage exam.Stage) (GPU, func(), error) {
	need := s.need[stage]
	for {
		gpus, err := s.inv.GPUs()
		if err != nil {
			return GPU{}, nil, fmt.Errorf("read GPUs: %w", err)
		}
		s.mu.Lock()
		wake := s.changed
		for _, g := range gpus {
			if g.Healthy && !s.bound[g.Index] && g.MemoryFreeMiB >= need {
				s.bound[g.Index] = true
				s.mu.Unlock()
				return g, func() {
					s.mu.Lock()
					delete(s.bound, g.Index)
					s.signalLocked()
					s.mu.Unlock()
				}, nil
			}
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return GPU{}, nil, ctx.Err()
		case <-wake:
		case <-time.After(s.recheck):
		}
	}
}

// Interceptor is the worker interceptor that binds each stage to a GPU
// (see Slots).
func (s *Slots) Interceptor() interceptor.WorkerInterceptor { return &slotBinder{slots: s} }

type slotBinder struct {
	interceptor.WorkerInterceptorBase
	slots *Slots
}

func (w *slotBinder) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &bindInbound{slots: w.slots}
	i.Next = next
	return i
}

type bindInbound struct {
	interceptor.ActivityInboundInterceptorBase
	slots *Slots
}

func (b *bindInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (res any, err error) {
	stage := exam.StageOfActivity(activity.GetInfo(ctx).ActivityType.Name)
	gpu, release, err := b.slots.bind(ctx, stage)
	if err != nil {
		return nil, err
	}
	finished := false
	defer func() {
		release()
		if !finished {
			// A panic that escaped the stage's own recovery (see
			// activities.Activities.run) still frees the GPU; the SDK
			// turns it into a failed attempt. Like a recovered panic it
			// follows the exam, not the node.
			b.slots.breaker.CancelProbe()
			return
		}
		if counts, failed := outcome(ctx, err); counts {
			b.slots.breaker.Record(failed)
		} else {
			// A probe that proved nothing (cancelled, invalid scan) must
			// not leave the breaker waiting for its outcome forever.
			b.slots.breaker.CancelProbe()
		}
	}()
	res, err = b.Next.ExecuteActivity(exam.WithGPU(ctx, gpu.Index), in)
	finished = true
	return res, err
}

// outcome says whether a stage's result says anything about the node's
// health, and whether it failed. Only the stage's own failures count: a
// cancelled stage (drain, lost lease), an invalid scan, a panic (it
// follows the exam to any node) and an unreachable backing service (it
// fails every node alike) say nothing about this node.
func outcome(ctx context.Context, err error) (counts, failed bool) {
	if err == nil {
		return true, false
	}
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return false, false
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		switch app.Type() {
		case contract.ErrTypeInvalidVolume, contract.ErrTypeStagePanic, contract.ErrTypeInfrastructure:
			return false, false
		}
		if app.NonRetryable() {
			return false, false
		}
	}
	return true, true
}
