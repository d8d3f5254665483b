package composetest

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"gopkg.in/yaml.v3"
)

// Every scrape over TLS (issue 42, item 5): each job of
// deploy/prometheus/prometheus.yml, and the way to Alertmanager, is
// HTTPS with the stack's CA (tls_config.ca_file), the target's name
// checked (server_name where its targets are addresses found by DNS,
// never insecure_skip_verify), but for the jobs plainScrapes names, each
// with why; and every service Prometheus scrapes so serves TLS with a
// certificate that holds the name it is scraped by.

// plainScrapes are the scrape jobs that stay plain HTTP, and why.
var plainScrapes = map[string]string{
	"prometheus": "Prometheus's own scrape, over its container's loopback (127.0.0.1:9090): it crosses no network",
	"gpu-nodes-static": "GPU nodes on other hosts: deploy/make-node.sh gives them a client certificate for Temporal only, " +
		"none to serve metrics with, and deploy/compose.remote-node.yml publishes their metrics nowhere",
}

// stackCA is where Prometheus reads the stack's CA: its ca.pem secret.
const stackCA = "/run/secrets/ca.pem"

type promTLS struct {
	CAFile     string `yaml:"ca_file"`
	ServerName string `yaml:"server_name"`
	Insecure   bool   `yaml:"insecure_skip_verify"`
}

// promJob is a scrape job, or an Alertmanager entry, of prometheus.yml.
type promJob struct {
	Name          string  `yaml:"job_name"`
	Scheme        string  `yaml:"scheme"`
	TLS           promTLS `yaml:"tls_config"`
	StaticConfigs []struct {
		Targets []string `yaml:"targets"`
	} `yaml:"static_configs"`
	DNSSDConfigs []struct {
		Names []string `yaml:"names"`
	} `yaml:"dns_sd_configs"`
	FileSDConfigs []any `yaml:"file_sd_configs"`
}

// names are the host names the job's targets are reached by (a static
// target's host, a DNS name), and whether those are the names
// Prometheus checks (static targets) or addresses (found by DNS).
func (j promJob) names() (hosts []string, addresses bool) {
	for _, sc := range j.StaticConfigs {
		for _, target := range sc.Targets {
			host, _, _ := strings.Cut(target, ":")
			hosts = append(hosts, host)
		}
	}
	for _, d := range j.DNSSDConfigs {
		hosts = append(hosts, d.Names...)
		addresses = true
	}
	return hosts, addresses
}

// serverName is the name Prometheus checks the certificate of host for.
func (j promJob) serverName(host string) string {
	if j.TLS.ServerName != "" {
		return j.TLS.ServerName
	}
	return host
}

func parsePrometheus(text string) (jobs, alertmanagers []promJob, err error) {
	var cfg struct {
		Alerting struct {
			Alertmanagers []promJob `yaml:"alertmanagers"`
		} `yaml:"alerting"`
		ScrapeConfigs []promJob `yaml:"scrape_configs"`
	}
	err = yaml.Unmarshal([]byte(text), &cfg)
	return cfg.ScrapeConfigs, cfg.Alerting.Alertmanagers, err
}

// scrapeProblems is every way prometheus.yml (its text) reaches a target
// or Alertmanager without TLS checked against the stack's CA.
func scrapeProblems(text string) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	jobs, ams, err := parsePrometheus(text)
	if err != nil {
		return []string{err.Error()}
	}
	checked := func(what string, j promJob) {
		hosts, addresses := j.names()
		switch {
		case j.Scheme != "https":
			bad("%s is scraped over %q, want https", what, j.Scheme)
		case j.TLS.CAFile != stackCA:
			bad("%s: tls_config.ca_file %q, want the stack's CA, %s", what, j.TLS.CAFile, stackCA)
		case j.TLS.Insecure:
			bad("%s: insecure_skip_verify: its certificate unchecked", what)
		case addresses && j.TLS.ServerName == "":
			bad("%s: its targets are addresses found by DNS (%v), and no server_name says the name their certificate must hold", what, hosts)
		case len(hosts) == 0:
			bad("%s: no target", what)
		}
	}
	seen := map[string]bool{}
	for _, j := range jobs {
		seen[j.Name] = true
		if why, plain := plainScrapes[j.Name]; plain {
			// The reason must still hold: Prometheus's own on its
			// loopback; GPU nodes on other hosts from files only.
			hosts, _ := j.names()
			switch j.Name {
			case "prometheus":
				for _, h := range hosts {
					if h != "127.0.0.1" && h != "localhost" {
						bad("job prometheus scrapes %s in plain HTTP, which is not its loopback (%s)", h, why)
					}
				}
			case "gpu-nodes-static":
				if len(hosts) > 0 || len(j.FileSDConfigs) == 0 {
					bad("job gpu-nodes-static names targets of the stack in plain HTTP; it is for files of nodes on other hosts (%s)", why)
				}
			}
			continue
		}
		checked("job "+j.Name, j)
	}
	for name := range plainScrapes {
		if !seen[name] {
			bad("plainScrapes excuses job %s, which prometheus.yml does not have", name)
		}
	}
	if len(ams) == 0 {
		bad("no Alertmanager")
	}
	for _, am := range ams {
		checked("Alertmanager", am)
	}
	if len(jobs) < 9 {
		bad("%d scrape jobs read: a parse that finds fewer checks nothing", len(jobs))
	}
	return problems
}

// sans are the DNS names of each certificate deploy/make-certs.sh makes
// with its names written out (leaf NAME CN SANS …), by file.
func sans(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?m)^leaf (\S+) \S+ (DNS:\S+) `).FindAllStringSubmatch(read(t, filepath.Join(repoRoot, "deploy/make-certs.sh")), -1) {
		for _, san := range strings.Split(m[2], ",") {
			if name, ok := strings.CutPrefix(san, "DNS:"); ok {
				out[m[1]+".pem"] = append(out[m[1]+".pem"], name)
			}
		}
	}
	if len(out["metrics.pem"]) == 0 || len(out["temporal.pem"]) == 0 {
		t.Fatalf("read no names of metrics.pem or temporal.pem from deploy/make-certs.sh: %v", out)
	}
	return out
}

// servedCertificate is the certificate (a secret's name) service s
// serves its metrics with, and what is wrong with how: an octflow
// process's (or octflow's Temporal server's) OCTFLOW_METRICS_CERT_FILE,
// or an exporter-toolkit service's --web.config.file, the shipped
// deploy/prometheus/web.yml mounted there. Each file it names must be a
// secret the service mounts.
func servedCertificate(t *testing.T, s types.ServiceConfig) (cert string, problem string) {
	t.Helper()
	mounts := func(path string) bool {
		name, ok := strings.CutPrefix(path, "/run/secrets/")
		return ok && slices.ContainsFunc(s.Secrets, func(sec types.ServiceSecretConfig) bool {
			return sec.Source == name && (sec.Target == "" || sec.Target == name || sec.Target == path)
		})
	}
	if c := s.Environment["OCTFLOW_METRICS_CERT_FILE"]; c != nil {
		k := s.Environment["OCTFLOW_METRICS_KEY_FILE"]
		if k == nil || !mounts(*c) || !mounts(*k) {
			return "", fmt.Sprintf("OCTFLOW_METRICS_CERT_FILE %s and _KEY_FILE %s are not both secrets it mounts", *c, deref(k))
		}
		return filepath.Base(*c), ""
	}
	for _, arg := range s.Command {
		path, ok := strings.CutPrefix(arg, "--web.config.file=")
		if !ok {
			continue
		}
		i := slices.IndexFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == path })
		if i < 0 || filepath.Base(s.Volumes[i].Source) != "web.yml" || filepath.Base(filepath.Dir(s.Volumes[i].Source)) != "prometheus" {
			return "", fmt.Sprintf("--web.config.file=%s is not deploy/prometheus/web.yml mounted there", path)
		}
		var web struct {
			TLS struct {
				CertFile string `yaml:"cert_file"`
				KeyFile  string `yaml:"key_file"`
			} `yaml:"tls_server_config"`
		}
		if err := yaml.Unmarshal([]byte(read(t, filepath.Join(repoRoot, "deploy/prometheus/web.yml"))), &web); err != nil {
			t.Fatalf("deploy/prometheus/web.yml: %v", err)
		}
		if web.TLS.CertFile == "" || !mounts(web.TLS.CertFile) || !mounts(web.TLS.KeyFile) {
			return "", fmt.Sprintf("deploy/prometheus/web.yml's certificate %q and key %q are not both secrets it mounts", web.TLS.CertFile, web.TLS.KeyFile)
		}
		return filepath.Base(web.TLS.CertFile), ""
	}
	return "", "it serves no TLS (neither OCTFLOW_METRICS_CERT_FILE nor --web.config.file)"
}

func TestEveryScrapeIsOverTLSCheckedAgainstTheStacksCA(t *testing.T) {
	text := read(t, filepath.Join(repoRoot, "deploy/prometheus/prometheus.yml"))
	for _, p := range scrapeProblems(text) {
		t.Error(p)
	}
	jobs, ams, err := parsePrometheus(text)
	if err != nil {
		t.Fatal(err)
	}
	names := sans(t)
	for label, p := range stackVariants(t) {
		t.Run(label, func(t *testing.T) {
			prom := p.Services["prometheus"]
			if !slices.ContainsFunc(prom.Secrets, func(sec types.ServiceSecretConfig) bool { return sec.Source == filepath.Base(stackCA) }) {
				t.Errorf("prometheus does not mount the stack's CA (secret %s)", filepath.Base(stackCA))
			}
			served := 0
			for _, j := range append(jobs, ams...) {
				if _, plain := plainScrapes[j.Name]; plain {
					continue
				}
				if j.Name == "" {
					j.Name = "Alertmanager"
				}
				hosts, _ := j.names()
				for _, host := range hosts {
					for svc := range answering(p, host) {
						served++
						cert, problem := servedCertificate(t, p.Services[svc])
						if problem != "" {
							t.Errorf("%s, scraped as %s over TLS (job %q): %s", svc, host, j.Name, problem)
							continue
						}
						if want := j.serverName(host); !slices.Contains(names[cert], want) {
							t.Errorf("%s serves %s, whose names %v lack %s, the name Prometheus checks (job %q)", svc, cert, names[cert], want, j.Name)
						}
					}
				}
			}
			// api, worker, gpu-0, gpu-1, temporal, node-exporter,
			// postgres-exporter, alertmanager (twice: its scrape and
			// its alerts).
			if served < 9 {
				t.Errorf("checked %d services Prometheus reaches over TLS", served)
			}
		})
	}
}

// The check fails a prometheus.yml that scrapes a target, or reaches
// Alertmanager, without TLS checked against the stack's CA.
func TestTheScrapeCheckCatchesAPlainScrape(t *testing.T) {
	shipped := read(t, filepath.Join(repoRoot, "deploy/prometheus/prometheus.yml"))
	if p := scrapeProblems(shipped); len(p) > 0 {
		t.Fatalf("the shipped file: %v", p)
	}
	cases := []struct {
		name, old, new, want string
	}{
		{"the api's scrape plain", "  - job_name: octflow-api\n    scheme: https\n", "  - job_name: octflow-api\n", `job octflow-api is scraped over ""`},
		{"Temporal's without the CA", "  - job_name: temporal\n    scheme: https\n    tls_config:\n      ca_file: /run/secrets/ca.pem\n",
			"  - job_name: temporal\n    scheme: https\n", "job temporal: tls_config.ca_file"},
		{"node-exporter's unchecked", "  - job_name: node\n    scheme: https\n    tls_config:\n",
			"  - job_name: node\n    scheme: https\n    tls_config:\n      insecure_skip_verify: true\n", "job node: insecure_skip_verify"},
		{"GPU nodes by address without a name", "      server_name: gpuworker\n", "", "job octflow-gpuworker: its targets are addresses"},
		{"Alertmanager plain", "    - scheme: https\n", "    - scheme: http\n", `Alertmanager is scraped over "http"`},
		{"a plain job on the stack's target", "  - job_name: prometheus\n    static_configs:\n      - targets: [\"127.0.0.1:9090\"]\n",
			"  - job_name: prometheus\n    static_configs:\n      - targets: [\"127.0.0.1:9090\", \"worker:9464\"]\n", "job prometheus scrapes worker in plain HTTP"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if strings.Count(shipped, c.old) != 1 {
				t.Fatalf("prometheus.yml holds %q %d times, want once", c.old, strings.Count(shipped, c.old))
			}
			p := scrapeProblems(strings.Replace(shipped, c.old, c.new, 1))
			if !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, c.want) }) {
				t.Errorf("problems %v, want one saying %q", p, c.want)
			}
		})
	}
}
