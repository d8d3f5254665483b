package main

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
	"octflow/app"
	"octflow/audit"
	"octflow/config"
	"octflow/exam"
	"octflow/gpuworker"
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
	policy := config.BindPolicy(s, app.PolicySettings(exam.DefaultPolicy()))
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
	var addr, tokensFile string
	s.String(&addr, "api-addr", "OCTFLOW_API_ADDR", "127.0.0.1:8080", "listen address")
	s.String(&tokensFile, "tokens-file", "OCTFLOW_TOKENS_FILE", "", "JSON file of token hashes and roles")
	s.Check(func() error {
		if tokensFile == "" {
			return fmt.Errorf("OCTFLOW_TOKENS_FILE (--tokens-file) is required")
		}
		return nil
	})
	log, err := parseWithLogger(s, logc, args)
	if err != nil {
		return err
	}
	defer log.Sync()
	pol, errPolicy := app.Policy(*policy, exam.DefaultPolicy())
	sealer, errCodec := app.Codec(*keys)
	identities, errIdentities := app.IdentityCodec(*identityKeys, *keys)
	guard, errGuard := app.CallbackGuard(*hooks)
	opts := app.Options{
		Stack: *stack, Identity: "api@" + hostname(), Logger: log, APIAddr: addr, Pseudonymizer: api.NewPseudonymizer(*key),
		Policy: pol, Callbacks: guard, DeviceRate: app.DeviceRate(*rate), Codec: sealer, Identities: identities,
		TemporalTLS: temporalTLS.Config(), APITLS: serverTLS.Config(),
	}
	if err := errors.Join(errPolicy, errCodec, errIdentities, errGuard, opts.SetGateway(*gateway, *serving)); err != nil {
		return err
	}
	if *pacsFile != "" {
		// Which campuses export; their PACS's credentials stay with the
		// worker.
		entries, err := app.ReadPACSFile(*pacsFile)
		if err != nil {
			return err
		}
		for campus := range entries {
			opts.ExportCampuses = append(opts.ExportCampuses, campus)
		}
	}
	if opts.Tokens, err = api.LoadTokens(tokensFile); err != nil {
		return fmt.Errorf("OCTFLOW_TOKENS_FILE: %w", err)
	}
	trail, closeTrail, err := app.AuditTrail(gateway.Audit, audit.Source{ID: opts.Identity, Host: hostname()}, log)
	if err != nil {
		return err
	}
	defer closeTrail.Close()
	opts.AuditTrail = trail
	return app.Run(ctx, opts)
}

// runWorker runs the workflow worker and the CPU stages.
func runWorker(ctx context.Context, args []string) error {
	s := config.New("worker", nil)
	stack := config.BindStack(s)
	logc := config.BindLog(s, "json")
	hooks := config.BindWebhooks(s)
	// The worker renders reports, which name the model of each stage.
	models := config.BindModels(s)
	keys := config.BindCodec(s)
	identityKeys := config.BindIdentityKeys(s, false)
	pacsFile := config.BindPACSFile(s)
	temporalTLS := config.BindTemporalTLS(s)
	sweep := config.BindSweep(s)
	var drain time.Duration
	var metricsAddr string
	s.Duration(&drain, "drain-timeout", "OCTFLOW_DRAIN_TIMEOUT", 90*time.Second, "how long running stages may finish on shutdown")
	s.String(&metricsAddr, "metrics-addr", "OCTFLOW_METRICS_ADDR", "", "serve Prometheus /metrics here, e.g. :9464")
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
	opts := app.Options{
		Stack: *stack, Identity: "worker@" + hostname(), Logger: log, Workers: true, StopTimeout: drain,
		MetricsAddr: metricsAddr, Webhooks: app.Webhooks(*hooks, guard), Backends: app.Backends(*models),
		Codec: sealer, TemporalTLS: temporalTLS.Config(), SweepEvery: sweep.Every, SweepGrace: sweep.Grace,
		Identities: identities,
	}
	if *pacsFile != "" {
		// The worker exports: it reads each campus's CA and credentials,
		// and opens the identities the results are filed under.
		entries, err := app.ReadPACSFile(*pacsFile)
		if err == nil {
			opts.PACS, err = app.PACSTargets(entries)
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
	models := config.BindModels(s)
	keys := config.BindCodec(s)
	temporalTLS := config.BindTemporalTLS(s)
	var (
		nodeID, model, queue, metricsAddr string
		gpus                              int
		memGiB, failRate, slowdown        float64
		drain, stageTime, reportEvery     time.Duration
		cacheMiB                          int
		takesDir, gpuSource, faultsFile   string
		campus                            string
	)
	s.String(&nodeID, "node-id", "OCTFLOW_NODE_ID", "gpu@"+hostname(), "node identity")
	s.String(&gpuSource, "gpu-source", "OCTFLOW_GPU_SOURCE", gpuworker.SourceAuto, "where the GPUs come from: nvml (a GPU host: refuse to start when NVML fails), simulated, cpu (no GPU: the stages run on the CPU, in --gpus slots), or auto (NVML where its library is, simulated GPUs where it is not)")
	s.Int(&gpus, "gpus", "OCTFLOW_GPUS", 1, "simulated GPUs (or CPU slots), used only where NVML finds none")
	s.String(&model, "gpu-model", "OCTFLOW_GPU_MODEL", "simulated GPU", "model name of the simulated GPUs")
	s.Float(&memGiB, "gpu-memory-gib", "OCTFLOW_GPU_MEMORY_GIB", 24, "memory of each simulated GPU in GiB")
	s.String(&queue, "task-queue", "OCTFLOW_GPU_QUEUE", exam.GPUQueue, "GPU task queue to serve")
	s.String(&campus, "campus", "OCTFLOW_NODE_CAMPUS", "", "the one campus this node serves, on the campus's own queue oct-gpu-campus-<campus> (the api's OCTFLOW_CAMPUS_OWN_GPUS names it), with that campus's payload keys only (octflow node-keys); empty: every campus, on --task-queue")
	s.Duration(&drain, "drain-timeout", "OCTFLOW_DRAIN_TIMEOUT", 90*time.Second, "how long running stages may finish on SIGTERM")
	s.Float(&failRate, "sim-failure-rate", "OCTFLOW_SIM_FAILURE_RATE", 0, "simulated GPUs only: fail this fraction of stages (0..1), to watch retries and the breaker")
	s.Duration(&stageTime, "sim-stage-time", "OCTFLOW_SIM_STAGE_TIME", 0, "simulated GPUs only: each GPU stage also sleeps about this long (simulated GPU time, for octflow bench)")
	s.Float(&slowdown, "sim-slowdown", "OCTFLOW_SIM_SLOWDOWN", 1, "simulated GPUs only: the node's simulated GPU time and its probe take this many times as long (a gray node, for octflow bench)")
	s.String(&faultsFile, "sim-faults-file", "OCTFLOW_SIM_FAULTS_FILE", "", "simulated GPUs only: take the GPUs' faults from this file, read every 250 ms (lines such as \"0 thermal\" or \"1 xid,ecc\"; for octflow bench and drills)")
	s.Duration(&reportEvery, "report-every", "OCTFLOW_REPORT_EVERY", 10*time.Second, "how often the node reports to the fleet view")
	s.String(&metricsAddr, "metrics-addr", "OCTFLOW_METRICS_ADDR", "", "serve Prometheus /metrics here, e.g. :9464")
	s.Int(&cacheMiB, "cache-mib", "OCTFLOW_NODE_CACHE_MIB", 1024, "memory for the node's recent stage outputs, read by the exam's next stage here (0: no cache)")
	s.String(&takesDir, "takes-dir", "OCTFLOW_NODE_TAKES_DIR", "", "where the node notes the stages it holds, so that after a crash its next start hands them back at once (default: a directory for the node ID under the system's temporary directory; off: no notes)")
	s.Check(func() error {
		switch {
		case cacheMiB < 0:
			return fmt.Errorf("OCTFLOW_NODE_CACHE_MIB (--cache-mib) %d: want 0 (no cache) or more", cacheMiB)
		case gpus < 1:
			return fmt.Errorf("OCTFLOW_GPUS (--gpus) %d: want at least 1", gpus)
		case slowdown < 1:
			return fmt.Errorf("OCTFLOW_SIM_SLOWDOWN (--sim-slowdown) %v: want 1 (as fast as the others) or more", slowdown)
		case failRate < 0 || failRate > 1:
			return fmt.Errorf("OCTFLOW_SIM_FAILURE_RATE (--sim-failure-rate) %v: want a fraction in [0, 1]", failRate)
		case reportEvery <= 0:
			return fmt.Errorf("OCTFLOW_REPORT_EVERY (--report-every) must be positive")
		}
		return nil
	})
	log, err := parseWithLogger(s, logc, args)
	if err != nil {
		return err
	}
	defer log.Sync()
	sealer, err := app.Codec(*keys)
	if err != nil {
		return err
	}
	if queue, err = app.NodeQueue(sealer, campus, queue); err != nil {
		return err
	}
	// A bound node's own queue is named by its certificate's CN, which
	// the stack's Temporal lets it poll: its ID must be that name.
	if cn := temporalTLS.ClientCommonName(); campus != "" && cn != "" && cn != nodeID {
		return fmt.Errorf("OCTFLOW_NODE_ID (--node-id) %s: a node bound to a campus is named as its certificate is (CN=%s)", nodeID, cn)
	}
	inv, source, err := gpuworker.Discover(nvml.New(), gpuSource, gpuworker.SimulatedGPUs{Count: gpus, Model: model, MemoryGiB: memGiB})
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
	switch takesDir {
	case "":
		takesDir = gpuworker.DefaultTakesDir(nodeID)
	case "off":
		takesDir = ""
	}
	var (
		simulated activities.SimulatedComputeFunc
		probe     func(context.Context) error
	)
	if failRate > 0 || stageTime > 0 || slowdown > 1 {
		if source != gpuworker.SourceSimulated {
			return fmt.Errorf("--sim-failure-rate, --sim-stage-time and --sim-slowdown need simulated GPUs; this node has real ones")
		}
		simulated = simulatedGPU(time.Duration(float64(stageTime)*slowdown), failRate)
	}
	if slowdown > 1 {
		probe = slowedProbe(gpuworker.DenoiseProbe(), slowdown)
	}
	if faultsFile != "" {
		sim, ok := inv.(*gpuworker.SimulatedInventory)
		if !ok {
			return fmt.Errorf("--sim-faults-file needs simulated GPUs; this node has real ones")
		}
		sim.FollowFaults(faultsFile)
	}
	return app.Run(ctx, app.Options{
		Stack: *stack, Identity: nodeID, Logger: log, StopTimeout: drain, SimulatedCompute: simulated, MetricsAddr: metricsAddr,
		Backends: app.Backends(*models), Codec: sealer, TemporalTLS: temporalTLS.Config(),
		GPUNodes: []gpuworker.Config{{NodeID: nodeID, GPUs: inv, TaskQueue: queue, DrainTimeout: drain, ReportEvery: reportEvery,
			CacheMiB: cmp.Or(cacheMiB, -1), TakesDir: takesDir, Probe: probe}},
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
		if stageTime > 0 && stage.NeedsGPU() {
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
