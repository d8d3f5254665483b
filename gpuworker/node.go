// Package gpuworker is a GPU node: a Temporal worker on the GPU task queue
// that runs the image stages, one at a time per GPU, and drains cleanly
// on shutdown so a deploy never loses a stage.
package gpuworker

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"octflow/activities"
	"octflow/exam"
	"octflow/workers"
)

// Config describes one node.
type Config struct {
	// NodeID names the node in Temporal and in exam timelines.
	NodeID string
	// GPUs is how many stages may run at once (one per GPU; default 1).
	GPUs int
	// TaskQueue is the GPU pool to serve (default oct-gpu).
	TaskQueue string
	// DrainTimeout is how long a stopping node lets running stages
	// finish before cancelling them (default 90 s).
	DrainTimeout time.Duration
}

// Node is a running GPU node.
type Node struct {
	cfg Config
	w   worker.Worker
}

// Start registers the GPU stages and starts polling.
func Start(c client.Client, acts *activities.Activities, cfg Config) (*Node, error) {
	if cfg.GPUs < 1 {
		cfg.GPUs = 1
	}
	if cfg.TaskQueue == "" {
		cfg.TaskQueue = exam.GPUQueue
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = 90 * time.Second
	}
	w := worker.New(c, cfg.TaskQueue, worker.Options{
		Identity:                           cfg.NodeID,
		MaxConcurrentActivityExecutionSize: cfg.GPUs,
		WorkerStopTimeout:                  cfg.DrainTimeout,
		// A node must not take more than it can run: one poller per GPU
		// at most, so waiting work stays on the queue for other nodes.
		MaxConcurrentActivityTaskPollers: min(cfg.GPUs, 2),
		Interceptors:                     []interceptor.WorkerInterceptor{&workers.RetryJitter{}},
	})
	for _, s := range []struct {
		stage exam.Stage
		fn    any
	}{
		{exam.Denoise, acts.Denoise},
		{exam.Layers, acts.SegmentLayers},
		{exam.Lesions, acts.MarkLesions},
		{exam.Measure, acts.Measure},
	} {
		w.RegisterActivityWithOptions(s.fn, activity.RegisterOptions{Name: s.stage.ActivityName()})
	}
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start gpu node %s: %w", cfg.NodeID, err)
	}
	return &Node{cfg: cfg, w: w}, nil
}

// ID is the node's identity.
func (n *Node) ID() string { return n.cfg.NodeID }

// Stop drains the node: it stops polling at once and waits up to the
// drain timeout for running stages to finish.
func (n *Node) Stop() { n.w.Stop() }
