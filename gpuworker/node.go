package gpuworker

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"octflow/activities"
	"octflow/exam"
)

// Config describes one node.
type Config struct {
	// NodeID names the node in Temporal and in exam timelines.
	NodeID string
	// GPUs is where the node's GPUs come from. Nil: one simulated GPU.
	GPUs Inventory
	// TaskQueue is the GPU pool to serve (default oct-gpu).
	TaskQueue string
	// DrainTimeout is how long a stopping node lets running stages
	// finish before cancelling them (default 90 s).
	DrainTimeout time.Duration
	// Breaker tunes the node's circuit breaker.
	Breaker BreakerConfig
	// Stages are the pipeline's stages; the node runs its GPU stages
	// (nil: activities.Pipeline()).
	Stages activities.Stages
	// Common are what the node's stages run through: its process's
	// object store, stage logger, served models and stage metrics.
	Common activities.Common
	// SimulatedCompute is the simulated GPU time of a node without GPUs
	// (activities.GPUNode; nil on nodes with real GPUs).
	SimulatedCompute activities.SimulatedComputeFunc
	// StageMemoryMiB is the GPU memory each stage needs (nil: each
	// stage's declared GPUMemoryMiB).
	StageMemoryMiB map[exam.Stage]uint64
	// ReportEvery is how often the node reports to the fleet (default 10 s).
	ReportEvery time.Duration
	// Logger receives the node's own logs (default: none).
	Logger *zap.Logger
	// CacheMiB bounds the node's cache of its recent outputs, which the
	// exam's next stage on this node reads instead of the object store
	// (default 1024; negative: no cache). The node also serves its own
	// task queue (exam.NodeQueue) where exams send those next stages.
	CacheMiB int
	// Prefetch is how many stages beyond its free GPUs the node takes
	// from the shared queue, to have the next one at hand when a GPU
	// frees (default 1; negative: none). A prefetched stage waits for a
	// GPU on the node, the most urgent first.
	Prefetch int
	// TakesDir is where the node notes the stages it holds, so that after
	// a crash its next start hands them back at once (Takes). Empty: no
	// notes; a stage lost with the node waits out its heartbeat timeout.
	TakesDir string
	// Probe is the computation the node times at every report, for the
	// fleet to compare nodes by (nil: DenoiseProbe).
	Probe func(context.Context) error
	// Interceptors wrap the node's stages (after the node's own, which
	// binds each stage's GPU: a stage's context holds its GPUGate), e.g.
	// for tracing; the tests inject faults with them.
	Interceptors []interceptor.WorkerInterceptor
}

// Node is a running GPU node.
type Node struct {
	cfg     Config
	w       worker.Worker
	pinned  worker.Worker // on the node's own queue
	cache   *activities.LocalCache
	slots   *Slots
	breaker *Breaker
	pace    *Pace
	rep     *reporter
	takes   *Takes
	cancel  context.CancelFunc
	done    chan struct{}
}

// Start registers the GPU stages, bound to the node's own part
// (activities.GPUNode: its cache, its queue, its take log), and starts
// polling.
func Start(c client.Client, cfg Config) (*Node, error) {
	if cfg.GPUs == nil {
		cfg.GPUs = NewSimulatedInventory(SimulatedGPUs{Count: 1})
	}
	if cfg.TaskQueue == "" {
		cfg.TaskQueue = exam.GPUQueue
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = 90 * time.Second
	}
	if cfg.ReportEvery == 0 {
		cfg.ReportEvery = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Stages == nil {
		cfg.Stages = activities.Pipeline()
	}
	n := &Node{cfg: cfg, breaker: NewBreaker(cfg.Breaker)}
	n.slots = NewSlots(cfg.GPUs, n.breaker, cfg.Stages.Specs(), cfg.StageMemoryMiB)
	n.slots.prefetch = max(0, cmp.Or(cfg.Prefetch, 1))
	n.pace = NewPace(cfg.Probe)
	n.slots.pace = n.pace
	part := &activities.GPUNode{NodeQueue: exam.NodeQueueOf(cfg.TaskQueue, cfg.NodeID), SimulatedCompute: cfg.SimulatedCompute}
	if cfg.CacheMiB >= 0 {
		n.cache = activities.NewLocalCache(int64(cmp.Or(cfg.CacheMiB, 1024)) << 20)
		part.Cache = n.cache
	}
	if cfg.TakesDir != "" {
		takes, err := OpenTakes(cfg.TakesDir, cfg.NodeID, cfg.Logger.With(zap.String("node", cfg.NodeID)))
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if handed := takes.HandBack(ctx, c); handed > 0 {
			cfg.Logger.Info("handed back stages held before a crash", zap.String("node", cfg.NodeID), zap.Int("stages", handed))
		}
		cancel()
		n.takes, part.Takes = takes, takes
	}
	acts := &activities.Activities{Common: cfg.Common, Node: cfg.NodeID, GPUNode: part}
	n.rep = &reporter{client: c, node: n, interval: cfg.ReportEvery, log: cfg.Logger.With(zap.String("node", cfg.NodeID))}
	// What the fleet holds for this node (degraded by a predecessor under
	// its ID) applies before it polls.
	sync, cancelSync := context.WithTimeout(context.Background(), cfg.ReportEvery)
	n.rep.apply(sync)
	cancelSync()
	var err error
	if n.w, err = newStageWorker(c, cfg, cfg.TaskQueue, n.slots, n.slots.Interceptor(cfg.NodeID), acts); err != nil {
		n.closeTakes()
		return nil, err
	}
	if n.pinned, err = newStageWorker(c, cfg, part.NodeQueue, n.slots.NodeQueueSupplier(),
		n.slots.NodeQueueInterceptor(cfg.NodeID), acts); err != nil {
		n.w.Stop()
		n.closeTakes()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel, n.done = cancel, make(chan struct{})
	go func() {
		defer close(n.done)
		n.rep.run(ctx)
	}()
	return n, nil
}

// startReportedWithin bounds the delay between a stage's heartbeats.
const startReportedWithin = time.Second

// newStageWorker starts a worker serving the GPU stages on queue, its
// slots from supplier, each stage bound to a GPU by binder.
func newStageWorker(c client.Client, cfg Config, queue string, supplier worker.SlotSupplier,
	binder interceptor.WorkerInterceptor, acts *activities.Activities) (worker.Worker, error) {
	tuner, err := worker.NewCompositeTuner(worker.CompositeTunerOptions{
		WorkflowSlotSupplier:        mustFixed(1),
		ActivitySlotSupplier:        supplier,
		LocalActivitySlotSupplier:   mustFixed(1),
		NexusSlotSupplier:           mustFixed(1),
		SessionActivitySlotSupplier: mustFixed(1),
	})
	if err != nil {
		return nil, fmt.Errorf("gpu slot tuner: %w", err)
	}
	w := worker.New(c, queue, worker.Options{
		Identity:          cfg.NodeID,
		Tuner:             tuner,
		WorkerStopTimeout: cfg.DrainTimeout,
		// A stage's first heartbeat says the node took it; the one
		// that says it holds its GPU and started follows within this
		// (the SDK's default holds it back up to 0.8 × the heartbeat
		// timeout, 24 s in production).
		MaxHeartbeatThrottleInterval: startReportedWithin,
		// Bind the GPU, and judge the outcome for the node's breaker.
		Interceptors: append([]interceptor.WorkerInterceptor{binder}, cfg.Interceptors...),
	})
	activities.RegisterStages(w, acts, cfg.Stages, true)
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start gpu node %s on %s: %w", cfg.NodeID, queue, err)
	}
	return w, nil
}

func mustFixed(n int) worker.SlotSupplier {
	s, err := worker.NewFixedSizeSlotSupplier(n)
	if err != nil {
		panic(err) // only for n < 1
	}
	return s
}

// Stop drains the node: it tells the fleet it is draining, stops polling
// at once and waits up to the drain timeout for running stages to finish.
func (n *Node) Stop() {
	n.cancel()
	<-n.done
	n.rep.report(context.Background(), true)
	// Both queues stop polling at once; pinned stages left in the node's
	// queue go back to the shared queue when their wait runs out.
	done := make(chan struct{})
	go func() {
		n.pinned.Stop()
		close(done)
	}()
	n.w.Stop()
	<-done
	n.closeTakes()
	n.cfg.GPUs.Close()
}

func (n *Node) closeTakes() {
	if n.takes != nil {
		n.takes.Close()
	}
}
