package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"octflow/api"
	"octflow/audit"
	"octflow/codec"
)

// Sealing is the key set that seals Temporal payloads.
type Sealing struct {
	file, inline string
	codec        *codec.Codec
}

// BindCodec binds the payload encryption keys: OCTFLOW_CODEC_KEYS_FILE
// names a JSON key set ({"active": "2026-11", "keys": {"2026-11":
// "<base64 of 32 bytes>"}}), or OCTFLOW_CODEC_KEYS holds it. Every
// process that talks to Temporal needs them; without them it does not
// start.
func BindCodec(s *Set) *Sealing {
	k := &Sealing{}
	s.Secret(&k.file, "OCTFLOW_CODEC_KEYS_FILE")
	s.Secret(&k.inline, "OCTFLOW_CODEC_KEYS")
	s.Check(func() error {
		var keys codec.Keys
		var err error
		switch {
		case k.file != "":
			keys, err = codec.LoadKeys(k.file)
		case k.inline != "":
			keys, err = codec.ParseKeys([]byte(k.inline))
		default:
			return errors.New("OCTFLOW_CODEC_KEYS_FILE or OCTFLOW_CODEC_KEYS: payloads to Temporal are sealed, and no keys are set (see docs/security.md, Keys)")
		}
		if err == nil {
			k.codec, err = codec.New(keys)
		}
		if err != nil {
			return fmt.Errorf("OCTFLOW_CODEC_KEYS(_FILE): %w", err)
		}
		return nil
	})
	return k
}

// Codec is the payload codec.
func (k *Sealing) Codec() *codec.Codec { return k.codec }

// ClientTLS is how a process reaches a TLS service, optionally with a
// client certificate (mTLS).
type ClientTLS struct {
	on                        bool
	ca, cert, key, serverName string
	config                    *tls.Config
}

// BindTemporalTLS binds the Temporal connection's TLS:
// OCTFLOW_TEMPORAL_TLS, _CA_FILE (the server's CA, default: the
// system's), _CERT_FILE and _KEY_FILE (a client certificate, for mTLS),
// _SERVER_NAME.
func BindTemporalTLS(s *Set) *ClientTLS {
	c := &ClientTLS{}
	s.Bool(&c.on, "temporal-tls", "OCTFLOW_TEMPORAL_TLS", false, "reach Temporal over TLS")
	s.String(&c.ca, "temporal-ca-file", "OCTFLOW_TEMPORAL_CA_FILE", "", "CA certificate(s) of the Temporal frontend (PEM)")
	s.String(&c.cert, "temporal-cert-file", "OCTFLOW_TEMPORAL_CERT_FILE", "", "client certificate for mTLS to Temporal (PEM)")
	s.String(&c.key, "temporal-key-file", "OCTFLOW_TEMPORAL_KEY_FILE", "", "its private key (PEM)")
	s.String(&c.serverName, "temporal-server-name", "OCTFLOW_TEMPORAL_SERVER_NAME", "", "the name the frontend's certificate holds, when not its address")
	s.Check(func() error {
		if !c.on && c.ca == "" && c.cert == "" {
			return nil
		}
		cfg, err := clientTLS(c.ca, c.cert, c.key, c.serverName)
		if err != nil {
			return fmt.Errorf("OCTFLOW_TEMPORAL_TLS: %w", err)
		}
		c.config = cfg
		return nil
	})
	return c
}

// BindAPITLS binds how a caller of the api trusts its HTTPS:
// OCTFLOW_API_CA_FILE names the CA certificate(s) when they are not the
// system's (a site's own CA, or the certificate of a local test setup).
func BindAPITLS(s *Set) *ClientTLS {
	c := &ClientTLS{}
	s.String(&c.ca, "api-ca-file", "OCTFLOW_API_CA_FILE", "", "CA certificate(s) of the api's HTTPS (PEM; default: the system's)")
	s.Check(func() error {
		if c.ca == "" {
			return nil
		}
		cfg, err := clientTLS(c.ca, "", "", "")
		if err != nil {
			return fmt.Errorf("OCTFLOW_API_CA_FILE: %w", err)
		}
		c.config = cfg
		return nil
	})
	return c
}

// Config is the TLS configuration, nil for a plain connection.
func (c *ClientTLS) Config() *tls.Config { return c.config }

func clientTLS(ca, cert, key, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", ca)
		}
	}
	if (cert == "") != (key == "") {
		return nil, errors.New("a client certificate needs both its certificate and its key file")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// ServerTLS is the gateway's certificate, when it serves HTTPS.
type ServerTLS struct {
	cert, key string
	config    *tls.Config
}

// BindServerTLS binds the gateway's HTTPS: OCTFLOW_TLS_CERT_FILE and
// OCTFLOW_TLS_KEY_FILE (both, or neither for plain HTTP behind a TLS
// proxy).
func BindServerTLS(s *Set) *ServerTLS {
	t := &ServerTLS{}
	s.String(&t.cert, "tls-cert-file", "OCTFLOW_TLS_CERT_FILE", "", "serve HTTPS with this certificate (PEM, chain first)")
	s.String(&t.key, "tls-key-file", "OCTFLOW_TLS_KEY_FILE", "", "its private key (PEM)")
	s.Check(func() error {
		switch {
		case t.cert == "" && t.key == "":
			return nil
		case t.cert == "" || t.key == "":
			return errors.New("OCTFLOW_TLS_CERT_FILE and OCTFLOW_TLS_KEY_FILE go together")
		}
		pair, err := tls.LoadX509KeyPair(t.cert, t.key)
		if err != nil {
			return fmt.Errorf("OCTFLOW_TLS_CERT_FILE/OCTFLOW_TLS_KEY_FILE: %w", err)
		}
		t.config = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
		return nil
	})
	return t
}

// Config is the TLS configuration, nil for plain HTTP.
func (t *ServerTLS) Config() *tls.Config { return t.config }

// Sweep is how the scan sweep runs.
type Sweep struct{ Every, Grace time.Duration }

// BindSweep binds the scan sweep's schedule: OCTFLOW_SCAN_SWEEP_EVERY
// (default 1h; 0s: no schedule) and OCTFLOW_SCAN_SWEEP_GRACE (default
// 1h: a younger scan may belong to a submission still starting).
func BindSweep(s *Set) *Sweep {
	w := &Sweep{}
	s.Duration(&w.Every, "scan-sweep-every", "OCTFLOW_SCAN_SWEEP_EVERY", time.Hour, "how often stored scans no exam took are removed (0s: never)")
	s.Duration(&w.Grace, "scan-sweep-grace", "OCTFLOW_SCAN_SWEEP_GRACE", time.Hour, "how old such a scan must be before it is removed")
	s.Check(func() error {
		if w.Every > 0 && w.Grace < time.Minute {
			return errors.New("OCTFLOW_SCAN_SWEEP_GRACE: under a minute could remove the scan of a submission still starting")
		}
		return nil
	})
	return w
}

// Gateway is the gateway's own limits and outputs.
type Gateway struct {
	Uploads      api.UploadLimits
	MaxScanBytes int64
	origins      string
	auditPath    string
	// Audit is where the audit trail goes (see audit.Config).
	Audit audit.Config
}

// BindGateway binds the gateway's upload limits, the Web UI origins its
// codec answers and where its audit log goes.
func BindGateway(s *Set) *Gateway {
	g := &Gateway{}
	var maxMiB, minRate, validationMiB int
	s.Int(&maxMiB, "max-scan-mib", "OCTFLOW_MAX_SCAN_MIB", 512, "largest scan accepted, MiB (over it: 413)")
	s.Int(&g.Uploads.Validating, "uploads-validating", "OCTFLOW_UPLOADS_VALIDATING", 4, "scans validated at once (each holds a volume in memory)")
	s.Int(&validationMiB, "validation-mib", "OCTFLOW_VALIDATION_MIB", int(api.DefaultValidationBytes>>20), "memory the scans being validated may take together, MiB, as their headers declare it (a scan that could never fit: 413; one that must wait too long: 503)")
	s.Int(&g.Uploads.PerDevice, "uploads-per-device", "OCTFLOW_UPLOADS_PER_DEVICE", 2, "one device's uploads in flight (over it: 429)")
	s.Duration(&g.Uploads.Pace.Idle, "upload-idle", "OCTFLOW_UPLOAD_IDLE", 30*time.Second, "longest pause in an upload's body (over it: 408)")
	s.Int(&minRate, "upload-min-rate", "OCTFLOW_UPLOAD_MIN_RATE", 16<<10, "least average upload rate in bytes a second after 10 s (under it: 408)")
	s.String(&g.origins, "codec-origins", "OCTFLOW_CODEC_ORIGINS", "", "Web UI origins that may call the codec endpoint from a browser, comma separated")
	s.String(&g.auditPath, "audit-log", "OCTFLOW_AUDIT_LOG", "", "without a collector: file the audit trail is appended to as JSON lines (default: stderr)")
	a := &g.Audit
	var spoolMiB int
	s.String(&a.Collector, "audit-collector", "OCTFLOW_AUDIT_COLLECTOR", "", "host:port of the syslog collector (IHE ATNA audit record repository) the audit trail goes to over TLS (RFC 5425)")
	s.String(&a.CAFile, "audit-ca", "OCTFLOW_AUDIT_CA", "", "PEM CA certificates the collector's certificate must chain to (default: the system's)")
	s.String(&a.CertFile, "audit-cert", "OCTFLOW_AUDIT_CERT", "", "client certificate (PEM) for the collector")
	s.String(&a.KeyFile, "audit-key", "OCTFLOW_AUDIT_KEY", "", "client certificate's key (PEM)")
	s.String(&a.ServerName, "audit-server-name", "OCTFLOW_AUDIT_SERVER_NAME", "", "name the collector's certificate must carry (default: the collector's host)")
	s.String(&a.SpoolDir, "audit-spool", "OCTFLOW_AUDIT_SPOOL", "", "durable local journal of the audit trail, replayed to the collector (a persistent volume; required with a collector)")
	s.Int(&spoolMiB, "audit-spool-mib", "OCTFLOW_AUDIT_SPOOL_MIB", 256, "audit messages not yet delivered that the journal may hold, MiB (past it: requests are refused 503)")
	s.String(&a.AppName, "audit-app-name", "OCTFLOW_AUDIT_APP_NAME", "octflow", "syslog APP-NAME of the audit messages")
	s.String(&a.Site, "audit-site", "OCTFLOW_AUDIT_SITE", "", "AuditEnterpriseSiteID of the audit messages, e.g. the hospital's name")
	s.Check(func() error {
		if maxMiB < 1 || g.Uploads.Validating < 1 || g.Uploads.PerDevice < 1 || minRate < 1 || validationMiB < 1 {
			return errors.New("OCTFLOW_MAX_SCAN_MIB, OCTFLOW_UPLOADS_VALIDATING, OCTFLOW_VALIDATION_MIB, OCTFLOW_UPLOADS_PER_DEVICE and OCTFLOW_UPLOAD_MIN_RATE must be positive")
		}
		g.Uploads.ValidationBytes = int64(validationMiB) << 20
		g.MaxScanBytes, g.Uploads.Pace.MinRate = int64(maxMiB)<<20, int64(minRate)
		a.SpoolBytes = int64(spoolMiB) << 20
		switch {
		case a.Collector != "" && a.SpoolDir == "":
			return errors.New("OCTFLOW_AUDIT_COLLECTOR needs OCTFLOW_AUDIT_SPOOL, a directory that survives restarts")
		case a.Collector != "" && g.auditPath != "":
			return errors.New("OCTFLOW_AUDIT_LOG and OCTFLOW_AUDIT_COLLECTOR: set one")
		case spoolMiB < 1:
			return errors.New("OCTFLOW_AUDIT_SPOOL_MIB must be positive")
		}
		return nil
	})
	return g
}

// CodecOrigins are the Web UI origins the codec endpoint answers.
func (g *Gateway) CodecOrigins() []string {
	var out []string
	for _, o := range strings.Split(g.origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, o)
		}
	}
	return out
}

// AuditTrail opens the audit trail: to the collector through the local
// journal when one is set, else unsampled JSON lines to OCTFLOW_AUDIT_LOG
// or stderr. The caller closes it.
func (g *Gateway) AuditTrail(src audit.Source, log *zap.Logger) (audit.Sink, io.Closer, error) {
	if g.Audit.Collector != "" {
		src.Site = g.Audit.Site
		t, err := audit.Open(g.Audit, src, log.Named("audit"))
		if err != nil {
			return nil, nil, fmt.Errorf("OCTFLOW_AUDIT_COLLECTOR: %w", err)
		}
		return t, t, nil
	}
	if g.auditPath == "" {
		return audit.NewLogSink(zapcore.Lock(os.Stderr), src), io.NopCloser(nil), nil
	}
	f, err := os.OpenFile(g.auditPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("OCTFLOW_AUDIT_LOG: %w", err)
	}
	return audit.NewLogSink(zapcore.AddSync(f), src), f, nil
}
