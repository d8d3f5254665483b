// Package deployment is the operator's side of Worker Versioning
// (decision 28): which build of the pipeline worker Temporal sends new
// exams to, and when an old build may go. A build's workers declare its
// Worker Deployment Version (workers.PipelineOptions.Deployment) and
// every workflow is pinned to the build that started it; Manager reads
// and moves the deployment's routing (status, promote, ramp, roll back,
// retire), and Gate replays the running histories a build would take
// over before it is promoted.
package deployment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"octflow/contract"
	"octflow/exam"
)

// Manager moves one Worker Deployment's routing.
type Manager struct {
	Client client.Client
	// Name is the deployment's (OCTFLOW_DEPLOYMENT).
	Name string
	// Identity names who made a change, in Temporal's record of it.
	Identity string
}

// Version is one build of the deployment, as Temporal sees it.
type Version struct {
	BuildID string
	Created time.Time
	// Current and Ramping say how it is routed; RampPercent is the share
	// of new workflows a ramping version takes.
	Current, Ramping bool
	RampPercent      float32
	// Drainage is "draining" while workflows pinned to it run, "drained"
	// once none do, "" while it is routed or never was.
	Drainage string
	// Polled says its workers have polled both of the pipeline worker's
	// queues (Temporal keeps them with the version after its workers
	// stop: not proof that they still run).
	Polled bool
	// Running counts the open workflows pinned to it (-1: visibility
	// could not say).
	Running int64
}

// Status is the deployment's routing and its versions.
type Status struct {
	Name     string
	Versions []Version
}

// Current is the current version's build ID ("" when new workflows go
// to unversioned workers).
func (s Status) Current() string {
	for _, v := range s.Versions {
		if v.Current {
			return v.BuildID
		}
	}
	return ""
}

// Version returns the version of buildID.
func (s Status) Version(buildID string) (Version, bool) {
	for _, v := range s.Versions {
		if v.BuildID == buildID {
			return v, true
		}
	}
	return Version{}, false
}

// ErrNoDeployment says no worker of the deployment has polled yet.
var ErrNoDeployment = errors.New("no worker of this deployment has polled Temporal yet")

// Status reads the deployment's routing, its versions and how many
// workflows each still runs.
func (m Manager) Status(ctx context.Context) (Status, error) {
	h := m.Client.WorkerDeploymentClient().GetHandle(m.Name)
	d, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	if err != nil {
		if isNotFound(err) {
			return Status{Name: m.Name}, ErrNoDeployment
		}
		return Status{}, fmt.Errorf("describe deployment %s: %w", m.Name, err)
	}
	st := Status{Name: m.Name}
	rc := d.Info.RoutingConfig
	for _, s := range d.Info.VersionSummaries {
		v := Version{BuildID: s.Version.BuildID, Created: s.CreateTime, Running: -1}
		v.Current = rc.CurrentVersion != nil && rc.CurrentVersion.BuildID == v.BuildID
		if rc.RampingVersion != nil && rc.RampingVersion.BuildID == v.BuildID {
			v.Ramping, v.RampPercent = true, rc.RampingVersionPercentage
		}
		switch s.DrainageStatus {
		case client.WorkerDeploymentVersionDrainageStatusDraining:
			v.Drainage = "draining"
		case client.WorkerDeploymentVersionDrainageStatusDrained:
			v.Drainage = "drained"
		}
		if desc, err := h.DescribeVersion(ctx, client.WorkerDeploymentDescribeVersionOptions{BuildID: v.BuildID}); err == nil {
			v.Polled = pollsPipeline(desc.Info.TaskQueuesInfos)
		}
		if n, err := m.Client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: runningOn(m.Name, v.BuildID)}); err == nil {
			v.Running = n.GetCount()
		}
		st.Versions = append(st.Versions, v)
	}
	slices.SortFunc(st.Versions, func(a, b Version) int { return a.Created.Compare(b.Created) })
	return st, nil
}

// pollsPipeline says a version's workers poll the pipeline worker's
// workflow queue and its CPU queue: both must be in a version before it
// may take exams, or a pinned exam's CPU stage would leave its build.
func pollsPipeline(queues []client.WorkerDeploymentTaskQueueInfo) bool {
	var wf, cpu bool
	for _, q := range queues {
		wf = wf || (q.Name == exam.WorkflowQueue && q.Type == client.TaskQueueTypeWorkflow)
		cpu = cpu || (q.Name == exam.CPUQueue && q.Type == client.TaskQueueTypeActivity)
	}
	return wf && cpu
}

// runningOn is the visibility query for the open workflows pinned to a
// version.
func runningOn(name, buildID string) string {
	return fmt.Sprintf("ExecutionStatus = 'Running' AND TemporalWorkerDeploymentVersion = '%s:%s'",
		quote(name), quote(buildID))
}

func quote(s string) string { return strings.ReplaceAll(s, "'", "") }

// WaitPolled waits until buildID's workers poll both pipeline queues.
func (m Manager) WaitPolled(ctx context.Context, buildID string, every time.Duration) error {
	h := m.Client.WorkerDeploymentClient().GetHandle(m.Name)
	for {
		desc, err := h.DescribeVersion(ctx, client.WorkerDeploymentDescribeVersionOptions{BuildID: buildID})
		if err == nil && pollsPipeline(desc.Info.TaskQueuesInfos) {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("its workers do not poll both pipeline queues")
			}
			return fmt.Errorf("build %s of deployment %s is not polled: %w", buildID, m.Name, err)
		case <-time.After(every):
		}
	}
}

// Promote makes buildID the current version: new exams start on it, and
// the long-running workflows are woken to continue as new on it.
// Its workers must poll both pipeline queues. It returns the build that
// was current ("" for none). A ramp of buildID ends with it.
func (m Manager) Promote(ctx context.Context, buildID string) (previous string, err error) {
	h := m.Client.WorkerDeploymentClient().GetHandle(m.Name)
	resp, err := h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: buildID, Identity: m.Identity})
	if err != nil {
		return "", fmt.Errorf("make build %s current in deployment %s: %w", buildID, m.Name, err)
	}
	if resp.PreviousVersion != nil {
		previous = resp.PreviousVersion.BuildID
	}
	return previous, m.moveLongRunning(ctx, buildID)
}

// moveLongRunning wakes the long-running workflows (the fleet, the
// inboxes) after a change of the current build, so that each continues
// as new on it at once, not at its next event, and the build it leaves
// may go. A workflow sees the new build only once the routing has reached
// its task queue, so the ones not yet on it are woken again, every
// moveEvery, for up to moveFor; one still left then moves at its next
// event (best effort: the promotion stands either way).
func (m Manager) moveLongRunning(ctx context.Context, buildID string) error {
	deadline := time.Now().Add(moveFor)
	for {
		left, err := m.Unmoved(ctx, buildID)
		if err != nil || len(left) == 0 || time.Now().After(deadline) {
			return err
		}
		for _, id := range left {
			err := m.Client.SignalWorkflow(ctx, id, "", contract.MoveBuildSignal, nil)
			if err != nil && !isNotFound(err) { // one that just ended has nothing to move
				return fmt.Errorf("wake %s: %w", id, err)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(moveEvery):
		}
	}
}

// How long, and how often, a promotion wakes the long-running workflows.
const (
	moveFor   = 30 * time.Second
	moveEvery = 2 * time.Second
)

// Unmoved lists the running fleet and inbox workflows whose latest run
// is not on buildID. Each is pinned to its build until it continues as
// new: the build it is on must keep a worker until it has moved, or
// nothing serves it (no node reports, no notifications).
func (m Manager) Unmoved(ctx context.Context, buildID string) ([]string, error) {
	var left []string
	for _, wf := range []string{contract.FleetWorkflow, contract.InboxWorkflow} {
		var token []byte
		for {
			resp, err := m.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{NextPageToken: token,
				Query: fmt.Sprintf("ExecutionStatus = 'Running' AND WorkflowType = '%s'", wf)})
			if err != nil {
				return nil, fmt.Errorf("list the running %s workflows: %w", wf, err)
			}
			for _, e := range resp.GetExecutions() {
				id := e.GetExecution().GetWorkflowId()
				d, err := m.Client.DescribeWorkflowExecution(ctx, id, "")
				if isNotFound(err) {
					continue
				}
				if err != nil {
					return nil, fmt.Errorf("describe %s: %w", id, err)
				}
				v := d.GetWorkflowExecutionInfo().GetVersioningInfo().GetDeploymentVersion()
				if v.GetDeploymentName() != m.Name || v.GetBuildId() != buildID {
					left = append(left, id)
				}
			}
			if token = resp.GetNextPageToken(); len(token) == 0 {
				break
			}
		}
	}
	return left, nil
}

// PromoteIfNone makes buildID current when the deployment has no current
// version (its first start); it says whether it did. An upgrade's new
// build is left for the operator to promote.
func (m Manager) PromoteIfNone(ctx context.Context, buildID string) (bool, error) {
	st, err := m.Status(ctx)
	if err != nil {
		return false, err
	}
	if st.Current() != "" {
		return false, nil
	}
	_, err = m.Promote(ctx, buildID)
	return err == nil, err
}

// Ramp sends percent of new exams to buildID and the rest to the
// current version (0 ends a ramp).
func (m Manager) Ramp(ctx context.Context, buildID string, percent float32) error {
	if percent < 0 || percent > 100 {
		return fmt.Errorf("ramp %v%%: a share is 0 to 100", percent)
	}
	opts := client.WorkerDeploymentSetRampingVersionOptions{BuildID: buildID, Percentage: percent, Identity: m.Identity}
	if percent == 0 {
		opts.BuildID = ""
	}
	if _, err := m.Client.WorkerDeploymentClient().GetHandle(m.Name).SetRampingVersion(ctx, opts); err != nil {
		return fmt.Errorf("ramp build %s to %v%% in deployment %s: %w", buildID, percent, m.Name, err)
	}
	return nil
}

// Rollback makes buildID (an earlier build whose workers still run)
// current again and ends any ramp: new exams start on it at once, while
// exams pinned to the build rolled back from finish there.
func (m Manager) Rollback(ctx context.Context, buildID string) (previous string, err error) {
	st, err := m.Status(ctx)
	if err != nil {
		return "", err
	}
	v, ok := st.Version(buildID)
	if !ok {
		return "", fmt.Errorf("deployment %s has no build %s", m.Name, buildID)
	}
	if !v.Polled {
		// Temporal keeps a version's queues after its workers stop: this
		// says they once polled, not that they still run.
		return "", fmt.Errorf("build %s never polled both pipeline queues: start its worker before rolling back to it", buildID)
	}
	for _, r := range st.Versions {
		if r.Ramping {
			if err := m.Ramp(ctx, r.BuildID, 0); err != nil {
				return "", err
			}
		}
	}
	return m.Promote(ctx, buildID)
}

// Retirement says whether a build may go: it is neither current nor
// ramping, and no workflow pinned to it still runs.
type Retirement struct {
	BuildID string
	MayGo   bool
	// Why, when it may not.
	Why string
}

// Retirable says whether buildID may go (its workers stopped, then
// Delete).
func (m Manager) Retirable(ctx context.Context, buildID string) (Retirement, error) {
	st, err := m.Status(ctx)
	if err != nil {
		return Retirement{}, err
	}
	v, ok := st.Version(buildID)
	r := Retirement{BuildID: buildID}
	switch {
	case !ok:
		r.Why = "the deployment has no such build"
	case v.Current:
		r.Why = "it is the current build"
	case v.Ramping:
		r.Why = fmt.Sprintf("it is ramping (%v%% of new exams)", v.RampPercent)
	case v.Running > 0:
		r.Why = fmt.Sprintf("%d workflows pinned to it still run (exams, reviews, exports; a promotion moves the fleet and the inboxes)", v.Running)
	case v.Running < 0 && v.Drainage != "drained":
		r.Why = "Temporal has not yet found it drained"
	default:
		r.MayGo = true
	}
	return r, nil
}

// Delete removes a retired build from the deployment, once its workers
// are stopped.
func (m Manager) Delete(ctx context.Context, buildID string) error {
	r, err := m.Retirable(ctx, buildID)
	if err != nil {
		return err
	}
	if !r.MayGo {
		return fmt.Errorf("build %s may not go yet: %s", buildID, r.Why)
	}
	if _, err := m.Client.WorkerDeploymentClient().GetHandle(m.Name).DeleteVersion(ctx,
		client.WorkerDeploymentDeleteVersionOptions{BuildID: buildID, Identity: m.Identity}); err != nil {
		return fmt.Errorf("delete build %s (stop its workers first): %w", buildID, err)
	}
	return nil
}

// VersionOf is the Worker Deployment Version of a build of deployment
// name.
func VersionOf(name, buildID string) worker.WorkerDeploymentVersion {
	return worker.WorkerDeploymentVersion{DeploymentName: name, BuildID: buildID}
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}
