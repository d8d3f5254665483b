package workflows

import (
	"fmt"
	"sort"

	"go.temporal.io/sdk/workflow"

	"octflow/contract"
)

// historyLimit is how long the histories of the long-running workflows
// (fleet, inboxes) may grow before they continue as new.
const historyLimit = 2000

// historyFull says a long-running workflow should continue as new: its
// history is past limit (0: historyLimit), or the server suggests it.
func historyFull(ctx workflow.Context, limit int) bool {
	if limit <= 0 {
		limit = historyLimit
	}
	info := workflow.GetInfo(ctx)
	return info.GetCurrentHistoryLength() > limit || info.GetContinueAsNewSuggested()
}

// FleetWorkflow keeps the latest report of every GPU node. Nodes signal
// their status on an interval (signal-with-start, so the first node
// creates it); the API reads the fleet with a query and resets a node's
// breaker with an update, which the node applies at its next report. The
// fleet's state is what the nodes last said, so losing it loses nothing:
// the next round of reports rebuilds it.
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

	reports := workflow.GetSignalChannel(ctx, contract.NodeReportSignal)
	receive := func(r contract.NodeReport) {
		n, ok := state.Nodes[r.NodeID]
		if !ok {
			n = &contract.FleetNode{ResetGeneration: r.ResetsApplied}
			state.Nodes[r.NodeID] = n
		}
		n.Report, n.LastSeen = r, workflow.Now(ctx)
	}
	for {
		var r contract.NodeReport
		reports.Receive(ctx, &r)
		receive(r)
		if historyFull(ctx, state.HistoryLimit) {
			// Take every report already delivered, let running updates
			// finish, then start afresh with the same state.
			for reports.ReceiveAsync(&r) {
				receive(r)
			}
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return err
			}
			return workflow.NewContinueAsNewError(ctx, contract.FleetWorkflow, state)
		}
	}
}
