package gpuworker

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"octflow/contract"
	"octflow/exam"
)

// reporter tells the fleet what the node is doing and how fast it
// computes (a probe, timed at every report), every interval, and applies
// what the fleet holds for it: the breaker resets operators asked for,
// and whether it is degraded (it then takes no new stage).
type reporter struct {
	client   client.Client
	node     *Node
	interval time.Duration
	log      *zap.Logger
	applied  int // breaker-reset generation applied so far
	synced   bool
	degraded bool // the fleet holds the node degraded
}

func (r *reporter) run(ctx context.Context) {
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	for {
		r.report(ctx, false)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// report sends one status report and picks up a pending breaker reset.
func (r *reporter) report(ctx context.Context, draining bool) {
	gpus, err := r.node.cfg.GPUs.GPUs()
	if err != nil {
		r.log.Warn("read GPUs", zap.Error(err))
	}
	// A simulated GPU has no utilisation of its own: it is busy while a
	// stage holds it.
	for i, g := range gpus {
		if g.Simulated && r.node.slots.Busy(g.Index) {
			gpus[i].UtilizationPct = 100
		}
	}
	if !draining {
		if err := r.node.pace.runProbe(ctx, r.interval/2); err != nil {
			r.log.Warn("probe", zap.Error(err))
		}
	}
	model := ""
	if len(gpus) > 0 {
		model = gpus[0].Model
	}
	rep := contract.NodeReport{
		NodeID: r.node.cfg.NodeID, TaskQueue: r.node.cfg.TaskQueue, GPUs: gpus,
		InFlight: r.node.slots.InFlight(), Breaker: r.node.breaker.Status(), Draining: draining,
		Interval: r.interval, ResetsApplied: r.applied, Pace: r.node.pace.Report(model),
	}
	ctx, cancel := context.WithTimeout(ctx, r.interval)
	defer cancel()
	_, err = r.client.SignalWithStartWorkflow(ctx, contract.FleetWorkflowID, contract.NodeReportSignal, rep,
		client.StartWorkflowOptions{ID: contract.FleetWorkflowID, TaskQueue: exam.WorkflowQueue, Priority: contract.SystemPriority()},
		contract.FleetWorkflow, contract.FleetState{})
	if err != nil {
		r.log.Warn("report to fleet", zap.Error(err))
		return
	}
	if draining {
		return
	}
	r.apply(ctx)
}

// apply reads what the fleet holds for the node and applies it: whether
// it is degraded, and a pending breaker reset. A node starting again
// calls it before it polls, so a node the fleet holds degraded takes
// nothing meanwhile.
func (r *reporter) apply(ctx context.Context) {
	val, err := r.client.QueryWorkflow(ctx, contract.FleetWorkflowID, "", contract.NodeStateQuery, r.node.cfg.NodeID)
	if err != nil {
		r.log.Debug("read fleet", zap.Error(err))
		return
	}
	var n contract.NodeState
	if err := val.Get(&n); err != nil || !n.Known {
		return
	}
	if !r.synced {
		// A reset requested before this process started was for its
		// predecessor.
		r.applied, r.synced = n.ResetGeneration, true
	}
	degraded := n.Health == contract.Degraded
	if degraded != r.degraded {
		r.log.Info("the fleet judges the node", zap.String("health", n.Health), zap.String("reason", n.Reason),
			zap.String("by", n.By))
		r.degraded = degraded
	}
	r.node.slots.SetDegraded(degraded)
	r.node.pace.setDegraded(degraded)
	if n.ResetGeneration > r.applied {
		r.node.breaker.Reset()
		r.applied = n.ResetGeneration
		r.log.Info("breaker reset by an operator", zap.Int("generation", r.applied))
	}
}
