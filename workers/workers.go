// Package workers wires octflow's Temporal workers: the workflow worker on
// oct-workflows and the CPU stage worker (report, notify) on oct-cpu. GPU
// stages are served by gpuworker nodes. It also dials the Temporal client
// every octflow process uses.
package workers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"octflow/activities"
	"octflow/exam"
	"octflow/workflows"
)

// Dial connects to Temporal, waiting up to a minute for it to answer.
// metrics may be nil.
func Dial(ctx context.Context, hostPort, namespace, identity string, logger *zap.Logger, metrics client.MetricsHandler) (client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var lastErr error
	for {
		c, err := client.DialContext(ctx, client.Options{
			HostPort:       hostPort,
			Namespace:      namespace,
			Identity:       identity,
			Logger:         SDKLogger(logger),
			MetricsHandler: metrics,
		})
		if err == nil {
			return c, nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dial temporal at %s: %w", hostPort, lastErr)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Options tune the CPU-side workers.
type Options struct {
	// Identity names this process in Temporal (and in exam timelines).
	Identity string
	// StopTimeout is how long Stop lets running stages finish (default 90 s).
	StopTimeout time.Duration
}

// Start runs the workflow worker and the CPU stage worker until Stop.
func Start(c client.Client, acts *activities.Activities, opts Options) (*Workers, error) {
	if opts.StopTimeout == 0 {
		opts.StopTimeout = 90 * time.Second
	}
	wf := worker.New(c, exam.WorkflowQueue, worker.Options{Identity: opts.Identity, WorkerStopTimeout: opts.StopTimeout})
	// Stage workers spread their retries (see RetryJitter).
	stageInterceptors := []interceptor.WorkerInterceptor{&RetryJitter{Node: opts.Identity}}
	workflows.Register(wf)

	cpu := worker.New(c, exam.CPUQueue, worker.Options{Identity: opts.Identity, WorkerStopTimeout: opts.StopTimeout,
		Interceptors: stageInterceptors})
	cpuActs := *acts
	cpuActs.Node = opts.Identity
	cpuActs.Inbox = InboxPublisher{Client: c}
	cpu.RegisterActivityWithOptions(cpuActs.RenderReport, activity.RegisterOptions{Name: exam.Render.ActivityName()})
	cpu.RegisterActivityWithOptions(cpuActs.NotifyWorkstation, activity.RegisterOptions{Name: exam.Notify.ActivityName()})

	if err := wf.Start(); err != nil {
		return nil, fmt.Errorf("start workflow worker: %w", err)
	}
	if err := cpu.Start(); err != nil {
		wf.Stop()
		return nil, fmt.Errorf("start cpu worker: %w", err)
	}
	return &Workers{all: []worker.Worker{wf, cpu}}, nil
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

// SDKLogger adapts zap to the Temporal SDK's logger.
func SDKLogger(z *zap.Logger) sdklog.Logger {
	return sdkLogger{z.WithOptions(zap.AddCallerSkip(1)).Sugar()}
}

type sdkLogger struct{ s *zap.SugaredLogger }

func (l sdkLogger) Debug(msg string, kv ...any) { l.s.Debugw(msg, kv...) }
func (l sdkLogger) Info(msg string, kv ...any)  { l.s.Infow(msg, kv...) }
func (l sdkLogger) Warn(msg string, kv ...any)  { l.s.Warnw(msg, kv...) }
func (l sdkLogger) Error(msg string, kv ...any) { l.s.Errorw(msg, kv...) }
