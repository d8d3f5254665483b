package workflows

import (
	"fmt"
	"sort"
	"time"

	"go.temporal.io/sdk/workflow"

	"octflow/exam"
)

// The fleet workflow: one long-running workflow that GPU nodes report to
// and operators act through. Nodes signal their status on an interval
// (signal-with-start, so the first node creates it); the API reads the
// fleet with a query and resets a node's breaker with an update, which
// the node applies at its next report. The fleet's state is what the
// nodes last said, so losing it loses nothing: the next round of reports
// rebuilds it.
const (
	FleetWorkflowName  = "FleetWorkflow"
	FleetWorkflowID    = "octflow-fleet"
	NodeReportSignal   = "node-report"
	FleetQuery         = "nodes"
	ResetBreakerUpdate = "reset-breaker"
)

// FleetNode is the fleet's record of one node.
type FleetNode struct {
	Report exam.NodeReport `json:"report"`
	// LastSeen is when the fleet last heard from the node.
	LastSeen time.Time `json:"lastSeen"`
	// ResetGeneration counts operator breaker resets; the node resets its
	// breaker when this is above its Report.ResetsApplied.
	ResetGeneration int `json:"resetGeneration"`
}

// FleetState is the fleet workflow's state, carried across continue-as-new.
type FleetState struct {
	Nodes map[string]*FleetNode `json:"nodes"`
}

// historyLimit bounds the history of the long-running workflows (fleet,
// inboxes) before they continue as new.
const historyLimit = 2000

// historyFull says a long-running workflow should continue as new.
func historyFull(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetCurrentHistoryLength() > historyLimit || info.GetContinueAsNewSuggested()
}

// FleetWorkflow keeps the latest report of every GPU node.
func FleetWorkflow(ctx workflow.Context, state FleetState) error {
	if state.Nodes == nil {
		state.Nodes = map[string]*FleetNode{}
	}
	if err := workflow.SetQueryHandler(ctx, FleetQuery, func() ([]FleetNode, error) {
		out := make([]FleetNode, 0, len(state.Nodes))
		for _, n := range state.Nodes {
			out = append(out, *n)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Report.NodeID < out[j].Report.NodeID })
		return out, nil
	}); err != nil {
		return fmt.Errorf("register query: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, ResetBreakerUpdate,
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

	reports := workflow.GetSignalChannel(ctx, NodeReportSignal)
	receive := func(r exam.NodeReport) {
		n, ok := state.Nodes[r.NodeID]
		if !ok {
			n = &FleetNode{ResetGeneration: r.ResetsApplied}
			state.Nodes[r.NodeID] = n
		}
		n.Report, n.LastSeen = r, workflow.Now(ctx)
	}
	for {
		var r exam.NodeReport
		reports.Receive(ctx, &r)
		receive(r)
		if historyFull(ctx) {
			// Take every report already delivered, let running updates
			// finish, then start afresh with the same state.
			for reports.ReceiveAsync(&r) {
				receive(r)
			}
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return err
			}
			return workflow.NewContinueAsNewError(ctx, FleetWorkflowName, state)
		}
	}
}
