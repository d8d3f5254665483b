// Package activities holds the exam pipeline's stages as Temporal
// activities. Each loads its input objects, runs its step and stores its
// output under the exam's deterministic keys, so a re-executed stage
// overwrites instead of duplicating. Volumes travel through the object
// store, never through Temporal.
//
// Each stage is a file of its own (denoise.go, layers.go, lesions.go,
// measure.go, report.go, notify.go): its declaration (an
// exam.StageSpec), what it reads and writes, its computation (the Go
// reference, and a served model where the stage may have one) and its
// activity. Pipeline (stages.go) is their order. This file holds what
// every stage runs through: the heartbeats, the node's cache and the
// object store.
//
// A role that runs stages binds them to an Activities of its own: the
// process's Common parts, the name of the node or worker, and that
// role's own part (GPUNode on a GPU node, Workstations on the pipeline
// worker). The PACS export (Exporter, export.go) and housekeeping
// (Housekeeping, housekeeping.go) are activities apart, each with its
// own parts and Register function.
package activities

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"runtime/debug"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
	"octflow/inference"
	"octflow/octdicom"
	"octflow/storage"
)

// ObjectStore is what the stages need of the object store.
type ObjectStore interface {
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
	Get(ctx context.Context, key string) (io.ReadCloser, int64, error)
}

// Common are what every stage runs through, whichever role runs it:
// the object store, the stages' logger, the served models, the stage
// metrics and the heartbeats' pace. A process makes them once, for each
// of its roles that runs stages.
type Common struct {
	Store  ObjectStore
	Logger *zap.Logger
	// HeartbeatEvery is how often a running stage reports progress
	// (default: a third of the stage's heartbeat timeout); it must stay
	// well under the heartbeat timeout.
	HeartbeatEvery time.Duration
	// QuietStart is how long a stage runs before its first heartbeat
	// (default DefaultQuietStart, never past the first HeartbeatEvery;
	// negative: at once). A stage that ends sooner sends none: every
	// heartbeat is a write of the exam's state in the engine, and its
	// take is in the node's take log and its times in its output and
	// history. Until its first heartbeat a stage shows as CLAIMED.
	QuietStart time.Duration
	// Models are the served models of the stages a site points at one
	// (exam.StageSpec.Model); every other stage runs its Go reference
	// implementation.
	Models map[exam.Stage]inference.Model
	// Metrics, when set, records each stage's duration and failures.
	Metrics *StageMetrics
}

// Activities are the stages, bound to what they run through: the
// process's Common parts, the node or worker that runs them, and the
// part of that role. The role makes its own (a GPU node, the pipeline
// worker) and sets only its own part; the other is nil.
type Activities struct {
	Common
	// Node names the GPU node or worker running the stages; it goes into
	// every heartbeat so that a stage lost with its node still names the
	// node in the exam's timeline.
	Node string
	// GPUNode is a GPU node's part (nil on the pipeline worker).
	GPUNode *GPUNode
	// Workstations is the pipeline worker's part: how the notify stage
	// reaches the clinicians (nil on a GPU node).
	Workstations *Workstations
	// Pipeline is the pipeline the stages run in, whose order the report
	// lists what computed each stage in (nil: Pipeline(), the shipped
	// one).
	Pipeline exam.Pipeline
}

// GPUNode is a GPU node's part of its stages, which the node
// (gpuworker) sets.
type GPUNode struct {
	// Cache keeps the node's recent outputs so the exam's next stage
	// there reads them from memory (nil: every read goes to the store).
	Cache *LocalCache
	// NodeQueue is the node's own task queue, returned with each GPU
	// stage's output so the workflow can send the next stage there.
	NodeQueue string
	// Takes notes each attempt the node holds and what its heartbeats
	// say, so that the node, restarted after a crash, hands back at once
	// what it held (nil: a lost attempt waits out its heartbeat timeout).
	Takes TakeLog
	// SimulatedCompute, when set, runs as each GPU stage's computation
	// begins, once its start is reported: the benchmark's simulated GPU
	// mode, where it stands for the model's GPU time and may fail as a
	// GPU does. Nil on nodes with real GPUs.
	SimulatedCompute SimulatedComputeFunc
}

// cache is the node's cache (nil: none, or no node).
func (g *GPUNode) cache() *LocalCache {
	if g == nil {
		return nil
	}
	return g.Cache
}

// Workstations is how the pipeline worker's notify stage tells the
// clinicians that a report is ready, which the worker (workers) sets.
type Workstations struct {
	// Webhooks deliver report-ready events to workstations.
	Webhooks *Webhooks
	// Inbox keeps report-ready events for the clinicians' event stream.
	Inbox Inbox
}

// SimulatedComputeFunc is a simulated node's GPU time for a stage: it
// waits as the model would and may fail as a GPU does.
type SimulatedComputeFunc func(ctx context.Context, node string, stage exam.Stage) error

// Inbox is where report-ready events wait for the clinicians' stream.
type Inbox interface {
	Publish(ctx context.Context, e contract.ReportReadyEvent) error
}

// run executes a stage body while heartbeating, so a node that dies is
// noticed after the heartbeat timeout rather than the stage timeout. A
// failure names the node it happened on (withNode); what follows it is
// the workflow's to decide.
//
// The body runs in its own goroutine, where the SDK's panic recovery
// cannot reach: run recovers a panic there (and one that imaging's frame
// workers hand back) into a non-retryable StagePanic error that names
// the stage, so one bad input fails its exam instead of killing the node
// and every stage on it.
func (a *Activities) run(ctx context.Context, spec exam.StageSpec, out *contract.StageOutput, body func(context.Context) error) (err error) {
	stage := spec.Stage
	start := time.Now()
	// Deferred first, so it runs last and sees a recovered panic too.
	defer func() { a.Metrics.observe(ctx, stage, a.Node, start, err) }()
	beat := &stageBeat{beat: contract.Heartbeat{Node: a.Node, Stage: stage, TakenAt: takenAt(ctx)}}
	if a.GPUNode != nil && a.GPUNode.Takes != nil {
		// First, so a node killed from here on leaves a note of the
		// attempt; dropped last, once the stage has said all it will.
		beat.note, beat.drop = a.GPUNode.Takes.Hold(ctx, beat.beat)
		defer beat.drop()
	}
	defer func() {
		if ctx.Err() == nil {
			err = withNode(err, a.Node)
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			err = a.panicked(stage, p)
		}
	}()
	every := a.HeartbeatEvery
	if every == 0 {
		every = heartbeatEvery(activity.GetInfo(ctx).HeartbeatTimeout)
	}
	beat.quietUntil = start.Add(min(cmp.Or(a.QuietStart, DefaultQuietStart), every))
	if _, gated := GPUGateFrom(ctx); !gated || !spec.GPU {
		beat.started(ctx, nil)
	}
	// A gated stage starts once it holds its GPU (onGPU). Until then its
	// heartbeats say only where it is and since when (announceTake, before
	// it reads from the object store). None goes out during its quiet
	// start; the first timer below sends what it says then.
	ctx = context.WithValue(ctx, stageBeatKey{}, beat)
	done := make(chan error, 1)
	reads := &readCounter{}
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- a.panicked(stage, p)
			}
		}()
		done <- body(withReadCounter(ctx, reads))
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	// The end of the quiet start sends what the stage says then, unless
	// a heartbeat went out already (none can before).
	var first <-chan time.Time
	if wait := time.Until(beat.quietUntil); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		first = t.C
	}
	for {
		select {
		case <-first:
			beat.send(ctx, false)
		case err := <-done:
			out.ObjectBytesRead = reads.n.Load()
			out.GPUHeld = beat.gpuHeld()
			out.Node, out.GPU = a.Node, beat.get().GPU
			if spec.GPU && a.GPUNode != nil {
				out.NodeQueue = a.GPUNode.NodeQueue
			}
			return err
		case <-tick.C:
			activity.RecordHeartbeat(ctx, beat.get())
		}
	}
}

// panicked turns a stage's panic into its typed error, logging where it
// happened (the stack never leaves the node's log: it may quote data).
func (a *Activities) panicked(stage exam.Stage, p any) error {
	stack := debug.Stack()
	value := p
	var fp *imaging.FramePanic
	if err, ok := p.(error); ok && errors.As(err, &fp) {
		value, stack = fp.Value, fp.Stack
	}
	if a.Logger != nil {
		a.Logger.Error("stage panicked", zap.String("stage", string(stage)), zap.String("node", a.Node),
			zap.Any("panic", value), zap.ByteString("stack", stack))
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s panicked: %v", stage, value), contract.ErrTypeStagePanic, nil)
}

func (a *Activities) loadVolume(ctx context.Context, key string) (*imaging.Volume, error) {
	var rs io.ReadSeeker
	var size int64
	if b, ok := a.objects().cached(key); ok {
		rs, size = bytes.NewReader(b), int64(len(b))
	} else {
		announceTake(ctx)
		rc, n, err := a.Store.Get(ctx, key)
		if err != nil {
			return nil, unavailable(ctx, err)
		}
		defer rc.Close()
		countRead(ctx, n)
		// Read whole, in one request: the DICOM reader walks a file twice
		// (its lengths, then its elements). The buffer is the object's
		// size, not grown by doubling.
		b, err := readSized(rc, n)
		if err != nil {
			return nil, unavailable(ctx, fmt.Errorf("read %s: %w", key, err))
		}
		rs, size = bytes.NewReader(b), int64(len(b))
	}
	v, _, err := octdicom.ReadDICOM(rs, size)
	if errors.Is(err, imaging.ErrInvalidVolume) {
		return nil, permanentIfInvalid(err)
	} else if err != nil {
		// The reader says when its source failed: a dropped download is
		// not a bad scan.
		return nil, unavailable(ctx, err)
	}
	return v, nil
}

// readSized reads size bytes of r into a buffer of that size (a body
// that ends early is an error); an unknown size (-1) reads r as it comes.
func readSized(r io.Reader, size int64) ([]byte, error) {
	if size < 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// objects reads and writes objects in a store, through a GPU node's
// cache when there is one: what the stages, the export and housekeeping
// share of the object store.
type objects struct {
	store ObjectStore
	cache *LocalCache // nil: none
}

// objects are the stages' objects: the store, through the node's cache.
func (a *Activities) objects() objects {
	return objects{store: a.Store, cache: a.GPUNode.cache()}
}

// cached returns the object under key from the node's cache, if any.
func (o objects) cached(key string) ([]byte, bool) {
	if o.cache == nil {
		return nil, false
	}
	return o.cache.Get(key)
}

// get reads one object: from the node's cache when it holds it, else
// from the store, counting the bytes read there.
func (o objects) get(ctx context.Context, key string) ([]byte, error) {
	if b, ok := o.cached(key); ok {
		return b, nil
	}
	announceTake(ctx)
	rc, _, err := o.store.Get(ctx, key)
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	countRead(ctx, int64(len(b)))
	if err != nil {
		return nil, unavailable(ctx, fmt.Errorf("read %s: %w", key, err))
	}
	return b, nil
}

// loadExamVolume reads one of an exam's volumes and gives it the scan
// pattern the gateway resolved (an exam submitted before the pattern was
// kept gets the one its shape says).
func (a *Activities) loadExamVolume(ctx context.Context, sub exam.Submission, key string) (*imaging.Volume, error) {
	v, err := a.loadVolume(ctx, key)
	if err != nil {
		return nil, err
	}
	v.Pattern, err = imaging.ResolvePattern(v, imaging.Pattern(sub.ScanType))
	if err != nil {
		// The pattern was checked at the gateway; only a scan changed in
		// storage can fail here.
		return nil, permanentIfInvalid(err)
	}
	return v, nil
}

func (a *Activities) loadVolumeAndLayers(ctx context.Context, sub exam.Submission) (*imaging.Volume, *imaging.Layers, error) {
	r := sub.Ref()
	v, err := a.loadExamVolume(ctx, sub, exam.DenoisedKey(r))
	if err != nil {
		return nil, nil, err
	}
	var layers imaging.Layers
	if err := a.getJSON(ctx, exam.LayersKey(r), &layers); err != nil {
		return nil, nil, err
	}
	return v, &layers, nil
}

func (o objects) put(ctx context.Context, key string, b []byte, contentType string) error {
	if err := o.store.Put(ctx, key, bytes.NewReader(b), int64(len(b)), contentType); err != nil {
		return unavailable(ctx, err)
	}
	if o.cache != nil {
		o.cache.Put(key, b)
	}
	return nil
}

func (o objects) putJSON(ctx context.Context, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	return o.put(ctx, key, b, "application/json")
}

func (o objects) getJSON(ctx context.Context, key string, v any) error {
	b, err := o.get(ctx, key)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	return nil
}

// get, put, putJSON and getJSON read and write the stages' objects
// (objects).
func (a *Activities) get(ctx context.Context, key string) ([]byte, error) {
	return a.objects().get(ctx, key)
}

func (a *Activities) put(ctx context.Context, key string, b []byte, contentType string) error {
	return a.objects().put(ctx, key, b, contentType)
}

func (a *Activities) putJSON(ctx context.Context, key string, v any) error {
	return a.objects().putJSON(ctx, key, v)
}

func (a *Activities) getJSON(ctx context.Context, key string, v any) error {
	return a.objects().getJSON(ctx, key, v)
}

// unavailable marks a backing-service failure as an infrastructure error:
// the object store (or Temporal) did not answer, which is neither the stage's nor the node's
// fault. The workflow reschedules the stage after a backoff without
// spending its attempts, and the node's breaker does not count it. A
// missing object is not such a failure (the store answered), nor is a
// stage that was cancelled.
func unavailable(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, storage.ErrNotFound) || ctx.Err() != nil {
		return err
	}
	return temporal.NewApplicationErrorWithOptions("unavailable: "+err.Error(), contract.ErrTypeInfrastructure,
		temporal.ApplicationErrorOptions{Cause: err})
}

// permanentIfInvalid turns an invalid-volume error into a non-retryable
// Temporal error: retrying cannot fix a bad scan.
func permanentIfInvalid(err error) error {
	if errors.Is(err, imaging.ErrInvalidVolume) {
		return temporal.NewNonRetryableApplicationError(err.Error(), contract.ErrTypeInvalidVolume, err)
	}
	return err
}

// derivedUID is the DICOM UID of a volume derived from the scan with this
// digest: 2.25 followed by its first 128 bits in decimal, the UUID-based
// form of PS3.5 B.2. The same scan always gives the same UID.
func derivedUID(digest string) string {
	n, ok := new(big.Int).SetString(digest[:min(32, len(digest))], 16)
	if !ok {
		n = big.NewInt(0)
	}
	return "2.25." + n.String()
}
