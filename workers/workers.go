// Package workers is octflow's pipeline worker: the workflows on
// oct-workflows, and on oct-cpu the pipeline's CPU stages (report,
// notify), the PACS export and, beside them, housekeeping (the review
// archive, the scan sweep and its schedule), each from options of its
// own (Start). It holds the Temporal adapters those activities reach
// Temporal through (InboxPublisher, ScanIndex). GPU stages are served
// by gpuworker nodes; package app dials the client and holds the
// process's metrics registry.
package workers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"octflow/activities"
	"octflow/codec"
	"octflow/contract"
	"octflow/exam"
	"octflow/lifecycle"
	"octflow/workflows"
)

// PipelineOptions are the pipeline worker's: it runs the workflows on
// exam.WorkflowQueue, and the pipeline's CPU stages and the PACS export
// on exam.CPUQueue.
type PipelineOptions struct {
	// Identity names this process in Temporal, and the worker in exam
	// timelines (its stages' Node).
	Identity string
	// Stages are the pipeline the exams run through: the workflows run
	// it, and the worker its CPU stages (nil: activities.Pipeline()).
	Stages activities.Stages
	// Common are what its CPU stages run through: the process's object
	// store, stage logger, served models and stage metrics.
	Common activities.Common
	// Webhooks deliver report-ready events to workstations (nil: an exam
	// with a callback URL fails its notify stage).
	Webhooks *activities.Webhooks
	// PACS names each campus's PACS, which its results are exported to
	// (none: nothing is exported); Identities open the identities they
	// are filed under.
	PACS       map[string]activities.PACSTarget
	Identities *codec.Codec
	// Installation names this octflow installation, the device the
	// exported results name.
	Installation string
	// Interceptors wrap the activities of the CPU queue (the CPU stages,
	// the export and housekeeping), e.g. for tracing; the tests inject
	// faults with them.
	Interceptors []interceptor.WorkerInterceptor
	// StopTimeout is how long Stop lets running stages finish (default 90 s).
	StopTimeout time.Duration
	// Deployment is the Worker Deployment Version the worker polls as
	// (Worker Versioning, decision 28): its workflows are pinned to it,
	// and its CPU queue's activities of those workflows come back to it.
	// Temporal sends it new workflows once the version is the
	// deployment's current (or ramping) one (package deployment). Zero:
	// an unversioned worker, which takes the tasks of a deployment with
	// no current version.
	Deployment worker.WorkerDeploymentVersion
}

// HousekeepingOptions are housekeeping's: the review archive and the
// scan sweep, run beside the pipeline's CPU stages on its queue, and the
// sweep's schedule.
type HousekeepingOptions struct {
	// Store is the object store that reviews are archived to and the
	// sweep clears.
	Store interface {
		activities.ObjectStore
		activities.ScanStore
	}
	Logger *zap.Logger
	// Converters decode what Temporal stores: the converters the client
	// was built with (the sweep reads an exam's memo).
	Converters lifecycle.Converters
	// SweepEvery is how often the scan sweep runs (0: no schedule is
	// made); SweepGrace how old a scan must be before it may go.
	SweepEvery, SweepGrace time.Duration
}

// Start runs the pipeline worker and, beside its CPU stages on its CPU
// queue, housekeeping, until Stop. Both are registered on the one worker
// of that queue: every worker polling a queue must run every activity
// sent there, or a task it takes fails as unregistered.
func Start(c client.Client, p PipelineOptions, h HousekeepingOptions) (*Workers, error) {
	if p.StopTimeout == 0 {
		p.StopTimeout = 90 * time.Second
	}
	if p.Stages == nil {
		p.Stages = activities.Pipeline()
	}
	wfOpts := WorkflowWorkerOptions(p.Identity, p.StopTimeout)
	wfOpts.DeploymentOptions = deploymentOptions(p.Deployment)
	wf := worker.New(c, exam.WorkflowQueue, wfOpts)
	if err := workflows.Register(wf, p.Stages.Specs()); err != nil {
		return nil, err
	}

	cpu := worker.New(c, exam.CPUQueue, worker.Options{Identity: p.Identity, WorkerStopTimeout: p.StopTimeout,
		MaxConcurrentActivityTaskPollers: cpuPollers, Interceptors: p.Interceptors,
		DeploymentOptions: deploymentOptions(p.Deployment)})
	inbox := InboxPublisher{Client: c}
	acts := &activities.Activities{Common: p.Common, Node: p.Identity, Pipeline: p.Stages.Specs(),
		Workstations: &activities.Workstations{Webhooks: p.Webhooks, Inbox: inbox}}
	activities.RegisterStages(cpu, acts, p.Stages, false)
	activities.RegisterExport(cpu, &activities.Exporter{Store: p.Common.Store, Logger: p.Common.Logger, Inbox: inbox,
		Targets: p.PACS, Identities: p.Identities, Installation: p.Installation})
	activities.RegisterHousekeeping(cpu, &activities.Housekeeping{Store: h.Store, Scans: h.Store, Logger: h.Logger,
		Index: ScanIndex{Client: c, Converters: h.Converters}})

	if err := wf.Start(); err != nil {
		return nil, fmt.Errorf("start workflow worker: %w", err)
	}
	if err := cpu.Start(); err != nil {
		wf.Stop()
		return nil, fmt.Errorf("start cpu worker: %w", err)
	}
	if h.SweepEvery > 0 {
		if err := scheduleSweep(c, h.SweepEvery, h.SweepGrace); err != nil {
			wf.Stop()
			cpu.Stop()
			return nil, err
		}
	}
	return &Workers{all: []worker.Worker{wf, cpu}}, nil
}

// Worker tuning, measured with `octflow bench` on a 2-core machine (see
// the README's benchmark section).
const (
	// workflowPollers: with the SDK's default of 2, workflow tasks queued
	// behind the two pollers' round trips during a burst (hundreds in
	// the queue, exams CREATED for a minute while GPUs idled).
	workflowPollers = 8
	// stickyTimeout: a workflow task waits this long on the worker's
	// sticky queue (where the exam's history is cached) before any
	// worker may take it with the whole history; the default 5 s
	// expired in bursts and turned cheap tasks into full replays.
	stickyTimeout = 30 * time.Second
	// cpuPollers poll the CPU stage queue.
	cpuPollers = 4
	// deadlockAfter: how long workflow code may run without yielding
	// before the SDK calls it a deadlock and fails the workflow task.
	// The SDK's 1 s is wall time: on a saturated host (a 2,400-exam
	// burst on 2 cores) a campus's inbox replaying its history was
	// descheduled past it three times, each a failed task and a retry.
	// Workflow code here never blocks; 5 s still catches one that loops.
	deadlockAfter = 5 * time.Second
)

// WorkflowWorkerOptions are the options of a workflow worker (the
// benchmark's bare-engine run uses the same).
func WorkflowWorkerOptions(identity string, stopTimeout time.Duration) worker.Options {
	return worker.Options{Identity: identity, WorkerStopTimeout: stopTimeout,
		MaxConcurrentWorkflowTaskPollers: workflowPollers, StickyScheduleToStartTimeout: stickyTimeout,
		DeadlockDetectionTimeout: deadlockAfter}
}

// deploymentOptions declare a worker's Deployment Version. Both of the
// pipeline worker's queues declare the same one, so that the CPU stages
// of a pinned exam run on its build; the GPU queues are in no version
// (gpuworker): their stages are the contract's, served to every build.
func deploymentOptions(v worker.WorkerDeploymentVersion) worker.DeploymentOptions {
	if v.DeploymentName == "" {
		return worker.DeploymentOptions{}
	}
	return worker.DeploymentOptions{UseVersioning: true, Version: v,
		DefaultVersioningBehavior: workflow.VersioningBehaviorPinned}
}

// scheduleSweep makes the schedule that runs the scan sweep, once: every
// worker asks, the first one's schedule stands.
func scheduleSweep(c client.Client, every, grace time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:      contract.ScanSweepScheduleID,
		Spec:    client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}},
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		Action: &client.ScheduleWorkflowAction{ID: contract.ScanSweepWorkflowID, Workflow: contract.ScanSweepWorkflow,
			Args: []any{contract.SweepInput{Grace: grace}}, TaskQueue: exam.WorkflowQueue},
	})
	if err != nil && !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return fmt.Errorf("schedule the scan sweep: %w", err)
	}
	return nil
}

// ScanIndex looks up, in Temporal, whether an exam took a stored scan.
type ScanIndex struct {
	Client     client.Client
	Converters lifecycle.Converters
}

// ScanInUse reports whether the exam's latest run was submitted with the
// scan whose digest starts with digest. False also when Temporal does
// not know the exam: the sweep takes only a true answer as evidence.
func (x ScanIndex) ScanInUse(ctx context.Context, ref exam.Ref, digest string) (bool, error) {
	desc, err := x.Client.DescribeWorkflowExecution(ctx, contract.ExamWorkflowID(ref), "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return false, nil
	case err != nil:
		return false, err
	}
	return strings.HasPrefix(x.Converters.MemoString(desc, contract.MemoScanDigest), digest), nil
}

// Workers are running workers.
type Workers struct{ all []worker.Worker }

// Stop stops polling on all workers at once and waits for running tasks
// (up to the stop timeout).
func (w *Workers) Stop() {
	var wg sync.WaitGroup
	for _, x := range w.all {
		wg.Go(x.Stop)
	}
	wg.Wait()
}
