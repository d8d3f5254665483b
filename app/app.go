// Package app assembles an octflow process from its parts: it connects
// to Temporal and the object store, and starts whichever of the HTTP
// gateway, the workflow and CPU workers and the GPU nodes the process
// runs. It stops them in dependency order, draining running stages. The
// command (cmd/octflow) only reads the configuration and calls it.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"octflow/activities"
	"octflow/api"
	"octflow/config"
	"octflow/exam"
	"octflow/gpuworker"
	"octflow/inference"
	"octflow/storage"
	"octflow/workers"
)

// Options say which parts of octflow this process runs.
type Options struct {
	Stack    config.Stack
	Identity string
	Logger   *zap.Logger

	// APIAddr, when set, serves the HTTP gateway there.
	APIAddr       string
	Tokens        *api.Tokens
	Pseudonymizer *api.Pseudonymizer
	Policy        exam.Policy
	DeviceRate    api.RateLimit

	// Workers runs the workflow worker and the CPU stages.
	Workers bool
	// GPUNodes runs these GPU nodes in this process.
	GPUNodes []gpuworker.Config
	// StopTimeout bounds the drain of workers and nodes (default 90 s).
	StopTimeout time.Duration
	// Webhooks deliver report-ready events (workers); Callbacks checks
	// callback URLs at submission (api).
	Webhooks  *activities.Webhooks
	Callbacks *activities.CallbackGuard
	// Metrics is the process's registry (default: a new one). The API
	// serves it at /metrics; MetricsAddr serves it on its own port.
	Metrics     *workers.Metrics
	MetricsAddr string
	// NodeReportEvery is how often GPU nodes report to the fleet (default 10 s).
	NodeReportEvery time.Duration
	// Faults injects stage failures (tests and simulation only).
	Faults activities.FaultFunc
	// Backends run the image stages (default: the reference algorithms).
	Backends inference.Backends
}

// App is a running set of octflow parts.
type App struct {
	log     *zap.Logger
	client  client.Client
	store   *storage.Store
	workers *workers.Workers
	nodes   []*gpuworker.Node
	http    *http.Server
	apiAddr string
	served  chan error
	metrics *workers.Metrics
	mhttp   *http.Server
}

// Start connects to Temporal and S3 and starts the parts opts asks for.
func Start(ctx context.Context, opts Options) (_ *App, err error) {
	a := &App{log: opts.Logger}
	defer func() {
		if err != nil {
			a.Stop()
		}
	}()
	if a.store, err = storage.OpenRetrying(ctx, opts.Stack.S3, 30*time.Second); err != nil {
		return nil, fmt.Errorf("object store: %w", err)
	}
	a.metrics = opts.Metrics
	if a.metrics == nil {
		a.metrics = workers.NewMetrics()
	}
	if a.client, err = workers.Dial(ctx, opts.Stack.TemporalAddr, opts.Stack.Namespace, opts.Identity, opts.Logger.Named("sdk"), a.metrics.SDK); err != nil {
		return nil, err
	}
	if opts.MetricsAddr != "" {
		ln, err := net.Listen("tcp", opts.MetricsAddr)
		if err != nil {
			return nil, fmt.Errorf("metrics listen: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", a.metrics.Handler())
		a.mhttp = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go a.mhttp.Serve(ln)
	}
	acts := &activities.Activities{Store: a.store, Logger: opts.Logger.Named("stage"), Faults: opts.Faults,
		Webhooks: opts.Webhooks, Backends: opts.Backends}

	if opts.Workers {
		if a.workers, err = workers.Start(a.client, acts, workers.Options{Identity: opts.Identity, StopTimeout: opts.StopTimeout}); err != nil {
			return nil, err
		}
	}
	for _, nc := range opts.GPUNodes {
		if nc.DrainTimeout == 0 {
			nc.DrainTimeout = opts.StopTimeout
		}
		if nc.ReportEvery == 0 {
			nc.ReportEvery = opts.NodeReportEvery
		}
		nc.Logger = opts.Logger.Named("gpu-node")
		n, err := gpuworker.Start(a.client, acts, nc)
		if err != nil {
			return nil, err
		}
		a.nodes = append(a.nodes, n)
	}
	if opts.APIAddr != "" {
		gw, err := api.New(api.Config{
			Temporal: a.client, Namespace: opts.Stack.Namespace, Store: a.store, Tokens: opts.Tokens, Pseudonymizer: opts.Pseudonymizer,
			Logger: opts.Logger.Named("api"), Policy: opts.Policy, Metrics: a.metrics.Handler(), Registerer: a.metrics.Registry,
			Callbacks: opts.Callbacks, DeviceRate: opts.DeviceRate,
		})
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", opts.APIAddr)
		if err != nil {
			return nil, fmt.Errorf("api listen: %w", err)
		}
		a.apiAddr = ln.Addr().String()
		a.http = &http.Server{Handler: gw, ReadHeaderTimeout: 10 * time.Second}
		a.served = make(chan error, 1)
		go func() { a.served <- a.http.Serve(ln) }()
	}
	return a, nil
}

// APIURL is the gateway's base URL.
func (a *App) APIURL() string { return "http://" + a.apiAddr }

// Client is the process's Temporal client.
func (a *App) Client() client.Client { return a.client }

// Store is the process's object store.
func (a *App) Store() *storage.Store { return a.store }

// Stop shuts down in dependency order: stop accepting requests, drain the
// GPU nodes and workers (running stages finish), then close the client.
func (a *App) Stop() {
	if a.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := a.http.Shutdown(ctx); err != nil {
			a.log.Warn("api shutdown", zap.Error(err))
		}
		cancel()
		if err := <-a.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Warn("api stopped", zap.Error(err))
		}
		a.http = nil
	}
	// All nodes stop polling at once and drain side by side: one node
	// still taking work while another drains would defeat the drain.
	var wg sync.WaitGroup
	for _, n := range a.nodes {
		wg.Go(n.Stop)
	}
	wg.Wait()
	a.nodes = nil
	if a.workers != nil {
		a.workers.Stop()
		a.workers = nil
	}
	if a.client != nil {
		a.client.Close()
		a.client = nil
	}
	if a.mhttp != nil {
		a.mhttp.Close()
		a.mhttp = nil
	}
	if a.metrics != nil {
		a.metrics.Close()
		a.metrics = nil
	}
}

// Run runs the parts opts asks for until ctx ends (SIGINT or SIGTERM),
// then drains them.
func Run(ctx context.Context, opts Options) error {
	a, err := Start(ctx, opts)
	if err != nil {
		return err
	}
	opts.Logger.Info("octflow running", zap.String("identity", opts.Identity), zap.String("api", a.apiAddr))
	<-ctx.Done()
	opts.Logger.Info("shutting down: draining running stages")
	a.Stop()
	return nil
}
