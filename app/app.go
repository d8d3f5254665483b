// Package app assembles an octflow process from its parts: it connects
// to Temporal and the object store, and starts whichever of its roles
// the process runs, each from options of its own: the HTTP gateway
// (GatewayOptions), the pipeline worker with housekeeping
// (WorkerOptions) and GPU nodes (GPUOptions). It stops them in
// dependency order, draining running stages. The command
// (cmd/octflow/internal/cli) only reads the configuration and calls it.
package app

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net/http"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"octflow/activities"
	"octflow/api"
	"octflow/codec"
	"octflow/config"
	"octflow/deployment"
	"octflow/exam"
	"octflow/gpuworker"
	"octflow/inference"
	"octflow/internal/listen"
	"octflow/lifecycle"
	"octflow/storage"
	"octflow/workers"
)

// Options say which parts of octflow this process runs: what its parts
// share, then the options of each role, nil for a role it does not run
// (the SDK's client.Options and worker.Options are the model).
type Options struct {
	Stack    config.Stack
	Identity string
	Logger   *zap.Logger
	// Stages are the pipeline the workers and GPU nodes run (nil:
	// activities.Pipeline(), the shipped one).
	Stages activities.Stages
	// Models are the served models of the stages pointed at one (see
	// activities.Common.Models; none: the reference implementations).
	Models map[exam.Stage]inference.Model
	// StopTimeout bounds the drain of workers and nodes (default 90 s).
	StopTimeout time.Duration
	// Metrics is the process's registry (default: a new one, for
	// Stages). MetricsAddr serves it at /metrics on a listener of its
	// own; the gateway's public port never does. MetricsTLS, when set,
	// serves it over HTTPS only, and its certificate's expiry is
	// exported (use metrics-server).
	Metrics     *Metrics
	MetricsAddr string
	MetricsTLS  *tls.Config
	// Codec seals what this process sends through Temporal (nil: nothing
	// is sealed, which only the dev stack allows).
	Codec *codec.Codec
	// TemporalTLS secures the connection to Temporal (nil: plain).
	TemporalTLS *tls.Config
	// CertificateFiles are certificates (PEM) the process exports the
	// expiry of though it uses none of them: the services' that export no
	// metrics of their own (the S3 endpoint's, the audit collector's, the
	// CA's, …), each under its file's name, read again at every scrape.
	CertificateFiles []string
	// ClientInterceptors wrap every call this process makes to Temporal;
	// WorkerInterceptors, given a worker's or GPU node's identity, wrap
	// the activities it runs (after a node's own interceptor, which binds
	// each stage's GPU). For tracing; the tests inject faults with them.
	ClientInterceptors []interceptor.ClientInterceptor
	WorkerInterceptors func(identity string) []interceptor.WorkerInterceptor

	// Gateway, when set, serves the HTTP gateway.
	Gateway *GatewayOptions
	// Worker, when set, runs the pipeline worker and housekeeping.
	Worker *WorkerOptions
	// GPU, when set, runs GPU nodes in this process.
	GPU *GPUOptions
}

// GatewayOptions are the HTTP gateway's: where and how it listens, and
// its own configuration.
type GatewayOptions struct {
	// Addr is where it listens; TLS, when set, serves it over HTTPS.
	Addr string
	TLS  *tls.Config
	// HTTP bounds the gateway's connections (zero fields: the defaults,
	// config.DefaultHTTPLimits).
	HTTP config.HTTPLimits
	// API is the gateway's configuration. App sets in it the parts the
	// process holds, replacing what API has there: Temporal (the
	// process's client), Namespace, Store, Logger, Registerer (the
	// process's registry), Converters, and PayloadCodec (the process's
	// Codec; none when that is nil).
	API api.Config
}

// WorkerOptions are the pipeline worker's and housekeeping's, which run
// together (workers.Start). App sets in them the parts the process
// holds, replacing what they have there: the pipeline's Identity, Stages
// and Common, and housekeeping's Store, Logger and Converters; it adds
// the process's WorkerInterceptors to the pipeline's Interceptors, and
// gives it the process's StopTimeout where it sets none of its own.
type WorkerOptions struct {
	Pipeline     workers.PipelineOptions
	Housekeeping workers.HousekeepingOptions
	// PromoteFirst makes a versioned worker's build the deployment's
	// current one once it polls, when the deployment has none (its first
	// start); an upgrade's build is left to the operator (octflow
	// deployment promote). It needs a Temporal client that may move a
	// deployment: the dev system's, not the production worker's.
	PromoteFirst bool
}

// GPUOptions are the GPU nodes' this process runs.
type GPUOptions struct {
	// Nodes are the nodes. Each runs its stages with the process's
	// parts (gpuworker.Config.Common), and the process's Stages,
	// StopTimeout and the fields below where it sets none of its own.
	Nodes []gpuworker.Config
	// ReportEvery is how often nodes report to the fleet (default 10 s).
	ReportEvery time.Duration
	// SimulatedCompute is the simulated GPU time of the benchmark's
	// simulated nodes (see activities.GPUNode).
	SimulatedCompute activities.SimulatedComputeFunc
}

// runsStages says whether the process runs stages: a worker or a GPU
// node.
func (o Options) runsStages() bool {
	return o.Worker != nil || o.GPU != nil && len(o.GPU.Nodes) > 0
}

// workerInterceptors are the interceptors of the worker or node named
// identity (none unless WorkerInterceptors is set).
func (o Options) workerInterceptors(identity string) []interceptor.WorkerInterceptor {
	if o.WorkerInterceptors == nil {
		return nil
	}
	return o.WorkerInterceptors(identity)
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
	scheme  string // "https" when the gateway serves TLS
	served  chan error
	metrics *Metrics
	mhttp   *http.Server
	maddr   string // the metrics listener's address
	mscheme string // "https" when it serves TLS
	conv    lifecycle.Converters
}

// Start connects to Temporal and S3 and starts the parts opts asks for.
func Start(ctx context.Context, opts Options) (_ *App, err error) {
	a := &App{log: opts.Logger}
	defer func() {
		if err != nil {
			a.Stop()
		}
	}()
	if a.store, err = storage.OpenRetrying(ctx, storageConfig(opts.Stack.S3), 30*time.Second); err != nil {
		return nil, fmt.Errorf("object store: %w", err)
	}
	if opts.Stages == nil {
		opts.Stages = activities.Pipeline()
	}
	a.metrics = opts.Metrics
	if a.metrics == nil {
		a.metrics = NewMetrics(opts.Stages.Specs())
	}
	if err := registerStoreCounts(a.metrics.Registry, a.store); err != nil {
		return nil, err
	}
	certs, err := a.watchCertificates(opts)
	if err != nil {
		return nil, err
	}
	dc, fc := codec.Converters(opts.Codec)
	conv := lifecycle.Converters{Data: dc, Failure: fc}
	a.conv = conv
	if a.client, err = Dial(ctx, DialOptions{HostPort: opts.Stack.TemporalAddr, Namespace: opts.Stack.Namespace,
		Identity: opts.Identity, Logger: opts.Logger.Named("sdk"), Metrics: a.metrics.SDK, Converters: conv,
		TLS:         certs.checking("temporal-server", opts.TemporalTLS),
		Compression: opts.Stack.TemporalCompression, Interceptors: opts.ClientInterceptors}); err != nil {
		return nil, err
	}
	if err := a.serveMetrics(opts); err != nil {
		return nil, err
	}
	var stageMetrics *activities.StageMetrics
	if opts.runsStages() {
		if stageMetrics, err = activities.NewStageMetrics(a.metrics.Registry, opts.Stages.Specs()); err != nil {
			return nil, fmt.Errorf("stage metrics: %w", err)
		}
	}
	common := activities.Common{Store: a.store, Logger: opts.Logger.Named("stage"), Models: opts.Models, Metrics: stageMetrics}
	if opts.Worker != nil {
		if err := a.startWorkers(opts, common, conv); err != nil {
			return nil, err
		}
	}
	if opts.GPU != nil {
		if err := a.startNodes(opts, common); err != nil {
			return nil, err
		}
	}
	if opts.Gateway != nil {
		if err := a.serveGateway(opts, conv); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// startNodes starts the GPU nodes of opts.GPU, their stages run with
// common.
func (a *App) startNodes(opts Options, common activities.Common) error {
	g := opts.GPU
	for _, nc := range g.Nodes {
		if nc.DrainTimeout == 0 {
			nc.DrainTimeout = opts.StopTimeout
		}
		if nc.ReportEvery == 0 {
			nc.ReportEvery = g.ReportEvery
		}
		if nc.SimulatedCompute == nil {
			nc.SimulatedCompute = g.SimulatedCompute
		}
		if nc.Stages == nil {
			nc.Stages = opts.Stages
		}
		nc.Logger = opts.Logger.Named("gpu-node")
		nc.Common = common
		nc.Interceptors = append(nc.Interceptors, opts.workerInterceptors(nc.NodeID)...)
		n, err := gpuworker.Start(a.client, nc)
		if err != nil {
			return err
		}
		a.nodes = append(a.nodes, n)
	}
	return nil
}

// startWorkers starts the pipeline worker and housekeeping of
// opts.Worker, its stages run with common, reading Temporal with conv.
func (a *App) startWorkers(opts Options, common activities.Common, conv lifecycle.Converters) (err error) {
	p, h := opts.Worker.Pipeline, opts.Worker.Housekeeping
	p.Identity, p.Stages, p.Common = opts.Identity, opts.Stages, common
	p.Interceptors = append(p.Interceptors, opts.workerInterceptors(opts.Identity)...)
	p.StopTimeout = cmp.Or(p.StopTimeout, opts.StopTimeout)
	h.Store, h.Logger, h.Converters = a.store, opts.Logger.Named("housekeeping"), conv
	if a.workers, err = workers.Start(a.client, p, h); err != nil {
		return err
	}
	if d := p.Deployment; d.DeploymentName != "" {
		opts.Logger.Info("pipeline worker versioned", zap.String("deployment", d.DeploymentName), zap.String("build", d.BuildID))
		if opts.Worker.PromoteFirst {
			return promoteFirst(a.client, d.DeploymentName, d.BuildID, opts.Logger)
		}
	}
	return nil
}

// promoteFirst makes build current in a deployment that has no current
// build, once its workers poll.
func promoteFirst(c client.Client, name, build string, log *zap.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := deployment.Manager{Client: c, Name: name, Identity: "octflow first start"}
	if err := m.WaitPolled(ctx, build, 200*time.Millisecond); err != nil {
		return err
	}
	done, err := m.PromoteIfNone(ctx, build)
	if err != nil {
		return fmt.Errorf("promote the first build: %w", err)
	}
	if done {
		log.Info("first start: this build is the deployment's current", zap.String("deployment", name), zap.String("build", build))
	}
	return nil
}

// serveGateway serves the HTTP gateway of opts.Gateway, reading Temporal
// with conv.
func (a *App) serveGateway(opts Options, conv lifecycle.Converters) error {
	g := opts.Gateway
	cfg := g.API
	cfg.Temporal, cfg.Namespace, cfg.Store = a.client, opts.Stack.Namespace, a.store
	cfg.Logger, cfg.Registerer, cfg.Converters = opts.Logger.Named("api"), a.metrics.Registry, conv
	cfg.PayloadCodec = nil
	if opts.Codec != nil {
		cfg.PayloadCodec = opts.Codec
	}
	gw, err := api.New(cfg)
	if err != nil {
		return err
	}
	ln, err := listen.Listen(g.Addr, g.TLS)
	if err != nil {
		return fmt.Errorf("api listen: %w", err)
	}
	a.apiAddr = ln.Addr().String()
	if g.TLS != nil {
		a.scheme = "https"
	}
	// Headers must come at once, a request is read within a minute
	// and answered within two, idle connections go. Uploads lift the
	// read and write timeouts for a pace of their own (a deadline
	// between reads and a minimum rate); event streams lift them and
	// bound each write. The server's own complaints (a failed TLS
	// handshake, a client speaking HTTP to HTTPS) go to the log, not
	// to stderr.
	errLog, err := zap.NewStdLogAt(opts.Logger.Named("http"), zapcore.InfoLevel)
	if err != nil {
		ln.Close()
		return err
	}
	a.http = gatewayServer(gw, g.HTTP, errLog)
	a.served = make(chan error, 1)
	go func() { a.served <- a.http.Serve(ln) }()
	return nil
}

// watchCertificates exports when the certificates this process holds
// (the gateway's, its client certificate for Temporal, its metrics
// listener's), Temporal's (through the checker it gives, for the
// client's TLS) and those of the files it watches expire.
func (a *App) watchCertificates(opts Options) (*certificateExpiry, error) {
	certs := newCertificateExpiry(opts.Logger.Named("certificates"))
	var apiTLS *tls.Config
	if opts.Gateway != nil {
		apiTLS = opts.Gateway.TLS
	}
	if err := errors.Join(certs.hold("api-server", apiTLS), certs.hold("temporal-client", opts.TemporalTLS),
		certs.hold("metrics-server", opts.MetricsTLS), certs.watch(opts.CertificateFiles), certs.register(a.metrics.Registry)); err != nil {
		return nil, err
	}
	return certs, nil
}

// serveMetrics serves the process's registry at /metrics on
// opts.MetricsAddr, a listener of its own (none: nothing), over HTTPS
// only when opts.MetricsTLS is set; the server's complaints (a scraper
// speaking HTTP to it) go to the log.
func (a *App) serveMetrics(opts Options) error {
	if opts.MetricsAddr == "" {
		return nil
	}
	errLog, err := zap.NewStdLogAt(opts.Logger.Named("metrics-http"), zapcore.InfoLevel)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", a.metrics.Handler())
	if a.mhttp, a.maddr, err = listen.Metrics(opts.MetricsAddr, opts.MetricsTLS, mux, errLog); err != nil {
		return fmt.Errorf("metrics listen: %w", err)
	}
	if opts.MetricsTLS != nil {
		a.mscheme = "https"
	}
	return nil
}

// gatewayServer is the gateway's HTTP server under lim (zero fields:
// config.DefaultHTTPLimits).
func gatewayServer(h http.Handler, lim config.HTTPLimits, errLog *log.Logger) *http.Server {
	def := config.DefaultHTTPLimits()
	return &http.Server{Handler: h, ErrorLog: errLog,
		ReadHeaderTimeout: cmp.Or(lim.ReadHeader, def.ReadHeader), ReadTimeout: cmp.Or(lim.Read, def.Read),
		WriteTimeout: cmp.Or(lim.Write, def.Write), IdleTimeout: cmp.Or(lim.Idle, def.Idle),
		MaxHeaderBytes: cmp.Or(lim.MaxHeaderBytes, def.MaxHeaderBytes)}
}

// APIURL is the gateway's base URL.
func (a *App) APIURL() string { return cmp.Or(a.scheme, "http") + "://" + a.apiAddr }

// MetricsURL is the URL of the process's /metrics, or "" when it
// serves none.
func (a *App) MetricsURL() string {
	if a.maddr == "" {
		return ""
	}
	return cmp.Or(a.mscheme, "http") + "://" + a.maddr + "/metrics"
}

// Converters are the converters this process's client reads and writes
// Temporal payloads with.
func (a *App) Converters() lifecycle.Converters { return a.conv }

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
	if a.store != nil {
		a.store.Close()
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
	opts.Logger.Info("octflow running", zap.String("identity", opts.Identity), zap.String("api", a.apiAddr), zap.String("metrics", a.maddr))
	<-ctx.Done()
	opts.Logger.Info("shutting down: draining running stages")
	a.Stop()
	return nil
}
