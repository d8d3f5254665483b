package gpuworker

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
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
	probe      func(context.Context) error
	probing    atomic.Bool  // a probe runs
	probeStart atomic.Int64 // since when (Unix nanoseconds)

	mu      sync.Mutex
	probes  []float64
	stages  map[exam.Stage][]float64
	running map[string]*held
	// degraded: the fleet holds the node degraded, and its stage times
	// are not kept (see contract.NodePace.Stages).
	degraded bool
}

// held is a stage attempt the node holds: taken when, computing since
// when (zero: not computing now).
type held struct {
	stage          contract.RunningStage
	taken, started time.Time
}

// NewPace measures with probe (nil: DenoiseProbe).
func NewPace(probe func(context.Context) error) *Pace {
	if probe == nil {
		probe = DenoiseProbe()
	}
	return &Pace{probe: probe, stages: map[exam.Stage][]float64{}, running: map[string]*held{}}
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

// runProbe times one probe and keeps its figure. A probe still running
// after limit is kept as taking limit, and the report goes on without
// it; while it runs no other starts, and each report keeps how long it
// has run so far, so a hung probe reads as slow, not as no figure.
func (p *Pace) runProbe(ctx context.Context, limit time.Duration) error {
	if !p.probing.CompareAndSwap(false, true) {
		p.keepProbe(time.Since(time.Unix(0, p.probeStart.Load())))
		return nil
	}
	start := time.Now()
	p.probeStart.Store(start.UnixNano())
	done := make(chan error, 1)
	go func() {
		err := p.probe(ctx)
		p.probing.Store(false)
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(limit):
	case <-ctx.Done():
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	p.keepProbe(time.Since(start))
	return nil
}

// keepProbe keeps a probe's figure.
func (p *Pace) keepProbe(took time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.probes = keepLast(append(p.probes, float64(took.Microseconds())/1000), probeWindow)
}

// take notes a stage attempt the node took; the returned funcs note when
// it starts and stops computing (its GPU bound, then freed) and when it
// ends (ok: it ended well, after computing for heldGPU).
func (p *Pace) take(ctx context.Context, stage exam.Stage, bucket exam.Priority) (computing func(bool), end func(ok bool, heldGPU time.Duration)) {
	info := activity.GetInfo(ctx)
	key := info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID + "/" + info.ActivityID
	p.mu.Lock()
	p.running[key] = &held{taken: time.Now(), stage: contract.RunningStage{WorkflowID: info.WorkflowExecution.ID,
		RunID: info.WorkflowExecution.RunID, ActivityID: info.ActivityID, Stage: stage, Bucket: bucket}}
	p.mu.Unlock()
	computing = func(on bool) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if h := p.running[key]; h != nil {
			h.started = time.Time{}
			if on {
				h.started = time.Now()
			}
		}
	}
	end = func(ok bool, heldGPU time.Duration) {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.running, key)
		if ok && heldGPU > 0 && !p.degraded {
			p.stages[stage] = keepLast(append(p.stages[stage], float64(heldGPU.Microseconds())/1000), stageWindow)
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
	now := time.Now()
	for _, h := range p.running {
		r := h.stage
		r.Held = now.Sub(h.taken)
		if !h.started.IsZero() {
			r.Computing = now.Sub(h.started)
		}
		out.Running = append(out.Running, r)
	}
	// The longest held first.
	sort.Slice(out.Running, func(i, j int) bool { return out.Running[i].Held > out.Running[j].Held })
	return out
}

// keepLast is the last n of xs.
func keepLast(xs []float64, n int) []float64 {
	if len(xs) > n {
		return slices.Clone(xs[len(xs)-n:])
	}
	return xs
}
