// Package gpuworker is a GPU node: a Temporal worker on a GPU task queue
// that runs the image stages. It discovers its GPUs (NVML, or simulated
// ones where there is no NVIDIA driver), grants one stage per free,
// healthy GPU with enough memory (Slots), stops taking work when its
// recent stages fail too often (Breaker), and drains on shutdown so a
// deploy never loses a stage.
package gpuworker

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"octflow/activities"
	"octflow/exam"
	"octflow/workers"
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
	// StageMemoryMiB is the GPU memory each stage needs (nil: defaults).
	StageMemoryMiB map[exam.Stage]uint64
	// ReportEvery is how often the node reports to the fleet (default 10 s).
	ReportEvery time.Duration
	// Logger receives the node's own logs (default: none).
	Logger *zap.Logger
}

// Node is a running GPU node.
type Node struct {
	cfg     Config
	w       worker.Worker
	slots   *Slots
	breaker *Breaker
	rep     *reporter
	cancel  context.CancelFunc
	done    chan struct{}
}

// Start registers the GPU stages and starts polling.
func Start(c client.Client, acts *activities.Activities, cfg Config) (*Node, error) {
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
	n := &Node{cfg: cfg, breaker: NewBreaker(cfg.Breaker)}
	n.slots = NewSlots(cfg.GPUs, n.breaker, cfg.StageMemoryMiB)
	tuner, err := worker.NewCompositeTuner(worker.CompositeTunerOptions{
		WorkflowSlotSupplier:        mustFixed(1),
		ActivitySlotSupplier:        n.slots,
		LocalActivitySlotSupplier:   mustFixed(1),
		NexusSlotSupplier:           mustFixed(1),
		SessionActivitySlotSupplier: mustFixed(1),
	})
	if err != nil {
		return nil, fmt.Errorf("gpu slot tuner: %w", err)
	}
	w := worker.New(c, cfg.TaskQueue, worker.Options{
		Identity:          cfg.NodeID,
		Tuner:             tuner,
		WorkerStopTimeout: cfg.DrainTimeout,
		// Outermost first: bind the GPU (and judge the outcome), then
		// spread the retry of a failure.
		Interceptors: []interceptor.WorkerInterceptor{n.slots.Interceptor(), &workers.RetryJitter{Node: cfg.NodeID}},
	})
	nodeActs := *acts
	nodeActs.Node = cfg.NodeID
	for _, s := range []struct {
		stage exam.Stage
		fn    any
	}{
		{exam.Denoise, nodeActs.Denoise},
		{exam.Layers, nodeActs.SegmentLayers},
		{exam.Lesions, nodeActs.MarkLesions},
		{exam.Measure, nodeActs.Measure},
	} {
		w.RegisterActivityWithOptions(s.fn, activity.RegisterOptions{Name: s.stage.ActivityName()})
	}
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start gpu node %s: %w", cfg.NodeID, err)
	}
	n.w = w
	n.rep = &reporter{client: c, node: n, interval: cfg.ReportEvery, log: cfg.Logger.With(zap.String("node", cfg.NodeID))}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel, n.done = cancel, make(chan struct{})
	go func() {
		defer close(n.done)
		n.rep.run(ctx)
	}()
	return n, nil
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
	n.w.Stop()
	n.cfg.GPUs.Close()
}
