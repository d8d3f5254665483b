// Command octflow-temporal is the compose stack's Temporal server: the
// pinned go.temporal.io/server with octflow's authorization (package
// temporalauth), so that each call is decided from the role the client
// certificate names, not allowed to any certificate of the stack's CA.
// It runs as the official image runs its server, `temporal-server start`,
// with the configuration the server renders from the environment (its
// embedded template: database, TLS, ports), and is installed under that
// name (deploy/temporal/Dockerfile). Its own settings are octflow's
// (config.BindTemporalServer): OCTFLOW_NAMESPACE (default octflow) is
// the namespace every role but the operators' acts in;
// OCTFLOW_TEMPORAL_REVOKED_FILE lists the serial numbers of revoked
// client certificates (deploy/revoke-node.sh), read again as it changes;
// OCTFLOW_METRICS_CERT_FILE and OCTFLOW_METRICS_KEY_FILE, when set, serve
// its Prometheus metrics over HTTPS only (metricsOverTLS).
// The activity task tokens GPU nodes get are bound to their certificates
// (temporalauth.TokenBinder), under a key derived from the frontend's TLS
// key.
//
// This and octflow/internal/devstack are the only places that link the server.
package main

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"

	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/temporal"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	settings "octflow/config"
	"octflow/contract"
	"octflow/exam"
	"octflow/internal/listen"
	"octflow/temporalauth"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] != "start" {
		fmt.Fprintln(os.Stderr, "usage: temporal-server start (configuration from the environment, as the official image's)")
		os.Exit(2)
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "octflow-temporal:", err)
		os.Exit(1)
	}
}

// tokenBinder binds GPU nodes' task tokens (temporalauth.TokenBinder)
// under a key derived from the frontend's TLS key, the same across
// restarts and replicas; without TLS, a key of this process's own.
func tokenBinder(cfg *config.Config) (temporalauth.TokenBinder, error) {
	material := []byte(cfg.Global.TLS.Frontend.Server.KeyData)
	if path := cfg.Global.TLS.Frontend.Server.KeyFile; path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return temporalauth.TokenBinder{}, fmt.Errorf("the frontend's TLS key, for the task tokens' binding: %w", err)
		}
		material = b
	}
	if len(material) == 0 {
		material = make([]byte, 32)
		if _, err := rand.Read(material); err != nil {
			return temporalauth.TokenBinder{}, err
		}
	}
	key := sha256.Sum256(append([]byte("octflow node task tokens/1\x00"), material...))
	return temporalauth.TokenBinder{Key: key[:]}, nil
}

// metricsOverTLS serves the server's Prometheus metrics (m, from the
// configuration: PROMETHEUS_ENDPOINT) over HTTPS only, with cfg. The
// server's own listener serves plain HTTP and has no TLS setting, so it
// is moved to a free port of this host's loopback, and a TLS front
// (package listen, as octflow's own metrics listeners) takes the
// configured address and passes on each request for the metrics path,
// and nothing else. It says where the front listens.
func metricsOverTLS(m *metrics.Config, cfg *tls.Config, errLog *stdlog.Logger) (*http.Server, string, error) {
	if m == nil || m.Prometheus == nil || m.Prometheus.ListenAddress == "" {
		return nil, "", errors.New("OCTFLOW_METRICS_CERT_FILE is set and the server serves no Prometheus metrics (PROMETHEUS_ENDPOINT)")
	}
	p := m.Prometheus
	if p.ListenNetwork != "" && p.ListenNetwork != "tcp" {
		return nil, "", fmt.Errorf("OCTFLOW_METRICS_CERT_FILE: the metrics listener's network is %s, want tcp", p.ListenNetwork)
	}
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("a loopback port for the server's own metrics listener: %w", err)
	}
	inner := free.Addr().String()
	free.Close()
	public := p.ListenAddress
	mux := http.NewServeMux()
	mux.Handle(cmp.Or(p.HandlerPath, "/metrics"), httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: inner}))
	front, addr, err := listen.Metrics(public, cfg, mux, errLog)
	if err != nil {
		return nil, "", fmt.Errorf("metrics listen (PROMETHEUS_ENDPOINT %s): %w", public, err)
	}
	p.ListenAddress = inner
	return front, addr, nil
}

func run() error {
	cfg, err := config.Load(config.WithEmbedded())
	if err != nil {
		return fmt.Errorf("load configuration: %w", err)
	}
	// The authorizer runs in the frontend only: every other service
	// listens on loopback, where only the server's own services reach
	// it (they run in this one process and advertise 127.0.0.1).
	for _, name := range []string{"history", "matching", "worker", "internal-frontend"} {
		if svc, ok := cfg.Services[name]; ok {
			svc.RPC.BindOnIP, svc.RPC.BindOnLocalHost = "127.0.0.1", false
			cfg.Services[name] = svc
		}
	}
	own := settings.New("octflow-temporal", nil)
	octflowCfg := settings.BindTemporalServer(own)
	if err := own.Parse(nil); err != nil {
		return err
	}
	zl := log.BuildZapLogger(cfg.Log)
	logger := log.NewZapLogger(zl)
	if octflowCfg.MetricsTLS != nil {
		errLog, err := zap.NewStdLogAt(zl.Named("metrics-http"), zapcore.InfoLevel)
		if err != nil {
			return err
		}
		front, addr, err := metricsOverTLS(cfg.Global.Metrics, octflowCfg.MetricsTLS, errLog)
		if err != nil {
			return err
		}
		defer front.Close()
		logger.Info("Prometheus metrics over HTTPS only, on " + addr)
	}
	authz := temporalauth.Authorizer{Namespace: octflowCfg.Namespace,
		FleetWorkflowID: contract.FleetWorkflowID, FleetWorkflowType: contract.FleetWorkflow, FleetSignal: contract.NodeReportSignal,
		FleetQueue: exam.WorkflowQueue, FleetNodeQuery: contract.NodeStateQuery, GPUQueue: exam.GPUQueue, WorkerSchedules: []string{contract.ScanSweepScheduleID}}
	var revoked *temporalauth.Revoked
	if octflowCfg.RevokedFile != "" {
		revoked = temporalauth.NewRevoked(octflowCfg.RevokedFile)
	}
	logger.Info("octflow authorization: roles from the client certificate's OU; namespace " + authz.Namespace)
	binder, err := tokenBinder(cfg)
	if err != nil {
		return err
	}
	s, err := temporal.NewServer(
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithConfig(cfg),
		temporal.WithLogger(logger),
		temporal.InterruptOn(temporal.InterruptCh()),
		temporal.WithAuthorizer(authz),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return temporalauth.ClaimMapper{Revoked: revoked} }),
		temporal.WithChainedFrontendGrpcInterceptors(binder.Intercept),
	)
	if err != nil {
		return fmt.Errorf("create server: %w", err)
	}
	if err := s.Start(); err != nil {
		return fmt.Errorf("start server: %w", err)
	}
	return nil
}
