package workflows

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"go.temporal.io/sdk/workflow"

	"octflow/contract"
)

// historyLimit is how long the histories of the long-running workflows
// (fleet, inboxes) may grow before they continue as new.
const historyLimit = 2000

// timeToContinue says a long-running workflow should continue as new:
// its history is past limit (0: historyLimit), the server suggests it,
// or another build became the deployment's current or ramping version
// (Worker Versioning: the run is pinned to the build that started it,
// and moves at its continue-as-new; see continueAsNew).
func timeToContinue(ctx workflow.Context, limit int) bool {
	if limit <= 0 {
		limit = historyLimit
	}
	info := workflow.GetInfo(ctx)
	return info.GetCurrentHistoryLength() > limit || info.GetContinueAsNewSuggested() ||
		info.GetTargetWorkerDeploymentVersionChanged()
}

// continueAsNew ends a long-running workflow's run and starts its next
// on the deployment's current build (or the one a ramp picks), not on the
// build this run is pinned to; on unversioned workers it is a plain
// continue-as-new.
func continueAsNew(ctx workflow.Context, wf string, state any) error {
	return workflow.NewContinueAsNewErrorWithOptions(ctx,
		workflow.ContinueAsNewErrorOptions{InitialVersioningBehavior: workflow.ContinueAsNewVersioningBehaviorAutoUpgrade},
		wf, state)
}

// NodeRetention is how long the fleet keeps a node that went silent
// without draining (killed, its host lost): long enough for the
// OctflowNodeDown page to reach someone and for the node to come back
// under its own ID, short enough that a node taken away for good stops
// paging a day later.
const NodeRetention = 24 * time.Hour

// drainedAfter is how many of its report intervals a node that said it
// was draining may stay silent before the fleet forgets it: it left on
// purpose, so it is gone before the api would call it down (three
// intervals) and no alert fires for it.
const drainedAfter = 2

// defaultReportInterval stands for a report's interval where it gives
// none (gpuworker.Config.ReportEvery's default).
const defaultReportInterval = 10 * time.Second

// forgetAt is when the fleet forgets n unless it reports again.
func forgetAt(n *contract.FleetNode) time.Time {
	// A degraded node, or one with strikes, is kept through a restart:
	// its next process must find its judgement.
	judged := n.Health.State == contract.Degraded || n.Health.Strikes > 0
	if n.Report.Draining && !judged {
		interval := n.Report.Interval
		if interval <= 0 {
			interval = defaultReportInterval
		}
		return n.LastSeen.Add(drainedAfter * interval)
	}
	return n.LastSeen.Add(NodeRetention)
}

// FleetWorkflow keeps the latest report of every GPU node. Nodes signal
// their status on an interval (signal-with-start, so the first node
// creates it); the API reads the fleet with a query and resets a node's
// breaker with an update, which the node applies at its next report.
// Each report is judged against the other nodes' figures (Judge): a
// node too slow for its model is degraded, takes no new work, and the
// exams of the stages it holds past their deadline are asked to run them
// again elsewhere (HedgeSignal); an operator marks a node degraded or
// healthy with an update (MarkNodeUpdate). The
// fleet's state is what the nodes last said, so losing it loses nothing:
// the next round of reports rebuilds it.
//
// The fleet holds only the nodes that are supposed to be there: a node
// that drained (scaled down, redeployed under another ID) is forgotten
// once silent for two of its intervals, and one that went silent without
// draining after NodeRetention; a node that reports again is back.
func FleetWorkflow(ctx workflow.Context, state contract.FleetState) error {
	if state.Nodes == nil {
		state.Nodes = map[string]*contract.FleetNode{}
	}
	if err := workflow.SetQueryHandler(ctx, contract.FleetQuery, func() ([]contract.FleetNode, error) {
		out := make([]contract.FleetNode, 0, len(state.Nodes))
		// Sorted below: the answer does not depend on the map's order.
		//workflowcheck:ignore
		for _, n := range state.Nodes {
			out = append(out, *n)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Report.NodeID < out[j].Report.NodeID })
		return out, nil
	}); err != nil {
		return fmt.Errorf("register query: %w", err)
	}
	if err := workflow.SetQueryHandler(ctx, contract.NodeStateQuery, func(nodeID string) (contract.NodeState, error) {
		n := state.Nodes[nodeID]
		if n == nil {
			return contract.NodeState{}, nil
		}
		return contract.NodeState{Known: true, Health: n.Health.State, Reason: n.Health.Reason, By: n.Health.By,
			ResetGeneration: n.ResetGeneration}, nil
	}); err != nil {
		return fmt.Errorf("register query: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, contract.ResetBreakerUpdate,
		func(ctx workflow.Context, nodeID string) (int, error) {
			n := state.Nodes[nodeID]
			n.ResetGeneration++
			workflow.GetLogger(ctx).Info("breaker reset requested", "node", nodeID, "generation", n.ResetGeneration)
			return n.ResetGeneration, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, nodeID string) error {
			if _, ok := state.Nodes[nodeID]; !ok {
				return fmt.Errorf("unknown node %q", nodeID)
			}
			return nil
		}},
	); err != nil {
		return fmt.Errorf("register update: %w", err)
	}

	if err := workflow.SetUpdateHandlerWithOptions(ctx, contract.MarkNodeUpdate,
		func(ctx workflow.Context, m contract.NodeMark) (contract.NodeHealth, error) {
			n := state.Nodes[m.NodeID]
			// Strikes stay: a mark is no evidence of the node's speed.
			h := contract.NodeHealth{State: m.State, Since: workflow.Now(ctx), By: m.By, Held: m.State == contract.Degraded,
				Reason: "marked " + m.State + " by an operator", Strikes: n.Health.Strikes}
			if h.State == n.Health.State {
				h.Since, h.Hedged = n.Health.Since, n.Health.Hedged
			} else {
				workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"to": h.State}).
					Counter(NodeHealthChangesCounter).Inc(1)
			}
			n.Health = h
			workflow.GetLogger(ctx).Info("node marked by an operator", "node", m.NodeID, "health", m.State, "by", m.By)
			return n.Health, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, m contract.NodeMark) error {
			if _, ok := state.Nodes[m.NodeID]; !ok {
				return fmt.Errorf("unknown node %q", m.NodeID)
			}
			if m.State != contract.Degraded && m.State != contract.Healthy {
				return fmt.Errorf("a node is marked %q or %q, not %q", contract.Degraded, contract.Healthy, m.State)
			}
			return nil
		}},
	); err != nil {
		return fmt.Errorf("register update: %w", err)
	}

	// Hedges go out on their own, so a slow signal holds no report back;
	// the run continues as new only once they are sent.
	sending := 0
	hedge := func(orders []HedgeOrder) {
		for _, o := range orders {
			sending++
			workflow.Go(ctx, func(ctx workflow.Context) {
				defer func() { sending-- }()
				err := workflow.SignalExternalWorkflow(ctx, o.WorkflowID, o.RunID, contract.HedgeSignal, o.Hedge).Get(ctx, nil)
				// An exam that ended meanwhile needs no hedge.
				workflow.GetLogger(ctx).Info("stage hedged", "workflowId", o.WorkflowID, "activityId", o.Hedge.ActivityID,
					"node", o.Hedge.Node, "error", err)
			})
		}
	}

	reports := workflow.GetSignalChannel(ctx, contract.NodeReportSignal)
	moves := workflow.GetSignalChannel(ctx, contract.MoveBuildSignal)
	receive := func(r contract.NodeReport) {
		n, ok := state.Nodes[r.NodeID]
		if !ok {
			n = &contract.FleetNode{ResetGeneration: r.ResetsApplied}
			state.Nodes[r.NodeID] = n
		}
		n.Report, n.LastSeen = r, workflow.Now(ctx)
		was := n.Health.State
		hedge(Judge(workflow.Now(ctx), state.Nodes, r.NodeID, state.Pace))
		if was != n.Health.State && was != "" {
			workflow.GetLogger(ctx).Warn("node health changed", "node", r.NodeID, "from", was, "to", n.Health.State,
				"reason", n.Health.Reason)
			workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"to": n.Health.State}).
				Counter(NodeHealthChangesCounter).Inc(1)
		}
	}
	// forget drops every node past its forgetAt; next is the earliest
	// forgetAt of those left (zero: no node).
	forget := func() (next time.Time) {
		now := workflow.Now(ctx)
		ids := make([]string, 0, len(state.Nodes))
		// Sorted below: what is logged and kept does not depend on the
		// map's order.
		//workflowcheck:ignore
		for id := range state.Nodes {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			at := forgetAt(state.Nodes[id])
			if !now.Before(at) {
				workflow.GetLogger(ctx).Info("node forgotten", "node", id, "draining", state.Nodes[id].Report.Draining,
					"lastSeen", state.Nodes[id].LastSeen)
				delete(state.Nodes, id)
				continue
			}
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
		return next
	}
	// One timer at a time, for the earliest node to forget; a report
	// that brings that time forward (a node draining) replaces it.
	var (
		timer       workflow.Future
		timerAt     time.Time
		cancelTimer workflow.CancelFunc
	)
	for {
		if next := forget(); !next.IsZero() && (timer == nil || next.Before(timerAt)) {
			if cancelTimer != nil {
				cancelTimer()
			}
			var tctx workflow.Context
			tctx, cancelTimer = workflow.WithCancel(ctx)
			timer, timerAt = workflow.NewTimer(tctx, next.Sub(workflow.Now(ctx))), next
		}
		var r contract.NodeReport
		got, moved := false, false
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(reports, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, &r)
			got = true
		})
		sel.AddReceive(moves, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			moved = true
		})
		if timer != nil {
			sel.AddFuture(timer, func(workflow.Future) { timer, cancelTimer = nil, nil })
		}
		sel.Select(ctx)
		if err := ctx.Err(); err != nil {
			return err // the fleet was canceled
		}
		if !got && !moved {
			continue
		}
		if got {
			receive(r)
		}
		if timeToContinue(ctx, state.HistoryLimit) {
			// Take every report already delivered, let running updates
			// and hedges finish, and again for reports that came
			// meanwhile; then start afresh with the same state.
			for {
				for reports.ReceiveAsync(&r) {
					receive(r)
				}
				if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) && sending == 0 }); err != nil {
					return err
				}
				if reports.Len() == 0 {
					break
				}
			}
			return continueAsNew(ctx, contract.FleetWorkflow, state)
		}
	}
}
