package devstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
	"github.com/versity/versitygw/backend/meta"
	"github.com/versity/versitygw/backend/posix"
	"github.com/versity/versitygw/embedgw"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/server/temporal"
	"go.uber.org/zap"

	"octflow/exam"
	"octflow/temporalsetup"
)

// Config says where the stack keeps its data and where it listens. Zero
// values take the defaults documented on each field.
type Config struct {
	// DataDir holds the Temporal SQLite file, the S3 objects and the S3
	// credentials. Required. Restarting on the same DataDir keeps everything.
	DataDir string
	// Postgres, when set, keeps Temporal's state in PostgreSQL instead of
	// the SQLite file (the databases and schemas are set up on start).
	Postgres *Postgres
	// TemporalAddr is the Temporal gRPC frontend. Default 127.0.0.1:7233.
	TemporalAddr string
	// UIAddr is the Temporal Web UI. Default 127.0.0.1:8233; "off" disables it.
	UIAddr string
	// S3Addr is the S3 endpoint. Default 127.0.0.1:9000.
	S3Addr string
	// Namespace is registered on first start. Default "default".
	Namespace string
	// Retention is how long closed exams stay in Temporal. Default 30 days.
	Retention time.Duration
	// CodecEndpoint, when set, lets the Web UI decode encrypted payloads:
	// the browser calls it with its cookies (the codec's sign-in).
	CodecEndpoint string
	// DynamicConfig overrides or adds server dynamic config keys on top of
	// octflow's (see DefaultDynamicConfig).
	DynamicConfig map[string]any
	// Logger receives the server's logs. Default: a no-op logger.
	Logger *zap.Logger
}

// S3Credentials are the root keys of the embedded S3 endpoint. They are
// generated on first start and kept in the data dir, never in the source.
type S3Credentials struct {
	AccessKey string `json:"accessKey"`
	SecretKey string `json:"secretKey"`
}

// Stack is a running dev stack.
type Stack struct {
	cfg      Config
	temporal temporal.Server
	ui       *uiserver.Server
	s3       *S3
}

// forceSearchAttributesRefresh makes Temporal read search attributes from
// its database on every use instead of from a cache (see
// DefaultDynamicConfig).
const forceSearchAttributesRefresh = "system.forceSearchAttributesCacheRefreshOnRead"

// DefaultDynamicConfig is the Temporal dynamic config octflow runs with.
// Fairness weights the priority buckets; one task-queue partition keeps
// the weighting exact (with the default four partitions 60-vs-5 was
// measured to dispatch 44:21 instead of 12:1). The history service's
// background queues get few workers instead of 512 each: on SQLite every
// write takes the one database lock, and hundreds of visibility writers
// queued on it held up the writes that move exams along. Search
// attributes are not re-read from the database on every use (Temporal's
// system.forceSearchAttributesCacheRefreshOnRead, a testing aid): with
// SQL visibility a namespace's attributes live in its namespace record,
// and the forced re-read cost about 3 % of the engine's CPU in reads
// that took the database lock. Only a stack whose attributes are
// registered while it runs (PostgreSQL) turns it on.
//
// A history queue slice keeps the predicate that takes every task
// (history.queueShrinkPredicateMaxPendingKeys 0). By default a slice
// whose tasks are all loaded narrows its predicate at a checkpoint to the
// namespaces of its pending tasks; from then on each new range of tasks
// (every write that adds one) re-splits that slice from its universal
// neighbour, a walk over all its pending tasks, until they drain. In one
// burst profiled it cost 17 s of the engine's 130 s of CPU. The
// narrowing serves queues split per namespace, which a one-namespace
// stack does not have.
func DefaultDynamicConfig() map[string]any {
	return map[string]any{
		"matching.enableFairness":                         true,
		"matching.numTaskqueueReadPartitions":             1,
		"matching.numTaskqueueWritePartitions":            1,
		"history.cacheHostLevelMaxSize":                   8096,
		"frontend.namespaceRPS.visibility":                100,
		"history.visibilityProcessorSchedulerWorkerCount": 2,
		"history.transferProcessorSchedulerWorkerCount":   16,
		"history.timerProcessorSchedulerWorkerCount":      16,
		"history.queueShrinkPredicateMaxPendingKeys":      0,
	}
}

func (c Config) withDefaults() (Config, error) {
	if c.DataDir == "" {
		return c, errors.New("devstack: data dir is required")
	}
	// Absolute: versitygw's posix backend moves the process's working
	// directory into the S3 root when it starts, so a relative path read
	// after that would point elsewhere.
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return c, fmt.Errorf("data dir: %w", err)
	}
	c.DataDir = abs
	if c.TemporalAddr == "" {
		c.TemporalAddr = "127.0.0.1:7233"
	}
	if c.UIAddr == "" {
		c.UIAddr = "127.0.0.1:8233"
	}
	if c.S3Addr == "" {
		c.S3Addr = "127.0.0.1:9000"
	}
	if c.Namespace == "" {
		c.Namespace = "default"
	}
	if c.Retention == 0 {
		c.Retention = 30 * 24 * time.Hour
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Postgres != nil {
		pg := c.Postgres.withDefaults()
		c.Postgres = &pg
	}
	return c, nil
}

// Start brings up S3, Temporal and the Web UI and returns once all three
// accept connections. Stop must be called to release them.
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	s := &Stack{cfg: cfg}
	if s.s3, err = StartS3(ctx, cfg.DataDir, cfg.S3Addr, cfg.Logger); err != nil {
		return nil, err
	}

	dc := DefaultDynamicConfig()
	if cfg.Postgres != nil {
		// On PostgreSQL the namespace and its search attributes are
		// registered through the running server, and exams may start
		// at once: the attributes must be read where they are used, not
		// from a cache filled before. SQLite has them before it starts.
		dc[forceSearchAttributesRefresh] = true
	}
	for k, v := range cfg.DynamicConfig {
		dc[k] = v
	}
	srv, err := newTemporalServer(temporalOptions{
		frontendAddr:     cfg.TemporalAddr,
		databaseFile:     filepath.Join(cfg.DataDir, "temporal.db"),
		postgres:         cfg.Postgres,
		namespace:        cfg.Namespace,
		retention:        cfg.Retention,
		searchAttributes: exam.SearchAttributeTypes(),
		dynamicConfig:    dc,
		logger:           cfg.Logger.Named("temporal"),
	})
	if err != nil {
		s.s3.Stop()
		return nil, err
	}
	if err := srv.Start(); err != nil {
		s.s3.Stop()
		return nil, fmt.Errorf("start temporal: %w", err)
	}
	s.temporal = srv
	if cfg.Postgres != nil {
		// On SQLite the namespace is written with the schema; here it
		// is registered through the server, as on a production cluster.
		if err := s.registerNamespace(ctx); err != nil {
			s.Stop()
			return nil, err
		}
	}

	if cfg.UIAddr != "off" {
		if err := s.startUI(); err != nil {
			s.Stop()
			return nil, err
		}
	}
	return s, nil
}

func (s *Stack) registerNamespace(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: s.cfg.TemporalAddr, Namespace: s.cfg.Namespace,
		Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return fmt.Errorf("dial temporal: %w", err)
	}
	defer c.Close()
	return temporalsetup.Ensure(ctx, c, temporalsetup.Namespace{Name: s.cfg.Namespace, Retention: s.cfg.Retention,
		SearchAttributes: exam.SearchAttributeTypes()})
}

// S3 is the embedded S3 endpoint on its own: versitygw's gateway on its
// posix backend, serving plain HTTP. The dev stack runs one; tests of a
// topology without the rest of the dev stack start one with StartS3.
type S3 struct {
	addr   string
	creds  S3Credentials
	cancel context.CancelFunc
	done   chan error
	logger *zap.Logger
}

// StartS3 serves the objects under dataDir/s3 at addr, with root keys
// kept in dataDir/s3-credentials.json (made on first start), and returns
// once it accepts connections. Stop releases it.
func StartS3(ctx context.Context, dataDir, addr string, logger *zap.Logger) (*S3, error) {
	creds, err := loadOrCreateCredentials(filepath.Join(dataDir, "s3-credentials.json"))
	if err != nil {
		return nil, err
	}
	root := filepath.Join(dataDir, "s3")
	if err := os.MkdirAll(root, 0o750); err != nil {
		return nil, fmt.Errorf("create s3 dir: %w", err)
	}
	be, err := posix.New(root, meta.XattrMeta{}, posix.PosixOpts{NewDirPerm: 0o750, Concurrency: 64})
	if err != nil {
		return nil, fmt.Errorf("s3 posix backend: %w", err)
	}
	// The gateway lives until Stop, not until the caller's start context ends.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &S3{addr: addr, creds: creds, cancel: cancel, done: make(chan error, 1), logger: logger}
	go func() {
		s.done <- embedgw.RunVersityGW(runCtx, be, &embedgw.Config{
			RootUserAccess:    creds.AccessKey,
			RootUserSecret:    creds.SecretKey,
			Ports:             []string{addr},
			MaxConnections:    250,
			MaxRequests:       250,
			MultipartMaxParts: 10000,
			Quiet:             true,
			HealthPath:        "/minio/health/live",
		})
	}()
	if err := waitListening(ctx, addr, s.done); err != nil {
		s.Stop()
		return nil, fmt.Errorf("start s3: %w", err)
	}
	return s, nil
}

// Endpoint is the host:port the endpoint serves.
func (s *S3) Endpoint() string { return s.addr }

// Credentials are the endpoint's root keys.
func (s *S3) Credentials() S3Credentials { return s.creds }

// Stop shuts the endpoint down; it may be called more than once.
func (s *S3) Stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	if err := <-s.done; err != nil && !errors.Is(err, context.Canceled) {
		s.logger.Warn("s3 gateway stopped with error", zap.Error(err))
	}
	s.cancel = nil
}

func (s *Stack) startUI() error {
	host, portText, err := net.SplitHostPort(s.cfg.UIAddr)
	if err != nil {
		return fmt.Errorf("ui address %q: %w", s.cfg.UIAddr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return fmt.Errorf("ui port %q: %w", portText, err)
	}
	s.ui = uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
		Host:                host,
		Port:                port,
		TemporalGRPCAddress: s.cfg.TemporalAddr,
		EnableUI:            true,
		Codec:               uiconfig.Codec{Endpoint: s.cfg.CodecEndpoint, IncludeCredentials: s.cfg.CodecEndpoint != ""},
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
		DisableNewsFetch:    true,
		DefaultNamespace:    s.cfg.Namespace,
	}))
	done := make(chan error, 1)
	go func() { done <- s.ui.Start() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := waitListening(ctx, s.cfg.UIAddr, done); err != nil {
		return fmt.Errorf("start web ui: %w", err)
	}
	return nil
}

// Stop shuts the UI, Temporal and S3 down, in that order.
func (s *Stack) Stop() {
	if s.ui != nil {
		s.ui.Stop()
		s.ui = nil
	}
	if s.temporal != nil {
		if err := s.temporal.Stop(); err != nil {
			s.cfg.Logger.Warn("temporal stopped with error", zap.Error(err))
		}
		s.temporal = nil
	}
	s.s3.Stop()
}

// TemporalAddr is the host:port of the Temporal frontend.
func (s *Stack) TemporalAddr() string { return s.cfg.TemporalAddr }

// Namespace is the Temporal namespace octflow uses.
func (s *Stack) Namespace() string { return s.cfg.Namespace }

// S3Endpoint is the host:port of the S3 endpoint (plain HTTP, loopback).
func (s *Stack) S3Endpoint() string { return s.cfg.S3Addr }

// S3Credentials are the S3 endpoint's root keys.
func (s *Stack) S3Credentials() S3Credentials { return s.s3.Credentials() }

// UIURL is the Web UI's address, or "" when the UI is off.
func (s *Stack) UIURL() string {
	if s.cfg.UIAddr == "off" {
		return ""
	}
	return "http://" + s.cfg.UIAddr
}

// DataDir is the absolute data directory.
func (s *Stack) DataDir() string { return s.cfg.DataDir }

func loadOrCreateCredentials(path string) (S3Credentials, error) {
	var c S3Credentials
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &c); err != nil {
			return c, fmt.Errorf("read %s: %w", path, err)
		}
		return c, nil
	case !errors.Is(err, os.ErrNotExist):
		return c, fmt.Errorf("read s3 credentials: %w", err)
	}
	c = S3Credentials{AccessKey: "octflow-" + randomHex(6), SecretKey: randomHex(24)}
	b, err = json.MarshalIndent(c, "", "  ")
	if err != nil {
		return c, fmt.Errorf("encode s3 credentials: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return c, fmt.Errorf("write s3 credentials: %w", err)
	}
	return c, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}

// waitListening polls addr until it accepts a TCP connection, the server
// goroutine reports an error, or ctx ends.
func waitListening(ctx context.Context, addr string, failed <-chan error) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case err := <-failed:
			return fmt.Errorf("exited before listening: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("%s not listening: %w", addr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
