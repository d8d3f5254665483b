package gpuworker

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
)

// How many figures a node keeps: its latest probes, and its latest runs
// of each stage.
const (
	probeWindow = 5
	stageWindow = 9
)

// Pace measures how fast the node computes, for the fleet's judgement of
// gray nodes (workflows.Judge): a probe timed at every report, the
// compute time of each stage that ended well, and the stage attempts in
// flight. It measures; the fleet judges, since a node cannot tell slow
// from normal without the others' figures.
type Pace struct {
	probe func(context.Context) error

	mu      sync.Mutex
	probes  []float64
	stages  map[exam.Stage][]float64
	running map[string]*contract.RunningStage
	// degraded: the fleet holds the node degraded, and its stage times
	// are not kept (see contract.NodePace.Stages).
	degraded bool
}

// NewPace measures with probe (nil: DenoiseProbe).
func NewPace(probe func(context.Context) error) *Pace {
	if probe == nil {
		probe = DenoiseProbe()
	}
	return &Pace{probe: probe, stages: map[exam.Stage][]float64{}, running: map[string]*contract.RunningStage{}}
}

// DenoiseProbe is the default probe: the denoise of one full-size B-scan
// (496 × 512) of a fixed phantom, about 30 ms on one core of a healthy
// machine. It exercises the node's compute path (CPU, memory, Go
// scheduler) as its stages do, and is the same work on every node.
func DenoiseProbe() func(context.Context) error {
	var (
		once  sync.Once
		scan  *imaging.Volume
		setup error
	)
	return func(ctx context.Context) error {
		once.Do(func() {
			scan = imaging.NewPhantom(imaging.PhantomOptions{Seed: 1, Frames: 1}).Volume
			setup = scan.Validate()
		})
		if setup != nil {
			return setup
		}
		_, err := imaging.Denoise(ctx, scan, imaging.DenoiseOptions{})
		return err
	}
}

// runProbe times one probe and keeps its figure.
func (p *Pace) runProbe(ctx context.Context) error {
	start := time.Now()
	if err := p.probe(ctx); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	ms := float64(time.Since(start).Microseconds()) / 1000
	p.mu.Lock()
	defer p.mu.Unlock()
	p.probes = keepLast(append(p.probes, ms), probeWindow)
	return nil
}

// take notes a stage attempt the node took; the returned funcs note when
// it starts computing and when it ends (ok: it ended well, after
// computing for held).
func (p *Pace) take(ctx context.Context, stage exam.Stage, bucket exam.Priority) (computing func(), end func(ok bool, held time.Duration)) {
	info := activity.GetInfo(ctx)
	key := info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID + "/" + info.ActivityID
	p.mu.Lock()
	p.running[key] = &contract.RunningStage{WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
		ActivityID: info.ActivityID, Stage: stage, Bucket: bucket, TakenAt: info.StartedTime.UTC()}
	p.mu.Unlock()
	computing = func() {
		now := time.Now().UTC()
		p.mu.Lock()
		defer p.mu.Unlock()
		if r := p.running[key]; r != nil {
			r.ComputingSince = &now
		}
	}
	end = func(ok bool, held time.Duration) {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.running, key)
		if ok && held > 0 && !p.degraded {
			p.stages[stage] = keepLast(append(p.stages[stage], float64(held.Microseconds())/1000), stageWindow)
		}
	}
	return computing, end
}

// setDegraded says whether the fleet holds the node degraded; while it
// does, the node's stage times are dropped.
func (p *Pace) setDegraded(degraded bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.degraded = degraded
	if degraded {
		clear(p.stages)
	}
}

// Report is what the node says of its pace, for GPUs of model.
func (p *Pace) Report(model string) *contract.NodePace {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := &contract.NodePace{Model: model, ProbeMs: contract.Median(p.probes), Probes: len(p.probes)}
	for stage, runs := range p.stages {
		if len(runs) == 0 {
			continue
		}
		if out.Stages == nil {
			out.Stages = map[exam.Stage]contract.StagePace{}
		}
		out.Stages[stage] = contract.StagePace{MedianMs: contract.Median(runs), Runs: len(runs)}
	}
	for _, r := range p.running {
		c := *r
		out.Running = append(out.Running, c)
	}
	sort.Slice(out.Running, func(i, j int) bool { return out.Running[i].TakenAt.Before(out.Running[j].TakenAt) })
	return out
}

// keepLast is the last n of xs.
func keepLast(xs []float64, n int) []float64 {
	if len(xs) > n {
		return slices.Clone(xs[len(xs)-n:])
	}
	return xs
}
