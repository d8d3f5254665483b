// Package app assembles an octflow process from its parts: it connects
// to Temporal and the object store, and starts whichever of the HTTP
// gateway, the workflow and CPU workers and the GPU nodes the process
// runs. It stops them in dependency order, draining running stages. The
// command (cmd/octflow/internal/cli) only reads the configuration and
// calls it.
package app

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"octflow/activities"
	"octflow/api"
	"octflow/audit"
	"octflow/callback"
	"octflow/codec"
	"octflow/config"
	"octflow/exam"
	"octflow/gpuworker"
	"octflow/inference"
	"octflow/lifecycle"
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
	// Stages are the pipeline the workers and GPU nodes run (nil:
	// activities.Pipeline(), the shipped one).
	Stages activities.Stages
	// StopTimeout bounds the drain of workers and nodes (default 90 s).
	StopTimeout time.Duration
	// Webhooks deliver report-ready events (workers); Callbacks checks
	// callback URLs at submission (api).
	Webhooks  *activities.Webhooks
	Callbacks *callback.Guard
	// Metrics is the process's registry (default: a new one).
	// MetricsAddr serves it at /metrics on a listener of its own; the
	// gateway's public port never does.
	Metrics     *workers.Metrics
	MetricsAddr string
	// StatusMaxAge is how long one reading of Temporal for the gateway's
	// status metrics serves further scrapes (0: api.DefaultStatusMaxAge).
	StatusMaxAge time.Duration
	// HTTP bounds the gateway's connections (zero fields: the defaults,
	// config.DefaultHTTPLimits).
	HTTP config.HTTPLimits
	// Streams bounds the gateway's event streams, and SpoolMaxBytes the
	// disk its uploads in flight take (zero: defaults).
	Streams       api.StreamLimits
	SpoolMaxBytes int64
	// NodeReportEvery is how often GPU nodes report to the fleet (default 10 s).
	NodeReportEvery time.Duration
	// SimulatedCompute is the simulated GPU time of the benchmark's
	// simulated nodes (see activities.Activities).
	SimulatedCompute activities.SimulatedComputeFunc
	// ClientInterceptors wrap every call this process makes to Temporal;
	// WorkerInterceptors, given a worker's or GPU node's identity, wrap
	// the activities it runs (after a node's own interceptor, which binds
	// each stage's GPU). For tracing; the tests inject faults with them.
	ClientInterceptors []interceptor.ClientInterceptor
	WorkerInterceptors func(identity string) []interceptor.WorkerInterceptor
	// Models are the served models of the stages pointed at one (see
	// activities.Activities.Models; none: the reference implementations).
	Models map[exam.Stage]inference.Model
	// Codec seals what this process sends through Temporal (nil: nothing
	// is sealed, which only the dev stack allows).
	Codec *codec.Codec
	// Identities seals patients' identities at intake (the api) and
	// opens them for the export (the worker): keys of their own, never
	// a GPU node's (nil: identities are not kept, nothing is exported).
	Identities *codec.Codec
	// PACS names, per campus, the PACS its results are exported to (see
	// activities.ExportToPACS); a campus not named exports nothing.
	PACS map[string]activities.PACSTarget
	// ExportCampuses are campuses whose exams export, beside those PACS
	// names: the gateway's view, which starts each exam knowing whether
	// it exports but holds no PACS's credentials.
	ExportCampuses []string
	// TemporalTLS secures the connection to Temporal (nil: plain).
	TemporalTLS *tls.Config
	// APITLS, when set, serves the gateway over HTTPS.
	APITLS *tls.Config
	// CodecOrigins are the Web UI origins that may call the gateway's
	// codec endpoint from a browser.
	CodecOrigins []string
	// SweepEvery and SweepGrace schedule the scan sweep (workers only;
	// 0: none).
	SweepEvery, SweepGrace time.Duration
	// Uploads bounds the gateway's uploads (zero fields: defaults), and
	// MaxScanBytes the size of a scan (0: 512 MiB).
	Uploads      api.UploadLimits
	MaxScanBytes int64
	// AuditTrail receives the gateway's audit events (default: JSON lines
	// on stderr).
	AuditTrail audit.Sink
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
	metrics *workers.Metrics
	mhttp   *http.Server
	maddr   string // the metrics listener's address
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
		a.metrics = workers.NewMetrics(opts.Stages.Specs())
	}
	if err := registerStoreCounts(a.metrics.Registry, a.store); err != nil {
		return nil, err
	}
	// When the certificates this process holds, and Temporal's, expire.
	certs := newCertificateExpiry()
	if err := errors.Join(certs.hold("api-server", opts.APITLS), certs.hold("temporal-client", opts.TemporalTLS),
		certs.register(a.metrics.Registry)); err != nil {
		return nil, err
	}
	dc, fc := codec.Converters(opts.Codec)
	conv := lifecycle.Converters{Data: dc, Failure: fc}
	a.conv = conv
	if a.client, err = workers.Dial(ctx, workers.DialOptions{HostPort: opts.Stack.TemporalAddr, Namespace: opts.Stack.Namespace,
		Identity: opts.Identity, Logger: opts.Logger.Named("sdk"), Metrics: a.metrics.SDK, Converters: conv,
		TLS:         certs.checking("temporal-server", opts.TemporalTLS),
		Compression: opts.Stack.TemporalCompression, Interceptors: opts.ClientInterceptors}); err != nil {
		return nil, err
	}
	if opts.MetricsAddr != "" {
		ln, err := net.Listen("tcp", opts.MetricsAddr)
		if err != nil {
			return nil, fmt.Errorf("metrics listen: %w", err)
		}
		a.maddr = ln.Addr().String()
		mux := http.NewServeMux()
		mux.Handle("/metrics", a.metrics.Handler())
		a.mhttp = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
			WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10}
		go a.mhttp.Serve(ln)
	}
	var stageMetrics *activities.StageMetrics
	if opts.Workers || len(opts.GPUNodes) > 0 {
		if stageMetrics, err = activities.NewStageMetrics(a.metrics.Registry, opts.Stages.Specs()); err != nil {
			return nil, fmt.Errorf("stage metrics: %w", err)
		}
	}
	common := activities.Common{Store: a.store, Logger: opts.Logger.Named("stage"), Models: opts.Models, Metrics: stageMetrics}
	exportCampuses := map[string]bool{}
	for campus := range opts.PACS {
		exportCampuses[campus] = true
	}
	for _, campus := range opts.ExportCampuses {
		exportCampuses[campus] = true
	}

	if opts.Workers {
		if a.workers, err = workers.Start(a.client, workers.PipelineOptions{Identity: opts.Identity, Stages: opts.Stages, Common: common,
			Webhooks: opts.Webhooks, PACS: opts.PACS, Identities: opts.Identities,
			Interceptors: opts.workerInterceptors(opts.Identity), StopTimeout: opts.StopTimeout},
			workers.HousekeepingOptions{Store: a.store, Logger: opts.Logger.Named("housekeeping"), Converters: conv,
				SweepEvery: opts.SweepEvery, SweepGrace: opts.SweepGrace}); err != nil {
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
		if nc.Stages == nil {
			nc.Stages = opts.Stages
		}
		nc.Interceptors = append(nc.Interceptors, opts.workerInterceptors(nc.NodeID)...)
		nc.Common = common
		if nc.SimulatedCompute == nil {
			nc.SimulatedCompute = opts.SimulatedCompute
		}
		n, err := gpuworker.Start(a.client, nc)
		if err != nil {
			return nil, err
		}
		a.nodes = append(a.nodes, n)
	}
	if opts.APIAddr != "" {
		gwCfg := api.Config{
			Temporal: a.client, Namespace: opts.Stack.Namespace, Store: a.store, Tokens: opts.Tokens, Pseudonymizer: opts.Pseudonymizer,
			Logger: opts.Logger.Named("api"), AuditTrail: opts.AuditTrail, Policy: opts.Policy, StatusMaxAge: opts.StatusMaxAge,
			Registerer: a.metrics.Registry, Streams: opts.Streams, SpoolMaxBytes: opts.SpoolMaxBytes, Callbacks: opts.Callbacks, DeviceRate: opts.DeviceRate, Converters: conv,
			Uploads: opts.Uploads, MaxScanBytes: opts.MaxScanBytes, CodecOrigins: opts.CodecOrigins, ExportCampuses: exportCampuses,
		}
		if opts.Codec != nil {
			gwCfg.PayloadCodec = opts.Codec
		}
		gwCfg.Identities = opts.Identities
		gw, err := api.New(gwCfg)
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", opts.APIAddr)
		if err != nil {
			return nil, fmt.Errorf("api listen: %w", err)
		}
		a.apiAddr = ln.Addr().String()
		if opts.APITLS != nil {
			ln, a.scheme = tls.NewListener(ln, opts.APITLS), "https"
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
			return nil, err
		}
		a.http = gatewayServer(gw, opts.HTTP, errLog)
		a.served = make(chan error, 1)
		go func() { a.served <- a.http.Serve(ln) }()
	}
	return a, nil
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
	return "http://" + a.maddr + "/metrics"
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
