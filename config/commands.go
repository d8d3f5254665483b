package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// The settings several commands share are declared once each, here; a
// command passes the default that fits its role.

func bindTemporalAddr(s *Set, p *string) {
	s.String(p, "temporal-addr", "OCTFLOW_TEMPORAL_ADDR", "127.0.0.1:7233", "Temporal frontend host:port")
}

func bindNamespace(s *Set, p *string, def string) {
	s.String(p, "namespace", "OCTFLOW_NAMESPACE", def, "Temporal namespace of octflow's workflows")
}

func bindAPIAddr(s *Set, p *string) {
	s.String(p, "api-addr", "OCTFLOW_API_ADDR", "127.0.0.1:8080", "API listen address")
}

func bindDrain(s *Set, p *time.Duration) {
	s.Duration(p, "drain-timeout", "OCTFLOW_DRAIN_TIMEOUT", 90*time.Second, "how long running stages may finish on shutdown (SIGTERM)")
}

// httpURL says whether raw is an http or https URL with a host.
func httpURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func bindMetricsAddr(s *Set, p *string, def string) {
	s.String(p, "metrics-addr", "OCTFLOW_METRICS_ADDR", def, "serve Prometheus /metrics here, a listener of its own off the API's port, e.g. :9464 (off: nowhere)")
}

// bindMetricsListener binds a process's metrics listener: its address
// over def ("off": none, made "") and its certificate
// (OCTFLOW_METRICS_CERT_FILE and _KEY_FILE: HTTPS only, cfg; none:
// plain HTTP), which needs a listener to serve.
func bindMetricsListener(s *Set, addr *string, cfg **tls.Config, def string) {
	bindMetricsAddr(s, addr, def)
	t := bindMetricsTLS(s)
	s.Check(func() error {
		if *addr == "off" {
			*addr = ""
		}
		*cfg = t.Config()
		if *cfg != nil && *addr == "" {
			return errors.New("OCTFLOW_METRICS_CERT_FILE is set and OCTFLOW_METRICS_ADDR is off: no metrics listener to serve it")
		}
		return nil
	})
}

// API is the gateway's listener and its tokens.
type API struct {
	Addr string
	// TokensFile is the JSON file of token hashes and roles (required).
	TokensFile string
}

// BindAPI binds the gateway's listen address and token file.
func BindAPI(s *Set) *API {
	a := &API{}
	bindAPIAddr(s, &a.Addr)
	s.String(&a.TokensFile, "tokens-file", "OCTFLOW_TOKENS_FILE", "", "JSON file of token hashes and roles")
	s.Check(func() error {
		if a.TokensFile == "" {
			return errors.New("OCTFLOW_TOKENS_FILE (--tokens-file) is required")
		}
		return nil
	})
	return a
}

// BindCertificateFiles binds the certificate files (PEM) a process
// exports the expiry of though it uses none of them (app.Options.
// CertificateFiles): a comma-separated list, empty entries ignored.
func BindCertificateFiles(s *Set) *[]string {
	var raw string
	files := &[]string{}
	s.String(&raw, "certificate-files", "OCTFLOW_CERTIFICATE_FILES", "",
		"certificate files (PEM, comma-separated) whose expiry /metrics shows, for services without metrics of their own")
	s.Check(func() error {
		for f := range strings.SplitSeq(raw, ",") {
			if f = strings.TrimSpace(f); f != "" {
				*files = append(*files, f)
			}
		}
		return nil
	})
	return files
}

// Process is how a worker process stops and shows its metrics.
type Process struct {
	// Drain is how long running stages may finish on shutdown.
	Drain time.Duration
	// MetricsAddr serves Prometheus /metrics ("": nowhere); MetricsTLS,
	// when set, over HTTPS only.
	MetricsAddr string
	MetricsTLS  *tls.Config
}

// BindProcess binds the drain timeout and the metrics listener of the
// worker and the GPU node (none unless set), with its certificate.
func BindProcess(s *Set) *Process {
	p := &Process{}
	bindDrain(s, &p.Drain)
	bindMetricsListener(s, &p.MetricsAddr, &p.MetricsTLS, "")
	return p
}

// GPUNode is one GPU node's identity, its GPUs and, for simulated GPUs
// only, the benchmark's simulated GPU time and faults.
type GPUNode struct {
	ID string
	// Source is where the GPUs come from (gpuworker.Discover's sources).
	Source string
	// GPUs, Model and MemoryGiB describe simulated GPUs (GPUs: the CPU
	// slots of a node without one).
	GPUs      int
	Model     string
	MemoryGiB float64
	// Queue is the GPU task queue served; Campus, when set, the one
	// campus the node serves on that campus's own queue.
	Queue, Campus string
	ReportEvery   time.Duration
	// CacheMiB is memory for recent stage outputs (0: no cache).
	CacheMiB int
	// TakesDir is where the node notes the stages it holds ("": the
	// default for its ID; "off": no notes).
	TakesDir string
	// The simulated GPU mode (octflow bench and drills).
	FailRate, Slowdown float64
	StageTime          time.Duration
	FaultsFile         string
}

// BindGPUNode binds a GPU node's settings over def (app.GPUNodeDefaults).
func BindGPUNode(s *Set, def GPUNode) *GPUNode {
	n := &GPUNode{}
	s.String(&n.ID, "node-id", "OCTFLOW_NODE_ID", def.ID, "node identity")
	s.String(&n.Source, "gpu-source", "OCTFLOW_GPU_SOURCE", def.Source, "where the GPUs come from: nvml (a GPU host: refuse to start when NVML fails), simulated, cpu (no GPU: the stages run on the CPU, in --gpus slots), or auto (NVML where its library is, simulated GPUs where it is not)")
	s.Int(&n.GPUs, "gpus", "OCTFLOW_GPUS", def.GPUs, "simulated GPUs (or CPU slots), used only where NVML finds none")
	s.String(&n.Model, "gpu-model", "OCTFLOW_GPU_MODEL", def.Model, "model name of the simulated GPUs")
	s.Float(&n.MemoryGiB, "gpu-memory-gib", "OCTFLOW_GPU_MEMORY_GIB", def.MemoryGiB, "memory of each simulated GPU in GiB")
	s.String(&n.Queue, "task-queue", "OCTFLOW_GPU_QUEUE", def.Queue, "GPU task queue to serve")
	s.String(&n.Campus, "campus", "OCTFLOW_NODE_CAMPUS", def.Campus, "the one campus this node serves, on the campus's own queue oct-gpu-campus-<campus> (the api's OCTFLOW_CAMPUS_OWN_GPUS names it), with that campus's payload keys only (octflow node-keys); empty: every campus, on --task-queue")
	s.Float(&n.FailRate, "sim-failure-rate", "OCTFLOW_SIM_FAILURE_RATE", def.FailRate, "simulated GPUs only: fail this fraction of stages (0..1), to watch retries and the breaker")
	s.Duration(&n.StageTime, "sim-stage-time", "OCTFLOW_SIM_STAGE_TIME", def.StageTime, "simulated GPUs only: each GPU stage also sleeps about this long (simulated GPU time, for octflow bench)")
	s.Float(&n.Slowdown, "sim-slowdown", "OCTFLOW_SIM_SLOWDOWN", def.Slowdown, "simulated GPUs only: the node's simulated GPU time and its probe take this many times as long (a gray node, for octflow bench)")
	s.String(&n.FaultsFile, "sim-faults-file", "OCTFLOW_SIM_FAULTS_FILE", def.FaultsFile, "simulated GPUs only: take the GPUs' faults from this file, read every 250 ms (lines such as \"0 thermal\" or \"1 xid,ecc\"; for octflow bench and drills)")
	s.Duration(&n.ReportEvery, "report-every", "OCTFLOW_REPORT_EVERY", def.ReportEvery, "how often the node reports to the fleet view")
	s.Int(&n.CacheMiB, "cache-mib", "OCTFLOW_NODE_CACHE_MIB", def.CacheMiB, "memory for the node's recent stage outputs, read by the exam's next stage here (0: no cache)")
	s.String(&n.TakesDir, "takes-dir", "OCTFLOW_NODE_TAKES_DIR", def.TakesDir, "where the node notes the stages it holds, so that after a crash its next start hands them back at once (default: a directory for the node ID under the system's temporary directory; off: no notes)")
	s.Check(func() error {
		switch {
		case n.CacheMiB < 0:
			return fmt.Errorf("OCTFLOW_NODE_CACHE_MIB (--cache-mib) %d: want 0 (no cache) or more", n.CacheMiB)
		case n.GPUs < 1:
			return fmt.Errorf("OCTFLOW_GPUS (--gpus) %d: want at least 1", n.GPUs)
		case n.Slowdown < 1:
			return fmt.Errorf("OCTFLOW_SIM_SLOWDOWN (--sim-slowdown) %v: want 1 (as fast as the others) or more", n.Slowdown)
		case n.FailRate < 0 || n.FailRate > 1:
			return fmt.Errorf("OCTFLOW_SIM_FAILURE_RATE (--sim-failure-rate) %v: want a fraction in [0, 1]", n.FailRate)
		case n.ReportEvery <= 0:
			return errors.New("OCTFLOW_REPORT_EVERY (--report-every) must be positive")
		}
		return nil
	})
	return n
}

// Setup is what `octflow setup` registers, and where.
type Setup struct {
	TemporalAddr, Namespace string
	// Retention is how long Temporal keeps a closed exam's history (a
	// new namespace only); Wait how long setup waits for the cluster.
	Retention, Wait time.Duration
}

// BindSetup binds the namespace setup registers and how long it waits.
func BindSetup(s *Set) *Setup {
	u := &Setup{}
	bindTemporalAddr(s, &u.TemporalAddr)
	bindNamespace(s, &u.Namespace, "default")
	s.Duration(&u.Retention, "retention", "OCTFLOW_RETENTION", 30*24*time.Hour, "how long Temporal keeps a closed exam's history (new namespace only)")
	s.Duration(&u.Wait, "wait", "OCTFLOW_SETUP_WAIT", 2*time.Minute, "how long to wait for the cluster to answer and the namespace to be usable")
	s.Check(func() error {
		if u.Retention < 24*time.Hour {
			return fmt.Errorf("OCTFLOW_RETENTION (--retention) %s: Temporal needs at least 24h", u.Retention)
		}
		return nil
	})
	return u
}

// Client is how a command line client reaches the api.
type Client struct {
	APIURL string
	// Token is the bearer token, from the environment only.
	Token string
}

// BindClient binds the api's URL and the client's token.
func BindClient(s *Set) *Client {
	c := &Client{}
	s.String(&c.APIURL, "api", "OCTFLOW_API_URL", "http://127.0.0.1:8080", "API base URL")
	s.Secret(&c.Token, "OCTFLOW_TOKEN")
	return c
}

// TemporalServer is what the stack's own Temporal server
// (cmd/octflow-temporal) reads of octflow's: the one namespace its
// authorizer serves and the revoked client certificates.
type TemporalServer struct {
	Namespace string
	// RevokedFile lists revoked client certificates' serial numbers, one
	// a line ("": none).
	RevokedFile string
	// MetricsTLS, when set, serves the server's Prometheus metrics
	// (where its configuration puts them) over HTTPS only.
	MetricsTLS *tls.Config
}

// BindTemporalServer binds the stack's Temporal server's settings.
func BindTemporalServer(s *Set) *TemporalServer {
	t := &TemporalServer{}
	bindNamespace(s, &t.Namespace, "octflow")
	s.String(&t.RevokedFile, "revoked-file", "OCTFLOW_TEMPORAL_REVOKED_FILE", "", "serial numbers of revoked client certificates, one a line, read again as the file changes (deploy/revoke-node.sh)")
	mt := bindMetricsTLS(s)
	s.Check(func() error {
		t.MetricsTLS = mt.Config()
		return nil
	})
	return t
}

// Dev is `octflow dev`: the whole system in one process.
type Dev struct {
	DataDir, APIAddr, TemporalAddr, UIAddr, S3Addr string
	// GPUNodes is how many simulated GPU nodes run in the process.
	GPUNodes int
	// Drain and MetricsAddr as for every process; MetricsAddr "off" is
	// off, "" a free port (devsystem).
	Drain       time.Duration
	MetricsAddr string
	// PACSURL is the demo campus's PACS; PACSFile names each campus's, as
	// production does. One or neither.
	PACSURL, PACSFile string
	// Postgres, when set, keeps Temporal's state in PostgreSQL
	// (postgres://user@host:port/database), PostgresPassword its password.
	Postgres, PostgresPassword string
}

// BindDev binds `octflow dev`'s settings.
func BindDev(s *Set) *Dev {
	d := &Dev{}
	s.String(&d.DataDir, "data-dir", "OCTFLOW_DATA_DIR", ".data", "where exams, objects and dev secrets are kept")
	bindAPIAddr(s, &d.APIAddr)
	bindTemporalAddr(s, &d.TemporalAddr)
	s.String(&d.UIAddr, "ui-addr", "OCTFLOW_UI_ADDR", "127.0.0.1:8233", "Temporal Web UI address, or off")
	s.String(&d.S3Addr, "s3-addr", "OCTFLOW_S3_ADDR", "127.0.0.1:9000", "S3 endpoint address")
	bindMetricsAddr(s, &d.MetricsAddr, "127.0.0.1:9464")
	s.Int(&d.GPUNodes, "gpu-nodes", "OCTFLOW_GPU_NODES", 2, "simulated GPU nodes in this process")
	bindDrain(s, &d.Drain)
	s.String(&d.PACSURL, "pacs-url", "OCTFLOW_PACS_URL", "",
		"DICOMweb base URL of the PACS the demo campus's results go to (octflow posts to its /studies); empty: no export")
	bindPACSFile(s, &d.PACSFile)
	s.String(&d.Postgres, "temporal-postgres", "OCTFLOW_TEMPORAL_POSTGRES", "",
		"keep Temporal's state in PostgreSQL instead of SQLite: postgres://user@host:port/database (database and database_visibility are created)")
	s.Secret(&d.PostgresPassword, "OCTFLOW_TEMPORAL_POSTGRES_PASSWORD")
	s.Check(func() error {
		if d.GPUNodes < 0 {
			return fmt.Errorf("OCTFLOW_GPU_NODES (--gpu-nodes) %d: want 0 or more", d.GPUNodes)
		}
		if d.PACSURL != "" && d.PACSFile != "" {
			return errors.New("OCTFLOW_PACS_URL (--pacs-url) and OCTFLOW_PACS_FILE (--pacs-file): name the PACS one way")
		}
		if d.PACSURL != "" && !httpURL(d.PACSURL) {
			return fmt.Errorf("OCTFLOW_PACS_URL (--pacs-url) %q: want an http or https URL", d.PACSURL)
		}
		return nil
	})
	return d
}

// Deployment is the Worker Deployment a pipeline worker polls as
// (Worker Versioning, decision 28).
type Deployment struct {
	// Name is the deployment's ("": an unversioned worker).
	Name string
	// BuildID is this build's, within it.
	BuildID string
}

// BindDeployment binds the worker's deployment, versioned under name by
// default ("" for an unversioned worker), and its build ID, this
// binary's by default.
func BindDeployment(s *Set, name, buildID string) *Deployment {
	d := &Deployment{}
	s.String(&d.Name, "deployment", "OCTFLOW_DEPLOYMENT", name,
		`Worker Deployment the pipeline worker polls as, pinning each exam to its build ("": unversioned; see docs/operations.md, Upgrades)`)
	s.String(&d.BuildID, "build-id", "OCTFLOW_BUILD_ID", buildID, "this build's ID within the deployment (default: version+commit)")
	s.Check(func() error {
		if strings.ContainsAny(d.Name, ".:") || strings.HasPrefix(d.Name, "__") || strings.HasPrefix(d.BuildID, "__") {
			return fmt.Errorf("OCTFLOW_DEPLOYMENT %q / OCTFLOW_BUILD_ID %q: a deployment name has no '.' or ':' and neither starts with '__'", d.Name, d.BuildID)
		}
		if d.Name != "" && d.BuildID == "" {
			return errors.New("OCTFLOW_BUILD_ID is empty: a versioned worker needs its build's ID")
		}
		return nil
	})
	return d
}

// DeploymentCommand is the settings of `octflow deployment`'s commands.
type DeploymentCommand struct {
	// Wait is how long promote and ramp wait for the build's workers.
	Wait time.Duration
	// IfNone: promote only a deployment with no current build.
	IfNone bool
	// Percent is the share of new exams a ramp sends.
	Percent float64
	// Delete: retire removes the build.
	Delete bool
}

// BindDeploymentCommand binds what the deployment command sub takes.
func BindDeploymentCommand(s *Set, sub string) *DeploymentCommand {
	d := &DeploymentCommand{}
	switch sub {
	case "promote", "ramp":
		s.Duration(&d.Wait, "wait", "OCTFLOW_DEPLOYMENT_WAIT", 2*time.Minute, "how long to wait for the build's workers to poll")
	}
	switch sub {
	case "promote":
		s.Bool(&d.IfNone, "if-none", "OCTFLOW_DEPLOYMENT_IF_NONE", false, "promote only when the deployment has no current build (a first start)")
	case "ramp":
		s.Float(&d.Percent, "percent", "OCTFLOW_DEPLOYMENT_PERCENT", 10, "share of new exams the build takes (0 ends the ramp)")
		s.Check(func() error {
			if d.Percent < 0 || d.Percent > 100 {
				return fmt.Errorf("OCTFLOW_DEPLOYMENT_PERCENT (--percent) %v: a share is 0 to 100", d.Percent)
			}
			return nil
		})
	case "retire":
		s.Bool(&d.Delete, "delete", "OCTFLOW_DEPLOYMENT_DELETE", false, "remove the build from the deployment (its workers stopped)")
	}
	return d
}

// TemporalClient is how an operator's command reaches Temporal.
type TemporalClient struct{ Addr, Namespace string }

// BindTemporalClient binds the frontend and the namespace.
func BindTemporalClient(s *Set) *TemporalClient {
	c := &TemporalClient{}
	bindTemporalAddr(s, &c.Addr)
	bindNamespace(s, &c.Namespace, "default")
	return c
}
