// Package devsystem is the whole of octflow in one process, as `octflow
// dev`, the end-to-end tests and the benchmark run it: the embedded
// stack (Temporal, its Web UI, an S3 endpoint; see devstack) with the
// gateway, the workers and simulated GPU nodes on it, and the demo
// credentials kept in the data dir.
package devsystem

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"octflow/activities"
	"octflow/api"
	"octflow/api/auth"
	"octflow/api/intake"
	"octflow/app"
	"octflow/audit"
	"octflow/callback"
	"octflow/codec"
	"octflow/config"
	"octflow/exam"
	"octflow/gpuworker"
	"octflow/inference"
	"octflow/internal/devstack"
	"octflow/workers"
)

// Config is what the dev system is told.
type Config struct {
	DataDir      string
	APIAddr      string
	TemporalAddr string
	UIAddr       string
	S3Addr       string
	// Postgres, when set, keeps Temporal's state in PostgreSQL instead
	// of the SQLite file in DataDir.
	Postgres *devstack.Postgres
	GPUNodes int
	Policy   exam.Policy
	// Stages are the pipeline the system runs (nil: activities.Pipeline(),
	// the shipped one).
	Stages      activities.Stages
	StopTimeout time.Duration
	// GPUsPerNode is the GPUs of each simulated node (default 1).
	GPUsPerNode int
	// Breaker tunes the simulated nodes' circuit breakers.
	Breaker gpuworker.BreakerConfig
	// NodeReportEvery is how often nodes report to the fleet (default 5 s).
	NodeReportEvery time.Duration
	// APIOnly starts the stack and the gateway but no worker or GPU node;
	// tests start those later to watch an exam wait.
	APIOnly bool
	// SimulatedCompute runs in a GPU stage once it holds its GPU and has
	// reported its start: the simulated nodes' GPU time.
	SimulatedCompute activities.SimulatedComputeFunc
	// ClientInterceptors and WorkerInterceptors are app.Options' (the
	// tests inject faults with them).
	ClientInterceptors []interceptor.ClientInterceptor
	WorkerInterceptors func(identity string) []interceptor.WorkerInterceptor
	// Models are the served models of the stages pointed at one
	// (OCTFLOW_MODEL_*; none: the reference implementations).
	Models map[exam.Stage]inference.Model
	// DeviceRate limits each device's submissions (zero: the dev
	// default, 6000 a minute with bursts of 1000, for demos and tests
	// that submit in bursts from the one demo device).
	DeviceRate intake.RateLimit
	// Uploads bounds the gateway's uploads (zero fields: defaults).
	Uploads intake.Limits
	// SweepEvery and SweepGrace schedule the scan sweep (zero: every
	// 10 minutes, scans older than an hour).
	SweepEvery, SweepGrace time.Duration
	// Deployment, when named, versions the pipeline worker (Worker
	// Versioning): it polls as this Deployment Version, which becomes the
	// deployment's current one if it has none.
	Deployment worker.WorkerDeploymentVersion
	// PACSURL, when set, is the DICOMweb base URL the demo campus's
	// results are exported to (octflow dev --pacs-url, OCTFLOW_PACS_URL).
	PACSURL string
	// PACSFile, when set, names each campus's PACS as production does
	// (octflow dev --pacs-file, OCTFLOW_PACS_FILE; app.ReadPACSFile):
	// URL, CA and credential files. It replaces PACSURL.
	PACSFile string
	// AuditTrail receives the gateway's audit events (default: JSON lines
	// appended to audit.log in the data dir).
	AuditTrail audit.Sink
	// APITLS, when set, serves the gateway over HTTPS.
	APITLS *tls.Config
	// MetricsAddr serves /metrics, off the gateway's port ("": a free
	// loopback port; "off": none). StatusMaxAge is how long a reading
	// of Temporal for the status metrics serves scrapes (default 1 s).
	MetricsAddr  string
	StatusMaxAge time.Duration
	// Streams bounds the gateway's event streams, and SpoolMaxBytes the
	// disk its uploads in flight take (zero: the gateway's defaults).
	Streams       api.StreamLimits
	SpoolMaxBytes int64
	// ExtraCampuses are demo campuses beyond the two, each with a device
	// and a clinician of its own (the benchmark's campus scenarios).
	ExtraCampuses []string
}

// Secrets are the demo credentials kept in the data dir so that they
// survive restarts. Two campuses are set up, each a tenant: the first
// keeps the single keys (device, clinician, campus) older data dirs
// had, and Devices and Clinicians list every token of both.
type Secrets struct {
	Device    string `json:"device"`
	Clinician string `json:"clinician"`
	Admin     string `json:"admin"`
	DeviceID  string `json:"deviceId"`
	Campus    string `json:"campus"`
	// Devices and Clinicians are the demo tokens of both campuses.
	Devices    []DeviceToken    `json:"devices"`
	Clinicians []ClinicianToken `json:"clinicians"`
	// Router is the first campus's DICOM router token (STOW-RS for any
	// of its devices, e.g. an Orthanc forwarding C-STOREs).
	Router string `json:"router"`
	// WebhookSecret signs report-ready events to workstations.
	WebhookSecret string `json:"webhookSecret"`
	PseudonymKey  string `json:"-"`
	TokensFile    string `json:"-"`
	PseudonymFile string `json:"-"`
	// CodecKeysFile holds the keys that seal Temporal payloads.
	CodecKeysFile string `json:"-"`
	// IdentityKeysFile holds the keys that seal patients' identities
	// (the api's and the exporting worker's, no GPU node's).
	IdentityKeysFile string `json:"-"`
}

// atLeast returns log raised to level, unless it is already stricter.
func atLeast(log *zap.Logger, level zapcore.Level) *zap.Logger {
	if !log.Core().Enabled(level - 1) {
		return log
	}
	return log.WithOptions(zap.IncreaseLevel(level))
}

// System is the embedded stack plus octflow running on it.
type System struct {
	Stack *devstack.Stack
	// StackConfig is how another process joins the stack.
	StackConfig config.Stack
	App         *app.App
	Secrets     Secrets
	auditFile   *os.File // the default audit trail's, closed by Stop
}

// Start starts the embedded stack and every octflow part on it.
func Start(ctx context.Context, cfg Config, log *zap.Logger) (*System, error) {
	if cfg.DeviceRate == (intake.RateLimit{}) {
		cfg.DeviceRate = intake.RateLimit{PerMinute: 6000, Burst: 1000}
	}
	apiURL := "http://" + cfg.APIAddr
	if cfg.APITLS != nil {
		apiURL = "https://" + cfg.APIAddr
	}
	stack, err := devstack.Start(ctx, devstack.Config{
		DataDir: cfg.DataDir, TemporalAddr: cfg.TemporalAddr, UIAddr: cfg.UIAddr, S3Addr: cfg.S3Addr, Postgres: cfg.Postgres,
		// The Web UI shows sealed payloads through the gateway's codec.
		CodecEndpoint: apiURL + "/codec",
		// Temporal's own logs are verbose; warnings and errors are enough here.
		Logger: atLeast(log.Named("temporal"), zapcore.WarnLevel),
	})
	if err != nil {
		return nil, fmt.Errorf("dev stack: %w", err)
	}
	secrets, err := EnsureSecrets(stack.DataDir(), cfg.ExtraCampuses...)
	if err != nil {
		stack.Stop()
		return nil, err
	}
	creds := stack.S3Credentials()
	stackCfg := config.Stack{TemporalAddr: stack.TemporalAddr(), Namespace: stack.Namespace(),
		S3: config.S3{Endpoint: stack.S3Endpoint(), AccessKey: creds.AccessKey, SecretKey: creds.SecretKey, Bucket: "octflow"}}
	if err := writeDevEnv(stack, stackCfg, secrets, apiURL); err != nil {
		stack.Stop()
		return nil, err
	}
	tokens, err := auth.LoadTokens(secrets.TokensFile)
	if err != nil {
		stack.Stop()
		return nil, err
	}
	sealer, err := codec.Open(secrets.CodecKeysFile)
	if err != nil {
		stack.Stop()
		return nil, err
	}
	identities, err := codec.Open(secrets.IdentityKeysFile)
	if err != nil {
		stack.Stop()
		return nil, err
	}
	nodes := make([]gpuworker.Config, cfg.GPUNodes)
	for i := range nodes {
		id := fmt.Sprintf("sim-gpu-node-%d", i+1)
		nodes[i] = gpuworker.Config{NodeID: id, Breaker: cfg.Breaker,
			GPUs:     gpuworker.NewSimulatedInventory(gpuworker.SimulatedGPUs{Count: max(cfg.GPUsPerNode, 1)}),
			TakesDir: filepath.Join(stack.DataDir(), "node-takes", id)}
	}
	guard, err := callback.New(callbackAllow)
	if err != nil {
		stack.Stop()
		return nil, err
	}
	trail, auditFile := cfg.AuditTrail, (*os.File)(nil)
	if trail == nil {
		// The dev stack's audit trail: unsampled JSON lines in the data dir.
		if auditFile, err = os.OpenFile(filepath.Join(stack.DataDir(), "audit.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err != nil {
			stack.Stop()
			return nil, fmt.Errorf("audit log: %w", err)
		}
		trail = audit.NewLogSink(zapcore.AddSync(auditFile), audit.Source{ID: "octflow-dev"})
	}
	hooks := &activities.Webhooks{Guard: guard, Secrets: map[string]string{"*": secrets.WebhookSecret},
		PublicURL: apiURL}
	var pacs map[string]activities.PACSTarget
	switch {
	case cfg.PACSFile != "":
		entries, err := app.ReadPACSFile(cfg.PACSFile)
		if err == nil {
			pacs, err = app.PACSTargets(entries)
		}
		if err != nil {
			stack.Stop()
			if auditFile != nil {
				auditFile.Close()
			}
			return nil, err
		}
	case cfg.PACSURL != "":
		pacs = map[string]activities.PACSTarget{secrets.Campus: {URL: cfg.PACSURL}}
	}
	// Which campuses export: those with a PACS.
	exportCampuses := map[string]bool{}
	for campus := range pacs {
		exportCampuses[campus] = true
	}
	opts := app.Options{
		Stack: stackCfg, Identity: "octflow-dev", Logger: log, Stages: cfg.Stages, Models: cfg.Models, StopTimeout: cfg.StopTimeout,
		MetricsAddr: metricsAddr(cfg.MetricsAddr), Codec: sealer,
		ClientInterceptors: cfg.ClientInterceptors, WorkerInterceptors: cfg.WorkerInterceptors,
		Gateway: &app.GatewayOptions{Addr: cfg.APIAddr, TLS: cfg.APITLS, API: api.Config{
			Tokens: tokens, Pseudonymizer: intake.NewPseudonymizer([]byte(secrets.PseudonymKey)),
			Policy: cfg.Policy, DeviceRate: cfg.DeviceRate, Callbacks: guard, Identities: identities,
			ExportCampuses: exportCampuses, CodecOrigins: []string{stack.UIURL()},
			StatusMaxAge: cmp.Or(cfg.StatusMaxAge, time.Second), Streams: cfg.Streams, SpoolMaxBytes: cfg.SpoolMaxBytes,
			Uploads: cfg.Uploads, AuditTrail: trail,
		}},
	}
	if !cfg.APIOnly {
		opts.Worker = &app.WorkerOptions{
			Pipeline:     workers.PipelineOptions{Webhooks: hooks, PACS: pacs, Identities: identities, Deployment: cfg.Deployment},
			PromoteFirst: true,
			Housekeeping: workers.HousekeepingOptions{SweepEvery: cmp.Or(cfg.SweepEvery, 10*time.Minute),
				SweepGrace: cmp.Or(cfg.SweepGrace, time.Hour)},
		}
		opts.GPU = &app.GPUOptions{Nodes: nodes, ReportEvery: cmp.Or(cfg.NodeReportEvery, 5*time.Second),
			SimulatedCompute: cfg.SimulatedCompute}
	}
	a, err := app.Start(ctx, opts)
	if err != nil {
		stack.Stop()
		if auditFile != nil {
			auditFile.Close()
		}
		return nil, err
	}
	return &System{Stack: stack, StackConfig: stackCfg, App: a, Secrets: secrets, auditFile: auditFile}, nil
}

// metricsAddr is where the dev system serves /metrics: a free loopback
// port unless told, nowhere when told "off".
func metricsAddr(addr string) string {
	switch addr {
	case "":
		return "127.0.0.1:0"
	case "off":
		return ""
	}
	return addr
}

// Stop drains octflow's parts, then stops the stack.
func (d *System) Stop() {
	d.App.Stop()
	d.Stack.Stop()
	if d.auditFile != nil {
		d.auditFile.Close()
	}
}

// DeviceToken is a demo device's token.
type DeviceToken struct {
	Token    string `json:"token"`
	DeviceID string `json:"deviceId"`
	Campus   string `json:"campus"`
}

// ClinicianToken is a demo clinician's token.
type ClinicianToken struct {
	Token  string `json:"token"`
	Campus string `json:"campus"`
}

// The demo campuses.
const (
	FirstCampus  = "demo-campus"
	SecondCampus = "north-campus"
)

// EnsureSecrets creates, once, one token per role, the token-hash file
// the API reads, the pseudonym key and the codec keys, all under dataDir,
// and a device and a clinician for each of the extra campuses not there
// yet. Tests that run octflow's roles as separate processes use it too.
func EnsureSecrets(dataDir string, extraCampuses ...string) (Secrets, error) {
	s := Secrets{
		TokensFile:    filepath.Join(dataDir, "tokens.json"),
		PseudonymFile: filepath.Join(dataDir, "pseudonym.key"),
		CodecKeysFile: filepath.Join(dataDir, "codec-keys.json"), IdentityKeysFile: filepath.Join(dataDir, "identity-keys.json"),
	}
	clearPath := filepath.Join(dataDir, "dev-tokens.json")
	if b, err := os.ReadFile(clearPath); err == nil {
		if err := json.Unmarshal(b, &s); err != nil {
			return s, fmt.Errorf("read %s: %w", clearPath, err)
		}
		if s.Admin == "" || s.WebhookSecret == "" || s.Router == "" || len(s.Devices) == 0 || len(s.Clinicians) == 0 {
			return s, fmt.Errorf("%s lacks some of the dev tokens (written by an octflow before version 1?): remove %s to start afresh", clearPath, dataDir)
		}
	} else if errors.Is(err, os.ErrNotExist) {
		s.Device, s.Clinician, s.Admin = "dev-device-"+randomHex(16), "dev-clinician-"+randomHex(16), "dev-admin-"+randomHex(16)
		s.DeviceID, s.Campus = "demo-oct-1", FirstCampus
		s.WebhookSecret, s.Router = "dev-webhook-"+randomHex(16), "dev-router-"+randomHex(16)
		s.Devices = []DeviceToken{{s.Device, s.DeviceID, s.Campus}, {"dev-device-" + randomHex(16), "north-oct-1", SecondCampus}}
		s.Clinicians = []ClinicianToken{{s.Clinician, s.Campus}, {"dev-clinician-" + randomHex(16), SecondCampus}}
		if err := writeJSON(clearPath, s); err != nil {
			return s, err
		}
	} else {
		return s, fmt.Errorf("read dev tokens: %w", err)
	}
	added := false
	for i, campus := range extraCampuses {
		if err := exam.ValidateCampus(campus); err != nil {
			return s, fmt.Errorf("extra campus: %w", err)
		}
		if slices.ContainsFunc(s.Devices, func(d DeviceToken) bool { return d.Campus == campus }) {
			continue
		}
		s.Devices = append(s.Devices, DeviceToken{"dev-device-" + randomHex(16), fmt.Sprintf("oct-%d", i+3), campus})
		s.Clinicians = append(s.Clinicians, ClinicianToken{"dev-clinician-" + randomHex(16), campus})
		added = true
	}
	if added {
		if err := writeJSON(clearPath, s); err != nil {
			return s, err
		}
	}
	entries := []auth.TokenEntry{
		{SHA256: auth.HashToken(s.Admin), Principal: auth.Principal{Name: "demo admin", Role: auth.RoleAdmin}},
	}
	// The first campus's principals are "demo <role>", the others "<campus> <role>".
	name := func(role, campus string) string {
		if campus == s.Campus {
			return "demo " + role
		}
		return campus + " " + role
	}
	for _, d := range s.Devices {
		entries = append(entries, auth.TokenEntry{SHA256: auth.HashToken(d.Token),
			Principal: auth.Principal{Name: name("device", d.Campus), Role: auth.RoleDevice, DeviceID: d.DeviceID, Campus: d.Campus, Urgent: true}})
	}
	entries = append(entries, auth.TokenEntry{SHA256: auth.HashToken(s.Router),
		Principal: auth.Principal{Name: "demo router", Role: auth.RoleRouter, DeviceID: "demo-router", Campus: s.Campus, Urgent: true}})
	for _, c := range s.Clinicians {
		entries = append(entries, auth.TokenEntry{SHA256: auth.HashToken(c.Token),
			Principal: auth.Principal{Name: name("clinician", c.Campus), Role: auth.RoleClinician, Campus: c.Campus}})
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
	for _, path := range []string{s.CodecKeysFile, s.IdentityKeysFile} {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			keys, err := codec.NewKeys("dev-1")
			if err != nil {
				return s, err
			}
			if err := writeJSON(path, keys); err != nil {
				return s, err
			}
		}
	}
	return s, nil
}

// NodeEnv is the OCTFLOW_* environment another process needs to join
// this stack: octflow api, worker or gpuworker.
func (d *System) NodeEnv() []string { return JoinEnv(d.StackConfig, d.Secrets) }

// JoinEnv is the OCTFLOW_* environment a process of any role needs to
// join the stack sc with the secrets s (config names the variables).
func JoinEnv(sc config.Stack, s Secrets) []string { return join(sc, s).Env() }

// join is what a process of any role is told to join the stack sc with
// the secrets s.
func join(sc config.Stack, s Secrets) config.Join {
	return config.Join{Stack: sc, TokensFile: s.TokensFile, PseudonymKeyFile: s.PseudonymFile, CodecKeysFile: s.CodecKeysFile,
		IdentityKeysFile: s.IdentityKeysFile, WebhookSecret: s.WebhookSecret, CallbackAllow: callbackAllow}
}

// callbackAllow lets the dev stack's callbacks reach this machine (a
// workstation simulator on loopback); production refuses that unless
// allow-listed.
const callbackAllow = "127.0.0.0/8,::1/128,localhost"

// writeDevEnv writes the OCTFLOW_* variables another process needs to
// join this stack, as a file to source.
func writeDevEnv(stack *devstack.Stack, sc config.Stack, s Secrets, publicURL string) error {
	lines := []string{"# Written by octflow dev: source this to run octflow api|worker|gpuworker against the dev stack."}
	j := join(sc, s)
	j.PublicURL = publicURL
	for _, kv := range j.Env() {
		lines = append(lines, "export "+kv)
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
