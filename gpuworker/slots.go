package gpuworker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"octflow/activities"
	"octflow/contract"
	"octflow/exam"
)

// DefaultStageMemoryMiB is the GPU memory each GPU stage of stages is
// assumed to need (its declaration's GPUMemoryMiB); a site overrides it
// with what its models really use.
func DefaultStageMemoryMiB(stages exam.Pipeline) map[exam.Stage]uint64 {
	need := map[exam.Stage]uint64{}
	for _, s := range stages {
		if s.GPU {
			need[s.Stage] = s.GPUMemoryMiB
		}
	}
	return need
}

// Slots hands a node's GPUs to stages: at most one stage per GPU, only
// on healthy GPUs with enough free memory for the stage, and none while
// the node's breaker is open.
//
// Temporal reserves a slot before it polls, when the task (and so the
// stage's memory need) is not known yet. So Slots works in two steps: as
// the worker's activity SlotSupplier it grants at most as many slots as
// there are usable GPUs (plus prefetch), and as an activity interceptor it
// gives the polled stage a gate (activities.GPUGate) that binds its
// computation to a concrete free GPU with enough memory and frees it on
// every way out (success, failure, cancellation, panic): the stage holds
// the GPU only while it computes, not while it reads its input or stores
// its output. It also feeds each outcome to the breaker.
type Slots struct {
	inv     Inventory
	breaker *Breaker
	stages  exam.Pipeline
	need    map[exam.Stage]uint64
	minNeed uint64
	recheck time.Duration
	// bindAging: see bindWaiter.
	bindAging time.Duration
	// prefetch is how many stages beyond its usable GPUs the node takes
	// from the shared queue, so the next stage is at hand (waiting in
	// bind) when a GPU frees instead of a poll away.
	prefetch int
	// pace notes the stages the node takes and how long they compute
	// (nil: not measured).
	pace *Pace

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever a slot or GPU frees up
	// reserved counts the slots granted per queue: the shared GPU queue
	// and the node's own queue each get up to one per usable GPU, so a
	// node polling both can hold a pinned stage while its GPUs are busy;
	// bind makes it wait for a GPU.
	reserved [2]int
	bound    map[int]bool
	// waiting are the stages waiting in bind for a GPU.
	waiting []*bindWaiter
	// degraded: the fleet holds the node degraded (too slow), and it
	// takes no new stage from either queue.
	degraded bool
}

// Which queue a slot polls.
const (
	sharedQueue = 0
	nodeQueue   = 1
)

// bindWaiter is a stage waiting for a GPU. A lower rank goes first: a
// more urgent bucket, then a pinned stage (its exam is under way here);
// a stage that has waited the node's bind aging goes before all that
// have not.
type bindWaiter struct {
	rank  int
	need  uint64
	since time.Time
}

// defaultBindAging bounds how long a stage of a lower bucket, once on
// the node, waits while more urgent ones take the GPUs.
const defaultBindAging = 5 * time.Second

// effectiveRank is w's rank at now.
func (w *bindWaiter) effectiveRank(now time.Time, aging time.Duration) int {
	if now.Sub(w.since) >= aging {
		return -1
	}
	return w.rank
}

// NewSlots builds the supplier over inv for the stages of the pipeline.
// need gives each stage's GPU memory in MiB (nil: DefaultStageMemoryMiB).
func NewSlots(inv Inventory, breaker *Breaker, stages exam.Pipeline, need map[exam.Stage]uint64) *Slots {
	if need == nil {
		need = DefaultStageMemoryMiB(stages)
	}
	s := &Slots{inv: inv, breaker: breaker, stages: stages, need: need, recheck: time.Second, bindAging: defaultBindAging,
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
	queue int
	used  bool // a task arrived for it
	probe bool // it was the breaker's half-open probe
}

// ReserveSlot blocks until a GPU could take a stage and the breaker
// allows one.
func (s *Slots) ReserveSlot(ctx context.Context, _ worker.SlotReservationInfo) (*worker.SlotPermit, error) {
	return s.reserve(ctx, sharedQueue)
}

// NodeQueueSupplier is the slot supplier of the worker on the node's own
// queue: the same GPUs, counted apart from the shared queue's slots.
func (s *Slots) NodeQueueSupplier() worker.SlotSupplier { return nodeQueueSlots{s} }

type nodeQueueSlots struct{ s *Slots }

func (n nodeQueueSlots) ReserveSlot(ctx context.Context, _ worker.SlotReservationInfo) (*worker.SlotPermit, error) {
	return n.s.reserve(ctx, nodeQueue)
}
func (n nodeQueueSlots) TryReserveSlot(worker.SlotReservationInfo) *worker.SlotPermit {
	p, _ := n.s.tryReserve(nodeQueue)
	return p
}
func (n nodeQueueSlots) MarkSlotUsed(info worker.SlotMarkUsedInfo) { n.s.markUsed(info.Permit()) }
func (n nodeQueueSlots) ReleaseSlot(info worker.SlotReleaseInfo)   { n.s.release(info.Permit()) }
func (n nodeQueueSlots) MaxSlots() int                             { return n.s.MaxSlots() }

func (s *Slots) reserve(ctx context.Context, queue int) (*worker.SlotPermit, error) {
	for {
		p, wake := s.tryReserve(queue)
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
	p, _ := s.tryReserve(sharedQueue)
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
	p, ok := permit.UserData.(*slotPermit)
	if !ok {
		return
	}
	s.reserved[p.queue]--
	if p.probe && !p.used {
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

// SetDegraded says whether the fleet holds the node degraded: while it
// does, the node takes no new stage from the shared queue, and hands the
// stages pinned to it (its own queue) back unstarted as they come, so
// their exams go back to the shared queue at once instead of waiting out
// the affinity wait; the stages it holds go on.
func (s *Slots) SetDegraded(degraded bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.degraded != degraded {
		s.degraded = degraded
		s.signalLocked()
	}
}

func (s *Slots) isDegraded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.degraded
}

// Busy reports whether a stage holds the GPU with this index.
func (s *Slots) Busy(index int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bound[index]
}

// InFlight is the number of stages bound to a GPU right now.
func (s *Slots) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bound)
}

func (s *Slots) tryReserve(queue int) (*worker.SlotPermit, <-chan struct{}) {
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
	limit := usable
	if usable > 0 {
		limit += s.prefetch
	}
	if s.reserved[queue] >= limit || (s.degraded && queue == sharedQueue) {
		return nil, wake
	}
	ok, probe := s.breaker.admit()
	if !ok {
		return nil, wake
	}
	s.reserved[queue]++
	return &worker.SlotPermit{UserData: &slotPermit{queue: queue, probe: probe}}, nil
}

func (s *Slots) signalLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// bind waits for a free, healthy GPU with the stage's memory and marks
// it in use. The returned func frees it.
func (s *Slots) bind(ctx context.Context, stage exam.Stage) (GPU, func(), error) {
	return s.bindAs(ctx, stage, lastRank, nil)
}

// lastRank is the rank of a new stage whose bucket is not known.
const lastRank = 7

// bindRank orders stages waiting for a GPU: urgent first, a pinned
// stage (its exam's earlier stages ran here) before a new one; then the
// other buckets' pinned stages before their new ones, so a node finishes
// the exams it has started before it starts more.
func bindRank(bucket exam.Priority, pinned bool) int {
	r := 4 // a bucket not known
	switch bucket {
	case exam.Urgent:
		if pinned {
			return 0
		}
		return 1
	case exam.Normal:
		r = 2
	case exam.Low:
		r = 3
	}
	if !pinned {
		r += 3
	}
	return r
}

// bindAs is bind for a stage of the given rank: when GPUs are short, the
// waiting stage with the lowest rank that fits a free GPU takes it.
// beat, when set, is called while the stage waits, so a wait for a GPU
// never looks like a lost node.
func (s *Slots) bindAs(ctx context.Context, stage exam.Stage, rank int, beat func()) (GPU, func(), error) {
	me := &bindWaiter{rank: rank, need: s.need[stage], since: time.Now()}
	s.mu.Lock()
	s.waiting = append(s.waiting, me)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.waiting = slices.DeleteFunc(s.waiting, func(w *bindWaiter) bool { return w == me })
		s.mu.Unlock()
	}()
	for {
		gpus, err := s.inv.GPUs()
		if err != nil {
			return GPU{}, nil, fmt.Errorf("read GPUs: %w", err)
		}
		s.mu.Lock()
		wake := s.changed
		for _, g := range gpus {
			if g.Healthy && !s.bound[g.Index] && g.MemoryFreeMiB >= me.need && !s.aheadOfLocked(me, g) {
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
		if beat != nil {
			beat()
		}
		select {
		case <-ctx.Done():
			return GPU{}, nil, ctx.Err()
		case <-wake:
		case <-time.After(s.recheck):
		}
	}
}

// aheadOfLocked reports whether another waiting stage that fits g goes
// before w.
func (s *Slots) aheadOfLocked(w *bindWaiter, g GPU) bool {
	now := time.Now()
	mine := w.effectiveRank(now, s.bindAging)
	for _, o := range s.waiting {
		if o == w || g.MemoryFreeMiB < o.need {
			continue
		}
		if r := o.effectiveRank(now, s.bindAging); r < mine || (r == -1 && mine == -1 && o.since.Before(w.since)) {
			return true
		}
	}
	return false
}

// Interceptor is the worker interceptor that binds each stage to a GPU
// (see Slots).
// node names the node in the heartbeats of stages waiting for a GPU.
func (s *Slots) Interceptor(node string) interceptor.WorkerInterceptor {
	return &slotBinder{slots: s, node: node}
}

// NodeQueueInterceptor is Interceptor for the worker on the node's own
// queue: its stages are pinned, and go before new ones of their bucket.
func (s *Slots) NodeQueueInterceptor(node string) interceptor.WorkerInterceptor {
	return &slotBinder{slots: s, node: node, pinned: true}
}

type slotBinder struct {
	interceptor.WorkerInterceptorBase
	slots  *Slots
	node   string
	pinned bool
}

func (w *slotBinder) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &bindInbound{slots: w.slots, node: w.node, pinned: w.pinned}
	i.Next = next
	return i
}

type bindInbound struct {
	interceptor.ActivityInboundInterceptorBase
	slots  *Slots
	node   string
	pinned bool
}

func (b *bindInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (res any, err error) {
	info := activity.GetInfo(ctx)
	if b.slots.isDegraded() {
		// A poll made before the node knew took this stage: hand it back
		// unstarted, for a healthy node.
		b.slots.breaker.CancelProbe()
		return nil, temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("node %s is degraded and hands the stage back unstarted", b.node), contract.ErrTypeNodeDegraded,
			temporal.ApplicationErrorOptions{Details: []any{contract.FailureDetails{Node: b.node}}})
	}
	bucket := contract.BucketOfKey(info.Priority.FairnessKey)
	rank := bindRank(bucket, b.pinned)
	computing, end := func(bool) {}, func(bool, time.Duration) {}
	if b.slots.pace != nil {
		spec, _ := b.slots.stages.OfActivity(info.ActivityType.Name)
		computing, end = b.slots.pace.take(ctx, spec.Stage, bucket)
	}
	var (
		heldMu sync.Mutex
		held   time.Duration // how long the stage computed on its GPU
	)
	// The stage takes its GPU only for its computation (see
	// activities.GPUGate): reading its input and storing its output
	// happen while the GPU serves another stage. While it waits, it
	// heartbeats what the stage's own heartbeats say (ctx is the stage's).
	gate := func(ctx context.Context, stage exam.Stage) (int, func(), error) {
		beat := func() { activities.BeatWaiting(ctx, b.node, stage) }
		gpu, release, err := b.slots.bindAs(ctx, stage, rank, beat)
		if err != nil {
			return 0, nil, err
		}
		computing(true)
		start := time.Now()
		var once sync.Once
		return gpu.Index, func() {
			once.Do(func() {
				heldMu.Lock()
				held += time.Since(start)
				heldMu.Unlock()
				computing(false) // storing its output is not computing
			})
			release()
		}, nil
	}
	finished := false
	defer func() {
		heldMu.Lock()
		defer heldMu.Unlock()
		end(finished && err == nil, held)
	}()
	defer func() {
		if !finished {
			// A panic that escaped the stage's own recovery (see
			// activities.Activities.run) follows the exam, not the node.
			// The SDK turns it into a failed attempt.
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
	res, err = b.Next.ExecuteActivity(activities.WithGPUGate(ctx, gate), in)
	finished = true
	return res, err
}

// outcome says whether a stage's result says anything about the node's
// health, and whether it failed. Only the stage's own failures count: a
// cancelled stage (drain, lost lease), an invalid scan, a panic (it
// follows the exam to any node), an unreachable backing service (it
// fails every node alike) and any other final failure say nothing about
// this node.
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
		case contract.ErrTypeInvalidVolume, contract.ErrTypeStagePanic, contract.ErrTypeInfrastructure, contract.ErrTypeNodeDegraded:
			return false, false
		}
		if app.NonRetryable() {
			return false, false
		}
	}
	return true, true
}
