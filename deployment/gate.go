package deployment

import (
	"context"
	"errors"
	"fmt"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
)

// Gate is the replay gate a build passes before it is promoted or
// ramped: the histories of the running workflows it would take over are
// fetched from the cluster and replayed against this binary's workflows,
// and one that does not replay refuses the build, by its workflow ID.
//
// A build takes over the workflows that are not pinned to another live
// build: those unversioned (started before Worker Versioning, or by
// unversioned workers), those that auto-upgrade, and those pinned to the
// build itself (a build ID reused for other code). The workflows pinned
// to another build stay on it and are replayed too, but only reported:
// they are the ones that could not be moved off their build were it to
// go early (Check's Stay).
type Gate struct {
	Client client.Client
	// Deployment and BuildID are the build this binary is and the gate
	// judges.
	Deployment, BuildID string
	// Register registers this binary's workflows on the replayer, as its
	// worker does (workflows.Register).
	Register func(worker.WorkflowRegistry) error
	// DataConverter and FailureConverter open the histories' payloads (the
	// worker's: codec.Converters).
	DataConverter    converter.DataConverter
	FailureConverter converter.FailureConverter
	// PerBuild bounds how many running workflows are replayed per build
	// they are pinned to (and of the unversioned ones); default 200, in the
	// order visibility lists them (most recently started first on SQL stores).
	PerBuild int
	Logger   *zap.Logger
}

// Verdict is the gate's judgement of a build.
type Verdict struct {
	// Replayed counts the histories replayed; Movers those that would run
	// on the build.
	Replayed, Movers int
	// Refusals are the workflows that would run on the build and do not
	// replay on it: the build may not be promoted.
	Refusals []Replay
	// Stay are the workflows pinned to another build that do not replay
	// on this one: they finish on their build, which may not go early.
	Stay []Replay
}

// Passed says the build may be promoted.
func (v Verdict) Passed() bool { return len(v.Refusals) == 0 }

// Replay is one workflow the gate replayed and could not.
type Replay struct {
	WorkflowID, RunID, Type string
	// PinnedTo is the build it is pinned to ("" unversioned or
	// auto-upgrading).
	PinnedTo string
	Err      error
}

func (r Replay) String() string {
	on := "unversioned"
	if r.PinnedTo != "" {
		on = "pinned to " + r.PinnedTo
	}
	return fmt.Sprintf("%s (%s, run %s, %s): %v", r.WorkflowID, r.Type, r.RunID, on, r.Err)
}

// Check replays the running workflows' histories against this binary.
func (g Gate) Check(ctx context.Context) (Verdict, error) {
	if g.PerBuild <= 0 {
		g.PerBuild = 200
	}
	if g.Logger == nil {
		g.Logger = zap.NewNop()
	}
	var v Verdict
	taken := map[string]int{}
	var token []byte
	for {
		resp, err := g.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: "ExecutionStatus = 'Running'", NextPageToken: token, PageSize: 500})
		if err != nil {
			return v, fmt.Errorf("list running workflows: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			id, run := e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId()
			pinned, mover, err := g.placement(ctx, id, run)
			if err != nil {
				return v, err
			}
			if taken[pinned] >= g.PerBuild {
				continue
			}
			taken[pinned]++
			err = g.replay(ctx, id, run)
			v.Replayed++
			if mover {
				v.Movers++
			}
			if err == nil {
				continue
			}
			r := Replay{WorkflowID: id, RunID: run, Type: e.GetType().GetName(), PinnedTo: pinned, Err: err}
			if mover {
				v.Refusals = append(v.Refusals, r)
			} else {
				v.Stay = append(v.Stay, r)
			}
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return v, nil
		}
	}
}

// placement says which build a running workflow is pinned to, and
// whether it would run on the gate's build once promoted.
func (g Gate) placement(ctx context.Context, id, run string) (pinned string, mover bool, err error) {
	d, err := g.Client.DescribeWorkflowExecution(ctx, id, run)
	if err != nil {
		return "", false, fmt.Errorf("describe %s: %w", id, err)
	}
	vi := d.GetWorkflowExecutionInfo().GetVersioningInfo()
	ver := vi.GetDeploymentVersion()
	if o := vi.GetVersioningOverride(); o.GetPinned() != nil {
		ver = o.GetPinned().GetVersion()
	} else if o.GetAutoUpgrade() {
		return "", true, nil
	}
	if vi.GetBehavior() != enumspb.VERSIONING_BEHAVIOR_PINNED && vi.GetVersioningOverride().GetPinned() == nil {
		return "", true, nil // unversioned or auto-upgrading: it runs on whatever is current
	}
	if ver.GetDeploymentName() != g.Deployment {
		return ver.GetDeploymentName() + ":" + ver.GetBuildId(), false, nil
	}
	return ver.GetBuildId(), ver.GetBuildId() == g.BuildID, nil
}

// replay replays one workflow's history against this binary.
func (g Gate) replay(ctx context.Context, id, run string) error {
	var h historypb.History
	it := g.Client.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return fmt.Errorf("read the history of %s: %w", id, err)
		}
		h.Events = append(h.Events, ev)
	}
	return g.replayHistory(&h, id, run)
}

// replayHistory replays h, the history of workflow id's run, against this
// binary. A history in which no workflow task has completed (a workflow
// started, or continued as new, that no worker has taken up yet) holds
// no decision a build could contradict: it passes without a replay.
func (g Gate) replayHistory(h *historypb.History, id, run string) error {
	if !slices.ContainsFunc(h.GetEvents(), func(e *historypb.HistoryEvent) bool {
		return e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
	}) {
		return nil
	}
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{
		DataConverter: g.DataConverter, FailureConverter: g.FailureConverter})
	if err != nil {
		return err
	}
	if err := g.Register(r); err != nil {
		return err
	}
	err = r.ReplayWorkflowHistoryWithOptions(nil, h, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: id, RunID: run}})
	if err != nil {
		g.Logger.Warn("a running workflow does not replay on this build", zap.String("workflowId", id), zap.Error(err))
	}
	return err
}

// ErrRefused says the gate refused a build.
var ErrRefused = errors.New("the replay gate refused this build")
