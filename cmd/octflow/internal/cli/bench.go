package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"octflow/api/intake"
	"octflow/config"
	"octflow/exam"
	"octflow/internal/bench"
	"octflow/internal/devstack"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
)

// runBench is `octflow bench`: the scheduling benchmark on an embedded
// system, GPU nodes as processes of this binary.
func runBench(ctx context.Context, args []string) error {
	s := config.New("bench", nil)
	policy := config.BindPolicy(s, bench.Policy())
	c := bench.Config{}
	var mix, campusMix, out string
	fs := s.FlagSet()
	fs.IntVar(&c.Exams, "exams", 800, "exams submitted in one burst")
	fs.IntVar(&c.Nodes, "nodes", 4, "simulated GPU nodes, each its own process")
	fs.IntVar(&c.GPUsPerNode, "gpus", 2, "simulated GPUs per node")
	fs.StringVar(&mix, "mix", "10/60/30", "urgent/normal/low percentages of the burst")
	fs.IntVar(&c.Campuses, "campuses", 1, "campuses sending the burst, each from its own device")
	fs.StringVar(&campusMix, "campus-mix", "", "percent of the burst each campus sends, e.g. 80/15/5 (default: alike)")
	fs.DurationVar(&c.StageTime, "stage-time", 200*time.Millisecond, "mean simulated GPU time of a stage (drawn from [0.5, 1.5] × this)")
	fs.Float64Var(&c.FailRate, "fail-rate", 0.02, "fraction of stages failing transiently")
	fs.IntVar(&c.GPUFaults, "gpu-faults", 0, "GPU faults to inject during the burst (an Xid, thermal throttling, an ECC error in turn), each on a random simulated GPU for --gpu-fault-for")
	fs.DurationVar(&c.GPUFaultFor, "gpu-fault-for", 15*time.Second, "how long each injected GPU fault lasts")
	fs.Float64Var(&c.GrayNode, "gray-node", 0, "make the first node a gray one: alive and never failing, its simulated GPU time and probe this many times the others' (0: none)")
	fs.IntVar(&c.Kills, "kills", 2, "abrupt node kills (kill -9) during the burst; each node comes back 3 s later")
	fs.Float64Var(&c.ResendRate, "resend-rate", 0.05, "fraction of exams the device sends twice")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of priorities, phantoms, resends and kills")
	fs.DurationVar(&c.NodeReportEvery, "report-every", 0, "how often each node reports to the fleet view (0: a node's default, 10s)")
	fs.StringVar(&out, "out", "bench-result.json", "where to write the result as JSON")
	var cpuProfile, heapProfile string
	fs.StringVar(&cpuProfile, "cpu-profile", "", "write a CPU profile of this process (engine, gateway, workers) over the burst to this file")
	fs.StringVar(&heapProfile, "heap-profile", "", "write a heap profile of this process at the end of the burst to this file")
	fs.BoolVar(&c.FullVolumes, "full-volumes", false, "full-size phantom cubes through the real stages on the nodes' CPUs (no simulated GPU time): measures data locality; use few exams")
	if err := s.Parse(args); err != nil {
		return err
	}
	// The embedded S3 endpoint moves the process into its own directory
	// (versitygw's posix backend), which is gone when the result is
	// written: name the file from where the command was started.
	out, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if c.Mix, err = bench.ParseMix(mix); err != nil {
		return err
	}
	if c.GrayNode < 0 || (c.GrayNode > 0 && (c.Nodes < 2 || c.FullVolumes)) {
		return fmt.Errorf("--gray-node %g: want 0, or a factor for the first of two or more simulated nodes", c.GrayNode)
	}
	if c.GPUFaults < 0 || (c.GPUFaults > 0 && c.FullVolumes) || c.GPUFaultFor <= 0 {
		return fmt.Errorf("--gpu-faults %d for %s: want 0, or faults of a positive length in simulated GPU mode", c.GPUFaults, c.GPUFaultFor)
	}
	if c.Campuses < 1 {
		return fmt.Errorf("--campuses %d: want 1 or more", c.Campuses)
	}
	if c.CampusMix, err = bench.ParseCampusMix(campusMix, c.Campuses); err != nil {
		return err
	}
	tuneEmbeddedGC(os.Getenv)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	c.Node = func(args, env []string) *exec.Cmd {
		cmd := exec.Command(self, append([]string{"gpuworker"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		return cmd
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		c.CPUProfile = f
	}
	if heapProfile != "" {
		f, err := os.Create(heapProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		c.HeapProfile = f
	}
	res, err := RunBenchOnDevSystem(ctx, c, *policy, os.Stdout)
	if err != nil {
		return err
	}
	if err := writeJSON(out, res); err != nil {
		return err
	}
	fmt.Printf("wrote %s\n", out)
	return nil
}

// RunBenchOnDevSystem starts a fresh embedded system and runs the
// benchmark on it.
func RunBenchOnDevSystem(ctx context.Context, c bench.Config, policy exam.Policy, w io.Writer) (*bench.Result, error) {
	dataDir, err := os.MkdirTemp("", "octflow-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dataDir)
	addrs, err := devstack.FreeAddrs("127.0.0.1", 3)
	if err != nil {
		return nil, err
	}
	// Only errors: the benchmark prints its own summary, and a stopping
	// stack warns about every poll it cuts short.
	log, err := zap.NewProduction(zap.IncreaseLevel(zapcore.ErrorLevel))
	if err != nil {
		return nil, err
	}
	cfg := devsystem.Config{DataDir: dataDir, APIAddr: addrs[0], TemporalAddr: addrs[1], S3Addr: addrs[2],
		UIAddr: "off", Policy: policy, StopTimeout: 5 * time.Second,
		// One token stands for each campus's devices.
		Uploads: intake.Limits{PerDevice: bench.Uploaders}}
	// Campuses beyond the dev system's two, named as the bench's own.
	for i := 3; i <= c.Campuses; i++ {
		cfg.ExtraCampuses = append(cfg.ExtraCampuses, fmt.Sprintf("bench-campus-%d", i))
	}
	d, err := devsystem.Start(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	defer d.Stop()
	c.Policy = policy
	return bench.Run(ctx, benchSystem{d}, c, dataDir, w)
}

// benchSystem is a dev system as the benchmark sees it.
type benchSystem struct{ d *devsystem.System }

func (b benchSystem) APIURL() string { return b.d.App.APIURL() }
func (b benchSystem) Campuses() []bench.CampusTokens {
	var out []bench.CampusTokens
	for _, d := range b.d.Secrets.Devices {
		ct := bench.CampusTokens{Campus: d.Campus, Device: d.Token}
		for _, c := range b.d.Secrets.Clinicians {
			if c.Campus == d.Campus {
				ct.Clinician = c.Token
			}
		}
		out = append(out, ct)
	}
	return out
}
func (b benchSystem) AdminToken() string               { return b.d.Secrets.Admin }
func (b benchSystem) Temporal() client.Client          { return b.d.App.Client() }
func (b benchSystem) Converters() lifecycle.Converters { return b.d.App.Converters() }
func (b benchSystem) NodeEnv() []string                { return b.d.NodeEnv() }
func (b benchSystem) MetricsURL() string               { return b.d.App.MetricsURL() }
