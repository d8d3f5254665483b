package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"octflow/activities"
	"octflow/api"
	"octflow/api/auth"
	"octflow/api/intake"
	"octflow/app"
	"octflow/audit"
	"octflow/config"
	"octflow/deployment"
	"octflow/exam"
	"octflow/gpuworker"
	"octflow/internal/buildinfo"
	"octflow/workers"
)

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "octflow"
	}
	return h
}

// runAPI serves the HTTP gateway.
func runAPI(ctx context.Context, args []string) error {
	s := config.New("api", nil)
	stack := config.BindStack(s)
	logc := config.BindLog(s, "json")
	policy := config.BindPolicy(s, exam.DefaultPolicy())
	hooks := config.BindWebhooks(s)
	rate := config.BindDeviceRate(s, config.DeviceRate{PerMinute: 60, Burst: 20})
	key := config.BindPseudonymKey(s)
	keys := config.BindCodec(s)
	identityKeys := config.BindIdentityKeys(s, true)
	temporalTLS := config.BindTemporalTLS(s)
	serverTLS := config.BindServerTLS(s)
	gateway := config.BindGateway(s, app.UploadDefaults())
	serving := config.BindServing(s, app.ServingDefaults())
	pacsFile := config.BindPACSFile(s)
	listen := config.BindAPI(s)
	certFiles := config.BindCertificateFiles(s)
	log, err := parseWithLogger(s, logc, args)
	if err != nil {
		return err
	}
	defer log.Sync()
	sealer, errCodec := app.Codec(*keys)
	identities, errIdentities := app.IdentityCodec(*identityKeys, *keys)
	guard, errGuard := app.CallbackGuard(*hooks)
	gw := &app.GatewayOptions{Addr: listen.Addr, TLS: serverTLS.Config(), API: api.Config{Pseudonymizer: intake.NewPseudonymizer(*key),
		Policy: *policy, Callbacks: guard, DeviceRate: app.DeviceRate(*rate), Identities: identities}}
	opts := app.Options{Stack: *stack, Identity: "api@" + hostname(), Logger: log, Codec: sealer, TemporalTLS: temporalTLS.Config(),
		Gateway: gw, CertificateFiles: *certFiles}
	if err := errors.Join(errCodec, errIdentities, errGuard, opts.SetGateway(*gateway, *serving)); err != nil {
		return err
	}
	if *pacsFile != "" {
		// Which campuses export; their PACS's credentials stay with the
		// worker.
		entries, err := app.ReadPACSFile(*pacsFile)
		if err != nil {
			return err
		}
		gw.API.ExportCampuses = map[string]bool{}
		for campus := range entries {
			gw.API.ExportCampuses[campus] = true
		}
	}
	if gw.API.Tokens, err = auth.LoadTokens(listen.TokensFile); err != nil {
		return fmt.Errorf("OCTFLOW_TOKENS_FILE: %w", err)
	}
	trail, closeTrail, err := app.AuditTrail(gateway.Audit, audit.Source{ID: opts.Identity, Host: hostname()}, log)
	if err != nil {
		return err
	}
	defer closeTrail.Close()
	gw.API.AuditTrail = trail
	return app.Run(ctx, opts)
}

// runWorker runs the workflow worker and the CPU stages.
func runWorker(ctx context.Context, args []string) error {
	s := config.New("worker", nil)
	stack := config.BindStack(s)
	logc := config.BindLog(s, "json")
	hooks := config.BindWebhooks(s)
	// The worker renders reports, which name the model of each stage.
	models := config.BindModels(s, activities.Pipeline().Specs())
	keys := config.BindCodec(s)
	identityKeys := config.BindIdentityKeys(s, false)
	pacsFile := config.BindPACSFile(s)
	installation := config.BindInstallation(s)
	temporalTLS := config.BindTemporalTLS(s)
	sweep := config.BindSweep(s)
	proc := config.BindProcess(s)
	dep := config.BindDeployment(s, "octflow", buildinfo.Read().BuildID())
	log, err := parseWithLogger(s, logc, args)
	if err != nil {
		return err
	}
	defer log.Sync()
	sealer, errCodec := app.Codec(*keys)
	guard, errGuard := app.CallbackGuard(*hooks)
	identities, errIdentities := app.IdentityCodec(*identityKeys, *keys)
	if err := errors.Join(errCodec, errGuard, errIdentities); err != nil {
		return err
	}
	worker := &app.WorkerOptions{
		Pipeline: workers.PipelineOptions{Webhooks: app.Webhooks(*hooks, guard), Identities: identities, Installation: *installation,
			Deployment: deployment.VersionOf(dep.Name, dep.BuildID)},
		Housekeeping: workers.HousekeepingOptions{SweepEvery: sweep.Every, SweepGrace: sweep.Grace},
	}
	opts := app.Options{
		Stack: *stack, Identity: "worker@" + hostname(), Logger: log, StopTimeout: proc.Drain,
		MetricsAddr: proc.MetricsAddr, MetricsTLS: proc.MetricsTLS, Models: app.Models(*models),
		Codec: sealer, TemporalTLS: temporalTLS.Config(), Worker: worker,
	}
	if *pacsFile != "" {
		// The worker exports: it reads each campus's CA and credentials,
		// and opens the identities the results are filed under.
		entries, err := app.ReadPACSFile(*pacsFile)
		if err == nil {
			worker.Pipeline.PACS, err = app.PACSTargets(entries)
		}
		if err != nil {
			return err
		}
		if identities == nil {
			return errors.New("OCTFLOW_PACS_FILE is set but OCTFLOW_IDENTITY_KEYS_FILE is not: the worker opens each exam's sealed identity to file its results in the patient's study")
		}
	}
	return app.Run(ctx, opts)
}

// runGPUWorker runs one GPU node.
func runGPUWorker(ctx context.Context, args []string) error {
	s := config.New("gpuworker", nil)
	stack := config.BindStack(s)
	logc := config.BindLog(s, "json")
	models := config.BindModels(s, activities.Pipeline().Specs())
	keys := config.BindCodec(s)
	temporalTLS := config.BindTemporalTLS(s)
	proc := config.BindProcess(s)
	node := config.BindGPUNode(s, app.GPUNodeDefaults(hostname()))
	log, err := parseWithLogger(s, logc, args)
	if err != nil {
		return err
	}
	defer log.Sync()
	sealer, err := app.Codec(*keys)
	if err != nil {
		return err
	}
	queue, err := app.NodeQueue(sealer, node.Campus, node.Queue)
	if err != nil {
		return err
	}
	// A bound node's own queue is named by its certificate's CN, which
	// the stack's Temporal lets it poll: its ID must be that name.
	if cn := temporalTLS.ClientCommonName(); node.Campus != "" && cn != "" && cn != node.ID {
		return fmt.Errorf("OCTFLOW_NODE_ID (--node-id) %s: a node bound to a campus is named as its certificate is (CN=%s)", node.ID, cn)
	}
	inv, source, err := gpuworker.Discover(nvml.New(), node.Source, gpuworker.SimulatedGPUs{Count: node.GPUs, Model: node.Model, MemoryGiB: node.MemoryGiB})
	if err != nil {
		return err
	}
	found, err := inv.GPUs()
	if err != nil {
		return err
	}
	for _, g := range found {
		log.Info("gpu", zap.String("source", source), zap.Int("index", g.Index), zap.String("model", g.Model),
			zap.String("uuid", g.UUID), zap.Uint64("memoryTotalMiB", g.MemoryTotalMiB),
			zap.Uint64("memoryFreeMiB", g.MemoryFreeMiB), zap.Uint32("utilizationPct", g.UtilizationPct), zap.Bool("healthy", g.Healthy), zap.Any("faults", g.Faults))
	}
	takesDir := node.TakesDir
	switch takesDir {
	case "":
		takesDir = gpuworker.DefaultTakesDir(node.ID)
	case "off":
		takesDir = ""
	}
	var (
		simulated activities.SimulatedComputeFunc
		probe     func(context.Context) error
	)
	if node.FailRate > 0 || node.StageTime > 0 || node.Slowdown > 1 {
		if source != gpuworker.SourceSimulated {
			return fmt.Errorf("--sim-failure-rate, --sim-stage-time and --sim-slowdown need simulated GPUs; this node has real ones")
		}
		simulated = simulatedGPU(time.Duration(float64(node.StageTime)*node.Slowdown), node.FailRate)
	}
	if node.Slowdown > 1 {
		probe = slowedProbe(gpuworker.DenoiseProbe(), node.Slowdown)
	}
	if node.FaultsFile != "" {
		sim, ok := inv.(*gpuworker.SimulatedInventory)
		if !ok {
			return fmt.Errorf("--sim-faults-file needs simulated GPUs; this node has real ones")
		}
		sim.FollowFaults(node.FaultsFile)
	}
	return app.Run(ctx, app.Options{
		Stack: *stack, Identity: node.ID, Logger: log, StopTimeout: proc.Drain, MetricsAddr: proc.MetricsAddr,
		MetricsTLS: proc.MetricsTLS, Models: app.Models(*models), Codec: sealer, TemporalTLS: temporalTLS.Config(),
		GPU: &app.GPUOptions{Nodes: []gpuworker.Config{{NodeID: node.ID, GPUs: inv, TaskQueue: queue, DrainTimeout: proc.Drain,
			ReportEvery: node.ReportEvery, CacheMiB: cmp.Or(node.CacheMiB, -1), TakesDir: takesDir, Probe: probe,
			SimulatedCompute: simulated}}},
	})
}

// slowedProbe is a simulated gray node's probe: the real probe, then a
// sleep that makes it take factor times as long (simulated slowness, not
// real work).
func slowedProbe(probe func(context.Context) error, factor float64) func(context.Context) error {
	return func(ctx context.Context) error {
		start := time.Now()
		if err := probe(ctx); err != nil {
			return err
		}
		select {
		case <-time.After(time.Duration((factor - 1) * float64(time.Since(start)))):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// simulatedGPU is the benchmark's simulated GPU mode, for simulated nodes
// only: as each GPU stage's computation begins (its GPU held, its start
// reported) and before its real (tiny-phantom) work, it sleeps a
// simulated GPU time drawn uniformly from [0.5, 1.5] × stageTime, and it
// fails the given fraction of stages as a sick GPU would.
func simulatedGPU(stageTime time.Duration, failRate float64) activities.SimulatedComputeFunc {
	return func(ctx context.Context, _ string, stage exam.Stage) error {
		if stageTime > 0 {
			sleep := time.Duration((0.5 + rand.Float64()) * float64(stageTime))
			select {
			case <-time.After(sleep): // simulated GPU time, not real work
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if rand.Float64() < failRate {
			return fmt.Errorf("simulated GPU fault in %s", stage)
		}
		return nil
	}
}
