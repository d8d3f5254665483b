package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"octflow/activities"
	"octflow/api"
	"octflow/devstack"
	"octflow/exam"
	"octflow/gpuworker"
	"octflow/inference"
	"octflow/storage"
)

// devConfig is what `octflow dev` is told.
type devConfig struct {
	DataDir      string
	APIAddr      string
	TemporalAddr string
	UIAddr       string
	S3Addr       string
	GPUNodes     int
	Policy       exam.Policy
	StopTimeout  time.Duration
	// GPUsPerNode is the GPUs of each simulated node (default 1).
	GPUsPerNode int
	// Breaker tunes the simulated nodes' circuit breakers.
	Breaker gpuworker.BreakerConfig
	// NodeReportEvery is how often nodes report to the fleet (default 5 s).
	NodeReportEvery time.Duration
	// APIOnly starts the stack and the gateway but no worker or GPU node;
	// tests start those later to watch an exam wait.
	APIOnly bool
	// Faults injects stage failures; only tests set it.
	Faults activities.FaultFunc
	// Backends run the image stages (OCTFLOW_MODEL_*; default: reference).
	Backends inference.Backends
}

func (c *devConfig) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.DataDir, "data-dir", envDefault("OCTFLOW_DATA_DIR", ".data"), "where exams, objects and dev secrets are kept (OCTFLOW_DATA_DIR)")
	fs.StringVar(&c.APIAddr, "api-addr", envDefault("OCTFLOW_API_ADDR", "127.0.0.1:8080"), "API listen address (OCTFLOW_API_ADDR)")
	fs.StringVar(&c.TemporalAddr, "temporal-addr", envDefault("OCTFLOW_TEMPORAL_ADDR", "127.0.0.1:7233"), "Temporal frontend address (OCTFLOW_TEMPORAL_ADDR)")
	fs.StringVar(&c.UIAddr, "ui-addr", envDefault("OCTFLOW_UI_ADDR", "127.0.0.1:8233"), "Temporal Web UI address, or off (OCTFLOW_UI_ADDR)")
	fs.StringVar(&c.S3Addr, "s3-addr", envDefault("OCTFLOW_S3_ADDR", "127.0.0.1:9000"), "S3 endpoint address (OCTFLOW_S3_ADDR)")
	fs.IntVar(&c.GPUNodes, "gpu-nodes", envInt("OCTFLOW_GPU_NODES", 2), "simulated GPU nodes in this process (OCTFLOW_GPU_NODES)")
	fs.DurationVar(&c.StopTimeout, "drain-timeout", envDuration("OCTFLOW_DRAIN_TIMEOUT", 90*time.Second), "how long running stages may finish on shutdown (OCTFLOW_DRAIN_TIMEOUT)")
}

// devPolicy keeps retries and lost-node detection short enough to watch.
func devPolicy() (exam.Policy, error) {
	p := exam.DefaultPolicy()
	p.RetryBase, p.RetryCap, p.HeartbeatTimeout = 10*time.Second, time.Minute, 15*time.Second
	return policyFromEnv(p)
}

// devSecrets are the demo credentials kept in the data dir so that they
// survive restarts.
type devSecrets struct {
	Device    string `json:"device"`
	Clinician string `json:"clinician"`
	Admin     string `json:"admin"`
	DeviceID  string `json:"deviceId"`
	Campus    string `json:"campus"`
	// WebhookSecret signs report-ready events to workstations.
	WebhookSecret string `json:"webhookSecret"`
	PseudonymKey  string `json:"-"`
	TokensFile    string `json:"-"`
	PseudonymFile string `json:"-"`
}

func runDev(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	var cfg devConfig
	cfg.bind(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	policy, err := devPolicy()
	if err != nil {
		return err
	}
	cfg.Policy = policy
	if cfg.Backends, err = backendsFromEnv(); err != nil {
		return err
	}
	log := newLogger(true)
	defer log.Sync()

	d, err := startDev(ctx, cfg, log)
	if err != nil {
		return err
	}
	fmt.Printf(`
octflow dev is running (data in %s)

  API           %s
  Temporal UI   %s
  Temporal      %s (namespace %s)
  S3            http://%s (bucket octflow)

  demo tokens   %s
  join env      %s   (source it before octflow api|worker|gpuworker)

Submit a phantom exam:
  ./bin/octflow phantom --out exam.dcm --seed 1
  ./bin/octflow submit --api %s --dev-tokens %s --file exam.dcm --wait

Ctrl-C stops it; running stages finish first.
`, d.stack.DataDir(), d.app.apiURL(), d.stack.UIURL(), d.stack.TemporalAddr(), d.stack.Namespace(),
		d.stack.S3Endpoint(), filepath.Join(d.stack.DataDir(), "dev-tokens.json"), filepath.Join(d.stack.DataDir(), "dev.env"),
		d.app.apiURL(), filepath.Join(d.stack.DataDir(), "dev-tokens.json"))
	<-ctx.Done()
	log.Info("stopping: draining running stages, then Temporal and S3")
	d.stop()
	return nil
}

// atLeast returns log raised to level, unless it is already stricter.
func atLeast(log *zap.Logger, level zapcore.Level) *zap.Logger {
	if !log.Core().Enabled(level - 1) {
		return log
	}
	return log.WithOptions(zap.IncreaseLevel(level))
}

// devSystem is the embedded stack plus octflow running on it.
type devSystem struct {
	stack    *devstack.Stack
	stackCfg stackConfig
	app      *app
	secrets  devSecrets
}

// startDev starts the embedded stack and every octflow part on it.
func startDev(ctx context.Context, cfg devConfig, log *zap.Logger) (*devSystem, error) {
	stack, err := devstack.Start(ctx, devstack.Config{
		DataDir: cfg.DataDir, TemporalAddr: cfg.TemporalAddr, UIAddr: cfg.UIAddr, S3Addr: cfg.S3Addr,
		// Temporal's own logs are verbose; warnings and errors are enough here.
		Logger: atLeast(log.Named("temporal"), zapcore.WarnLevel),
	})
	if err != nil {
		return nil, fmt.Errorf("dev stack: %w", err)
	}
	secrets, err := ensureDevSecrets(stack.DataDir())
	if err != nil {
		stack.Stop()
		return nil, err
	}
	creds := stack.S3Credentials()
	stackCfg := stackConfig{TemporalAddr: stack.TemporalAddr(), Namespace: stack.Namespace(),
		S3: storage.Config{Endpoint: stack.S3Endpoint(), AccessKey: creds.AccessKey, SecretKey: creds.SecretKey, Bucket: "octflow"}}
	if err := writeDevEnv(stack, stackCfg, secrets, "http://"+cfg.APIAddr); err != nil {
		stack.Stop()
		return nil, err
	}
	tokens, err := api.LoadTokens(secrets.TokensFile)
	if err != nil {
		stack.Stop()
		return nil, err
	}
	nodes := make([]gpuworker.Config, cfg.GPUNodes)
	for i := range nodes {
		nodes[i] = gpuworker.Config{NodeID: fmt.Sprintf("sim-gpu-node-%d", i+1), Breaker: cfg.Breaker,
			GPUs: gpuworker.NewSimulatedInventory(gpuworker.SimulatedGPUs{Count: max(cfg.GPUsPerNode, 1)})}
	}
	if cfg.APIOnly {
		nodes = nil
	}
	// The dev stack lets callbacks reach this machine (a workstation
	// simulator on loopback); production refuses that unless allow-listed.
	guard, err := activities.NewCallbackGuard("127.0.0.0/8, ::1/128, localhost")
	if err != nil {
		stack.Stop()
		return nil, err
	}
	hooks := &activities.Webhooks{Guard: guard, Secrets: map[string]string{"*": secrets.WebhookSecret},
		PublicURL: "http://" + cfg.APIAddr}
	a, err := startApp(ctx, appOptions{
		Webhooks: hooks, Callbacks: guard,
		Stack: stackCfg, Identity: "octflow-dev", Logger: log,
		APIAddr: cfg.APIAddr, Tokens: tokens, Pseudonymizer: api.NewPseudonymizer([]byte(secrets.PseudonymKey)),
		// Demos and tests submit in bursts from the one demo device.
		DeviceRate: deviceRateFromEnv(api.RateLimit{PerMinute: 6000, Burst: 1000}),
		Policy:     cfg.Policy, Workers: !cfg.APIOnly, GPUNodes: nodes, StopTimeout: cfg.StopTimeout, Faults: cfg.Faults,
		Backends:        cfg.Backends,
		NodeReportEvery: cmp.Or(cfg.NodeReportEvery, 5*time.Second),
	})
	if err != nil {
		stack.Stop()
		return nil, err
	}
	return &devSystem{stack: stack, stackCfg: stackCfg, app: a, secrets: secrets}, nil
}

func (d *devSystem) stop() {
	d.app.stop()
	d.stack.Stop()
}

// ensureDevSecrets creates, once, one token per role, the token-hash file
// the API reads and the pseudonym key, all under dataDir.
func ensureDevSecrets(dataDir string) (devSecrets, error) {
	s := devSecrets{
		TokensFile:    filepath.Join(dataDir, "tokens.json"),
		PseudonymFile: filepath.Join(dataDir, "pseudonym.key"),
	}
	clearPath := filepath.Join(dataDir, "dev-tokens.json")
	if b, err := os.ReadFile(clearPath); err == nil {
		if err := json.Unmarshal(b, &s); err != nil {
			return s, fmt.Errorf("read %s: %w", clearPath, err)
		}
	} else if errors.Is(err, os.ErrNotExist) {
		s.Device, s.Clinician, s.Admin = "dev-device-"+randomHex(16), "dev-clinician-"+randomHex(16), "dev-admin-"+randomHex(16)
		s.DeviceID, s.Campus = "demo-oct-1", "demo-campus"
		if err := writeJSON(clearPath, s); err != nil {
			return s, err
		}
	} else {
		return s, fmt.Errorf("read dev tokens: %w", err)
	}
	if s.WebhookSecret == "" { // data dirs from before webhooks were signed
		s.WebhookSecret = "dev-webhook-" + randomHex(16)
		if err := writeJSON(clearPath, s); err != nil {
			return s, err
		}
	}
	entries := []api.TokenEntry{
		{SHA256: api.HashToken(s.Device), Principal: api.Principal{Name: "demo device", Role: api.RoleDevice, DeviceID: s.DeviceID, Campus: s.Campus}},
		{SHA256: api.HashToken(s.Clinician), Principal: api.Principal{Name: "demo clinician", Role: api.RoleClinician, Campus: s.Campus}},
		{SHA256: api.HashToken(s.Admin), Principal: api.Principal{Name: "demo admin", Role: api.RoleAdmin}},
	}
	if err := writeJSON(s.TokensFile, entries); err != nil {
		return s, err
	}
	key, err := os.ReadFile(s.PseudonymFile)
	if errors.Is(err, os.ErrNotExist) {
		key = []byte(randomHex(32))
		err = os.WriteFile(s.PseudonymFile, key, 0o600)
	}
	if err != nil {
		return s, fmt.Errorf("pseudonym key: %w", err)
	}
	s.PseudonymKey = strings.TrimSpace(string(key))
	return s, nil
}

// writeDevEnv writes the OCTFLOW_* variables another process needs to
// join this stack.
func writeDevEnv(stack *devstack.Stack, sc stackConfig, s devSecrets, publicURL string) error {
	lines := []string{
		"# Written by octflow dev: source this to run octflow api|worker|gpuworker against the dev stack.",
		"export OCTFLOW_TEMPORAL_ADDR=" + sc.TemporalAddr,
		"export OCTFLOW_NAMESPACE=" + sc.Namespace,
		"export OCTFLOW_S3_ENDPOINT=" + sc.S3.Endpoint,
		"export OCTFLOW_S3_BUCKET=" + sc.S3.Bucket,
		"export OCTFLOW_S3_ACCESS_KEY=" + sc.S3.AccessKey,
		"export OCTFLOW_S3_SECRET_KEY=" + sc.S3.SecretKey,
		"export OCTFLOW_TOKENS_FILE=" + s.TokensFile,
		"export OCTFLOW_PSEUDONYM_KEY_FILE=" + s.PseudonymFile,
		"export OCTFLOW_WEBHOOK_SECRET=" + s.WebhookSecret,
		"export OCTFLOW_CALLBACK_ALLOW=127.0.0.0/8,::1/128,localhost",
		"export OCTFLOW_PUBLIC_URL=" + publicURL,
	}
	path := filepath.Join(stack.DataDir(), "dev.env")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
