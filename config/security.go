package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"octflow/audit"
)

// CodecKeys are the key set that seals Temporal payloads, as JSON
// ({"active": "2026-11", "keys": {"2026-11": "<base64 of 32 bytes>"}}).
// That the keys parse and each is 32 bytes is the codec's own rule: app
// opens the codec at start (app.Codec), naming the variables.
type CodecKeys struct{ JSON []byte }

// BindCodec binds the payload encryption keys: OCTFLOW_CODEC_KEYS_FILE
// names a file that holds them (the file wins), or OCTFLOW_CODEC_KEYS
// holds them. Every process that talks to Temporal needs them; without
// them it does not start.
func BindCodec(s *Set) *CodecKeys {
	k := &CodecKeys{}
	var raw string
	s.SecretFile(&raw, "OCTFLOW_CODEC_KEYS_FILE", "OCTFLOW_CODEC_KEYS")
	s.Check(func() error {
		if raw == "" {
			return errors.New("OCTFLOW_CODEC_KEYS_FILE or OCTFLOW_CODEC_KEYS: payloads to Temporal are sealed, and no keys are set (see docs/security.md, Keys)")
		}
		k.JSON = []byte(raw)
		return nil
	})
	return k
}

// BindIdentityKeys binds the keys patients' identities are sealed under
// (the way back to the PACS): OCTFLOW_IDENTITY_KEYS_FILE names a file
// that holds them (the file wins), or OCTFLOW_IDENTITY_KEYS holds them,
// in the payload keys' format. Only the api, which seals an identity at
// intake, and the worker that exports results hold them; GPU nodes,
// which hold the payload keys, never do. required: the process does not
// start without them.
func BindIdentityKeys(s *Set, required bool) *CodecKeys {
	k := &CodecKeys{}
	var raw string
	s.SecretFile(&raw, "OCTFLOW_IDENTITY_KEYS_FILE", "OCTFLOW_IDENTITY_KEYS")
	s.Check(func() error {
		if raw == "" && required {
			return errors.New("OCTFLOW_IDENTITY_KEYS_FILE or OCTFLOW_IDENTITY_KEYS: identities are sealed under keys of their own, and none are set (see docs/security.md, Keys)")
		}
		k.JSON = []byte(raw)
		return nil
	})
	return k
}

// BindPACSFile binds OCTFLOW_PACS_FILE: a JSON file naming each
// campus's PACS, its DICOMweb base URL, CA file and credential files
// (app.ReadPACSFile; docs/dicom.md, Sending them). The gateway reads
// which campuses export; the worker exports. Empty: no campus exports.
func BindPACSFile(s *Set) *string {
	var path string
	bindPACSFile(s, &path)
	return &path
}

func bindPACSFile(s *Set, p *string) {
	s.String(p, "pacs-file", "OCTFLOW_PACS_FILE", "",
		"JSON file naming each campus's PACS (DICOMweb base URL, CA and credential files); empty: no campus exports")
}

// BindInstallation binds OCTFLOW_INSTALLATION: the name of this octflow
// installation (the hospital's domain, say), unique among those that file
// results to the same PACS. The results name the installation as their
// device: their Device Observer UID and Device Serial Number are derived
// from it (results.Software.Installation), so that two installations
// are two devices; empty, they are derived from each exam's campus. The
// worker, which exports, reads it. Changing it makes the objects of later
// exports name another device.
func BindInstallation(s *Set) *string {
	var name string
	s.String(&name, "installation", "OCTFLOW_INSTALLATION", "",
		"name of this octflow installation, unique among those filing to the same PACS (e.g. the hospital's domain): the results' Device Observer UID and serial number are derived from it; empty: from each exam's campus")
	s.Check(func() error {
		if strings.TrimSpace(name) != name {
			return fmt.Errorf("OCTFLOW_INSTALLATION (--installation) %q: spaces around the name would name another device", name)
		}
		return nil
	})
	return &name
}

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

// ClientCommonName is the CN of the client certificate ("": none).
func (c *ClientTLS) ClientCommonName() string {
	if c.config == nil || len(c.config.Certificates) == 0 || len(c.config.Certificates[0].Certificate) == 0 {
		return ""
	}
	leaf, err := x509.ParseCertificate(c.config.Certificates[0].Certificate[0])
	if err != nil {
		return ""
	}
	return leaf.Subject.CommonName
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

// ServerTLS is a listener's certificate, when it serves HTTPS: the
// gateway's (BindServerTLS) or the metrics listener's (bindMetricsTLS).
type ServerTLS struct {
	cert, key string
	config    *tls.Config
}

// BindServerTLS binds the gateway's HTTPS: OCTFLOW_TLS_CERT_FILE and
// OCTFLOW_TLS_KEY_FILE (both, or neither for plain HTTP behind a TLS
// proxy).
func BindServerTLS(s *Set) *ServerTLS {
	return bindServerTLS(s, "tls-cert-file", "OCTFLOW_TLS_CERT_FILE", "tls-key-file", "OCTFLOW_TLS_KEY_FILE",
		"serve HTTPS with this certificate (PEM, chain first)")
}

// bindMetricsTLS binds the metrics listener's HTTPS (OCTFLOW_METRICS_ADDR):
// OCTFLOW_METRICS_CERT_FILE and OCTFLOW_METRICS_KEY_FILE, both or
// neither (plain HTTP).
func bindMetricsTLS(s *Set) *ServerTLS {
	return bindServerTLS(s, "metrics-cert-file", "OCTFLOW_METRICS_CERT_FILE", "metrics-key-file", "OCTFLOW_METRICS_KEY_FILE",
		"serve /metrics over HTTPS only, with this certificate (PEM, chain first)")
}

// bindServerTLS binds a listener's certificate and key files, both or
// neither, and loads them at parse: a pair that does not load stops the
// process, naming both variables.
func bindServerTLS(s *Set, certFlag, certEnv, keyFlag, keyEnv, usage string) *ServerTLS {
	t := &ServerTLS{}
	s.String(&t.cert, certFlag, certEnv, "", usage)
	s.String(&t.key, keyFlag, keyEnv, "", "its private key (PEM)")
	s.Check(func() error {
		switch {
		case t.cert == "" && t.key == "":
			return nil
		case t.cert == "" || t.key == "":
			return fmt.Errorf("%s and %s go together", certEnv, keyEnv)
		}
		pair, err := tls.LoadX509KeyPair(t.cert, t.key)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", certEnv, keyEnv, err)
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

// Uploads bound what uploads may take of the api (app: intake.Limits
// and the largest scan).
type Uploads struct {
	// MaxScanBytes is the largest scan accepted.
	MaxScanBytes int64
	// Validating is how many scans are validated at once, and
	// ValidationBytes the memory they may take together.
	Validating      int
	ValidationBytes int64
	// PerDevice bounds one device's uploads in flight.
	PerDevice int
	// Idle is the longest pause in a body; MinRate the least average
	// bytes a second.
	Idle    time.Duration
	MinRate int64
}

// Audit is where the api's audit trail goes: to a syslog collector
// through a local journal (audit.Config, which app opens with
// audit.Open), or else as JSON lines to LogFile ("": stderr).
type Audit struct {
	audit.Config
	// LogFile, without a collector, is the file the trail is appended
	// to ("": stderr).
	LogFile string
}

// Gateway is the gateway's own limits and outputs.
type Gateway struct {
	Uploads Uploads
	// CodecOrigins are the Web UI origins the codec endpoint answers.
	CodecOrigins []string
	// Audit is where the audit trail goes.
	Audit Audit
}

// BindGateway binds the gateway's upload limits over def
// (app.UploadDefaults: the api's own defaults), the Web UI origins its
// codec answers and where its audit trail goes.
func BindGateway(s *Set, def Uploads) *Gateway {
	g := &Gateway{}
	u := &g.Uploads
	var maxMiB, minRate, validationMiB int
	var origins string
	s.Int(&maxMiB, "max-scan-mib", "OCTFLOW_MAX_SCAN_MIB", int(def.MaxScanBytes>>20), "largest scan accepted, MiB (over it: 413)")
	s.Int(&u.Validating, "uploads-validating", "OCTFLOW_UPLOADS_VALIDATING", def.Validating, "scans validated at once (each holds a volume in memory)")
	s.Int(&validationMiB, "validation-mib", "OCTFLOW_VALIDATION_MIB", int(def.ValidationBytes>>20), "memory the scans being validated may take together, MiB, as their headers declare it (a scan that could never fit: 413; one that must wait too long: 503)")
	s.Int(&u.PerDevice, "uploads-per-device", "OCTFLOW_UPLOADS_PER_DEVICE", def.PerDevice, "one device's uploads in flight (over it: 429)")
	s.Duration(&u.Idle, "upload-idle", "OCTFLOW_UPLOAD_IDLE", def.Idle, "longest pause in an upload's body (over it: 408)")
	s.Int(&minRate, "upload-min-rate", "OCTFLOW_UPLOAD_MIN_RATE", int(def.MinRate), "least average upload rate in bytes a second after 10 s (under it: 408)")
	s.String(&origins, "codec-origins", "OCTFLOW_CODEC_ORIGINS", "", "Web UI origins that may call the codec endpoint from a browser, comma separated")
	a := &g.Audit
	var spoolMiB int
	s.String(&a.LogFile, "audit-log", "OCTFLOW_AUDIT_LOG", "", "without a collector: file the audit trail is appended to as JSON lines (default: stderr)")
	s.String(&a.Collector, "audit-collector", "OCTFLOW_AUDIT_COLLECTOR", "", "host:port of the syslog collector (IHE ATNA audit record repository) the audit trail goes to over TLS")
	s.String(&a.Protocol, "audit-protocol", "OCTFLOW_AUDIT_PROTOCOL", audit.ProtocolRELP, "how the audit trail reaches the collector: relp (RELP over TLS: the collector answers for each message) or syslog-tls (RFC 5425, for a collector without RELP)")
	s.String(&a.CAFile, "audit-ca", "OCTFLOW_AUDIT_CA", "", "PEM CA certificates the collector's certificate must chain to (default: the system's)")
	s.String(&a.CertFile, "audit-cert", "OCTFLOW_AUDIT_CERT", "", "client certificate (PEM) for the collector")
	s.String(&a.KeyFile, "audit-key", "OCTFLOW_AUDIT_KEY", "", "client certificate's key (PEM)")
	s.String(&a.ServerName, "audit-server-name", "OCTFLOW_AUDIT_SERVER_NAME", "", "name the collector's certificate must carry (default: the collector's host)")
	s.String(&a.SpoolDir, "audit-spool", "OCTFLOW_AUDIT_SPOOL", "", "durable local journal of the audit trail, replayed to the collector (a persistent volume; required with a collector)")
	s.Int(&spoolMiB, "audit-spool-mib", "OCTFLOW_AUDIT_SPOOL_MIB", 256, "audit messages not yet delivered that the journal may hold, MiB (past it: requests are refused 503)")
	s.String(&a.AppName, "audit-app-name", "OCTFLOW_AUDIT_APP_NAME", "octflow", "syslog APP-NAME of the audit messages")
	s.String(&a.Site, "audit-site", "OCTFLOW_AUDIT_SITE", "", "AuditEnterpriseSiteID of the audit messages, e.g. the hospital's name")
	s.Check(func() error {
		if maxMiB < 1 || u.Validating < 1 || u.PerDevice < 1 || minRate < 1 || validationMiB < 1 {
			return errors.New("OCTFLOW_MAX_SCAN_MIB, OCTFLOW_UPLOADS_VALIDATING, OCTFLOW_VALIDATION_MIB, OCTFLOW_UPLOADS_PER_DEVICE and OCTFLOW_UPLOAD_MIN_RATE must be positive")
		}
		u.ValidationBytes = int64(validationMiB) << 20
		u.MaxScanBytes, u.MinRate = int64(maxMiB)<<20, int64(minRate)
		a.SpoolBytes = int64(spoolMiB) << 20
		for _, o := range strings.Split(origins, ",") {
			if o = strings.TrimSpace(o); o != "" {
				g.CodecOrigins = append(g.CodecOrigins, o)
			}
		}
		switch {
		case a.Collector != "" && a.SpoolDir == "":
			return errors.New("OCTFLOW_AUDIT_COLLECTOR needs OCTFLOW_AUDIT_SPOOL, a directory that survives restarts")
		case a.Collector != "" && a.LogFile != "":
			return errors.New("OCTFLOW_AUDIT_LOG and OCTFLOW_AUDIT_COLLECTOR: set one")
		case spoolMiB < 1:
			return errors.New("OCTFLOW_AUDIT_SPOOL_MIB must be positive")
		case a.Protocol != audit.ProtocolRELP && a.Protocol != audit.ProtocolSyslogTLS:
			return errors.New("OCTFLOW_AUDIT_PROTOCOL: want relp or syslog-tls")
		}
		return nil
	})
	return g
}
