package activities

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"octflow/contract"
	"octflow/exam"
)

// GPUGate grants a GPU to a stage's computation: it waits for a free one
// that fits the stage and returns its index and a func that frees it. A
// GPU node puts one in the context of each stage it runs (gpuworker), so
// a stage holds its GPU only while it computes: its input is read before
// and its output encoded and stored after, while the GPU serves another
// stage. Without a gate a stage computes where it runs.
type GPUGate func(ctx context.Context, stage exam.Stage) (gpu int, release func(), err error)

type gpuGateKey struct{}

// WithGPUGate returns ctx carrying gate for the stage run in it.
func WithGPUGate(ctx context.Context, gate GPUGate) context.Context {
	return context.WithValue(ctx, gpuGateKey{}, gate)
}

// GPUGateFrom returns the gate in ctx, if the stage runs on a GPU node.
func GPUGateFrom(ctx context.Context) (GPUGate, bool) {
	g, ok := ctx.Value(gpuGateKey{}).(GPUGate)
	return g, ok && g != nil
}

// stageBeat is what a running stage's heartbeats say. A gated stage says
// only its node and stage until it holds a GPU; then also when it started
// and on which GPU.
type stageBeat struct {
	mu   sync.Mutex
	beat contract.Heartbeat
	sent bool // the first heartbeat went out
	// quietUntil is when the stage may send its first heartbeat: until
	// then what it would say goes to the take log only.
	quietUntil time.Time
	// released is when the stage freed its GPU (zero: it held none).
	released time.Time
	// note and drop keep the node's take log in step (nil: none).
	note func(contract.Heartbeat)
	drop func()
}

// TakeLog is where a node notes the stage attempts it holds. Hold notes
// the attempt of ctx with its first heartbeat; note replaces what the
// note says with a later heartbeat, drop forgets the attempt. Both may
// be called from any goroutine, after the attempt's context has ended
// too. A node killed while it holds an attempt leaves the note behind,
// and the node's next start hands the attempt back with the heartbeat
// (gpuworker.Takes).
type TakeLog interface {
	Hold(ctx context.Context, beat contract.Heartbeat) (note func(contract.Heartbeat), drop func())
}

// gpuHeld is when the stage held its GPU, if it did.
func (b *stageBeat) gpuHeld() *contract.Span {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.beat.StartedAt == nil || b.released.IsZero() {
		return nil
	}
	return &contract.Span{From: *b.beat.StartedAt, To: b.released}
}

func (b *stageBeat) get() contract.Heartbeat {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.beat
}

// DefaultQuietStart is how long a stage runs before its first heartbeat
// unless its worker says otherwise (Common.QuietStart).
const DefaultQuietStart = time.Second

// started records the start of the stage's work (on gpu, if it has one)
// and sends it, once the stage's quiet start is over.
func (b *stageBeat) started(ctx context.Context, gpu *int) {
	now := time.Now().UTC()
	b.mu.Lock()
	b.beat.StartedAt, b.beat.GPU = &now, gpu
	b.mu.Unlock()
	b.send(ctx, true)
}

// send sends what the stage says now: always, or only if no heartbeat
// went out yet. The node's take log notes it either way; during the
// stage's quiet start only the take log does.
func (b *stageBeat) send(ctx context.Context, always bool) {
	b.mu.Lock()
	if b.sent && !always {
		b.mu.Unlock()
		return
	}
	beat := b.beat
	if b.note != nil {
		b.note(beat) // under the lock: notes keep the order of the beats
	}
	if time.Now().Before(b.quietUntil) {
		b.mu.Unlock()
		return
	}
	b.sent = true
	b.mu.Unlock()
	activity.RecordHeartbeat(ctx, beat)
}

// announceTake notes the take of the stage in ctx and sends it as its
// first heartbeat, if none went out yet and its quiet start is over: a
// gated stage calls it before it reads from the object store, the slow
// part before it binds a GPU and starts. A node lost during a long read
// is then named in the retry, and the take is on record (TakenAt);
// without it the attempt would wait out the heartbeat timeout with
// nothing to say where it was or since when. The heartbeat holds no
// start, so the stage shows as CLAIMED (lifecycle). A stage whose input
// is in the node's cache does not need it: its start follows at once.
func announceTake(ctx context.Context) {
	if b, ok := ctx.Value(stageBeatKey{}).(*stageBeat); ok {
		b.send(ctx, false)
	}
}

type stageBeatKey struct{}

// heartbeatEvery is how often a stage beats when its worker sets no
// interval: three times per heartbeat timeout, so one lost beat does not
// time the stage out; every 2 s for a stage without a heartbeat timeout.
func heartbeatEvery(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return 2 * time.Second
	}
	return timeout / 3
}

// takenAt is when this attempt of the stage was taken from its queue.
func takenAt(ctx context.Context) *time.Time {
	t := activity.GetInfo(ctx).StartedTime.UTC()
	return &t
}

// BeatWaiting sends the heartbeat of a stage on node that waits for a
// GPU: what the stage's own heartbeats say when ctx is the stage's (see
// GPUGate), and as they go, not during its quiet start; else its node,
// stage and take.
func BeatWaiting(ctx context.Context, node string, stage exam.Stage) {
	if b, ok := ctx.Value(stageBeatKey{}).(*stageBeat); ok {
		b.send(ctx, true)
		return
	}
	activity.RecordHeartbeat(ctx, contract.Heartbeat{Node: node, Stage: stage, TakenAt: takenAt(ctx)})
}

// onGPU runs compute on a GPU of the node when the stage has a gate:
// it waits for the GPU (the gate may refuse it), reports the start, runs the simulated GPU time (benchmark) and compute with the
// GPU's index in ctx, then frees the GPU. Without a gate it runs the
// simulated GPU time and compute.
//
// The stage is the one a.run runs (its beat in ctx).
func (a *Activities) onGPU(ctx context.Context, compute func(context.Context) error) error {
	var stage exam.Stage
	if b, ok := ctx.Value(stageBeatKey{}).(*stageBeat); ok {
		stage = b.beat.Stage
	}
	gate, ok := GPUGateFrom(ctx)
	if !ok {
		if err := a.simulate(ctx, stage); err != nil {
			return err
		}
		return compute(ctx)
	}
	gpu, release, err := gate(ctx, stage)
	if err != nil {
		return err
	}
	b, _ := ctx.Value(stageBeatKey{}).(*stageBeat)
	defer func() {
		release()
		if b != nil {
			b.mu.Lock()
			b.released = time.Now().UTC()
			b.mu.Unlock()
		}
	}()
	ctx = exam.WithGPU(ctx, gpu)
	if b != nil {
		b.started(ctx, &gpu)
	}
	if err := a.simulate(ctx, stage); err != nil {
		return err
	}
	return compute(ctx)
}

// simulate runs the simulated GPU time of the stage, if any.
func (a *Activities) simulate(ctx context.Context, stage exam.Stage) error {
	if a.GPUNode == nil || a.GPUNode.SimulatedCompute == nil {
		return nil
	}
	return a.GPUNode.SimulatedCompute(ctx, a.Node, stage)
}
