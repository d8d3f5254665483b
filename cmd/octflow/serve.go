package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"octflow/activities"
	"octflow/api"
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
	fs := flag.NewFlagSet("api", flag.ContinueOnError)
	var stack stackConfig
	stack.bind(fs)
	addr := fs.String("api-addr", envDefault("OCTFLOW_API_ADDR", "127.0.0.1:8080"), "listen address (OCTFLOW_API_ADDR)")
	tokensFile := fs.String("tokens-file", envDefault("OCTFLOW_TOKENS_FILE", ""), "JSON file of token hashes and roles (OCTFLOW_TOKENS_FILE)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tokensFile == "" {
		return fmt.Errorf("--tokens-file (OCTFLOW_TOKENS_FILE) is required")
	}
	tokens, err := api.LoadTokens(*tokensFile)
	if err != nil {
		return err
	}
	pseudo, err := loadPseudonymizer()
	if err != nil {
		return err
	}
	policy, err := policyFromEnv(exam.DefaultPolicy())
	if err != nil {
		return err
	}
	hooks, err := webhooksFromEnv()
	if err != nil {
		return err
	}
	log := newLogger(false)
	defer log.Sync()
	return serveUntilDone(ctx, log, appOptions{
		Stack: stack, Identity: "api@" + hostname(), Logger: log,
		APIAddr: *addr, Tokens: tokens, Pseudonymizer: pseudo, Policy: policy, Callbacks: hooks.Guard,
		DeviceRate: deviceRateFromEnv(api.RateLimit{PerMinute: 60, Burst: 20}),
	})
}

// runWorker runs the workflow worker and the CPU stages.
func runWorker(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	var stack stackConfig
	stack.bind(fs)
	drain := fs.Duration("drain-timeout", envDuration("OCTFLOW_DRAIN_TIMEOUT", 90*time.Second), "how long running stages may finish on shutdown (OCTFLOW_DRAIN_TIMEOUT)")
	metricsAddr := fs.String("metrics-addr", envDefault("OCTFLOW_METRICS_ADDR", ""), "serve Prometheus /metrics here, e.g. :9464 (OCTFLOW_METRICS_ADDR)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	hooks, err := webhooksFromEnv()
	if err != nil {
		return err
	}
	// The worker renders reports, which name the model of each stage.
	backends, err := backendsFromEnv()
	if err != nil {
		return err
	}
	log := newLogger(false)
	defer log.Sync()
	return serveUntilDone(ctx, log, appOptions{
		Stack: stack, Identity: "worker@" + hostname(), Logger: log, Workers: true, StopTimeout: *drain,
		MetricsAddr: *metricsAddr, Webhooks: hooks, Backends: backends,
	})
}

// runGPUWorker runs one GPU node.
func runGPUWorker(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("gpuworker", flag.ContinueOnError)
	var stack stackConfig
	stack.bind(fs)
	nodeID := fs.String("node-id", envDefault("OCTFLOW_NODE_ID", "gpu@"+hostname()), "node identity (OCTFLOW_NODE_ID)")
	gpus := fs.Int("gpus", envInt("OCTFLOW_GPUS", 1), "simulated GPUs, used only where NVML finds none (OCTFLOW_GPUS)")
	model := fs.String("gpu-model", envDefault("OCTFLOW_GPU_MODEL", "simulated GPU"), "model name of the simulated GPUs (OCTFLOW_GPU_MODEL)")
	memGiB := fs.Float64("gpu-memory-gib", 24, "memory of each simulated GPU in GiB")
	queue := fs.String("task-queue", envDefault("OCTFLOW_GPU_QUEUE", exam.GPUQueue), "GPU task queue to serve (OCTFLOW_GPU_QUEUE)")
	drain := fs.Duration("drain-timeout", envDuration("OCTFLOW_DRAIN_TIMEOUT", 90*time.Second), "how long running stages may finish on SIGTERM (OCTFLOW_DRAIN_TIMEOUT)")
	failRate := fs.Float64("sim-failure-rate", 0, "simulated GPUs only: fail this fraction of stages (0..1), to watch retries and the breaker")
	stageTime := fs.Duration("sim-stage-time", 0, "simulated GPUs only: each GPU stage also sleeps about this long (simulated GPU time, for octflow bench)")
	reportEvery := fs.Duration("report-every", envDuration("OCTFLOW_REPORT_EVERY", 10*time.Second), "how often the node reports to the fleet view (OCTFLOW_REPORT_EVERY)")
	metricsAddr := fs.String("metrics-addr", envDefault("OCTFLOW_METRICS_ADDR", ""), "serve Prometheus /metrics here, e.g. :9464 (OCTFLOW_METRICS_ADDR)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	backends, err := backendsFromEnv()
	if err != nil {
		return err
	}
	log := newLogger(false)
	defer log.Sync()
	inv, source, err := gpuworker.Discover(nvml.New(), gpuworker.SimulatedGPUs{Count: *gpus, Model: *model, MemoryGiB: *memGiB})
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
			zap.Uint64("memoryFreeMiB", g.MemoryFreeMiB), zap.Uint32("utilizationPct", g.UtilizationPct), zap.Bool("healthy", g.Healthy))
	}
	var faults activities.FaultFunc
	if *failRate > 0 || *stageTime > 0 {
		if source != "simulated" {
			return fmt.Errorf("--sim-failure-rate and --sim-stage-time need simulated GPUs; this node has real ones")
		}
		faults = simulatedGPU(*stageTime, *failRate)
	}
	return serveUntilDone(ctx, log, appOptions{
		Stack: stack, Identity: *nodeID, Logger: log, StopTimeout: *drain, Faults: faults, MetricsAddr: *metricsAddr,
		Backends: backends,
		GPUNodes: []gpuworker.Config{{NodeID: *nodeID, GPUs: inv, TaskQueue: *queue, DrainTimeout: *drain, ReportEvery: *reportEvery}},
	})
}

// simulatedGPU is the benchmark's simulated GPU mode, for simulated nodes
// only: before each stage's real (tiny-phantom) work it sleeps a
// simulated GPU time drawn uniformly from [0.5, 1.5] × stageTime, and it
// fails the given fraction of stages as a sick GPU would.
func simulatedGPU(stageTime time.Duration, failRate float64) activities.FaultFunc {
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

// serveUntilDone runs the app until ctx ends (SIGINT or SIGTERM), then
// drains it.
func serveUntilDone(ctx context.Context, log *zap.Logger, opts appOptions) error {
	a, err := startApp(ctx, opts)
	if err != nil {
		return err
	}
	log.Info("octflow running", zap.String("identity", opts.Identity), zap.String("api", a.apiAddr))
	<-ctx.Done()
	log.Info("shutting down: draining running stages")
	a.stop()
	return nil
}
