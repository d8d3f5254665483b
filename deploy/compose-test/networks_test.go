package composetest

import (
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"gopkg.in/yaml.v3"
)

// The stack's networks, split by role (docker-compose.yml, networks;
// docs/operations.md, Hardened by default): each service joins the
// networks of what it talks to and reaches nothing else; every network
// but default is internal (no way out of the host, no published port).

// roleNetworks is the matrix: every service of the shipped file, of every
// profile, and the networks it joins. A service added to the stack fails
// TestEachServiceIsOnTheNetworksOfItsRole until it is placed here.
var roleNetworks = map[string][]string{
	"postgresql":             {"database"},
	"postgres-roles":         {"database"},
	"temporal-schema":        {"database"},
	"temporal":               {"default", "database", "temporal", "metrics"},
	"temporal-namespace":     {"temporal"},
	"temporal-ui":            {"default", "temporal"},
	"s3":                     {"storage"},
	"s3-setup":               {"storage"},
	"s3-proxy":               {"default", "storage"},
	"audit":                  {"audit"},
	"api":                    {"default", "temporal", "storage", "audit", "metrics"},
	"worker":                 {"default", "temporal", "storage", "metrics"},
	"worker-deployment":      {"temporal"},
	"worker-next":            {"default", "temporal", "storage"},
	"worker-next-deployment": {"temporal"},
	"gpu-0":                  {"temporal", "storage", "metrics"},
	"gpu-1":                  {"temporal", "storage", "metrics"},
	"prometheus":             {"default", "metrics"},
	"node-exporter":          {"metrics"},
	"postgres-exporter":      {"database", "metrics"},
	"alertmanager":           {"default", "metrics"},
	"grafana":                {"default", "metrics"},
}

// egress are the services of the stack that reach outside it, each with
// what for: with the services that publish a port, the only ones on a
// non-internal network.
var egress = map[string]string{
	"worker":       "exports to each campus's PACS and sends the report callbacks",
	"worker-next":  "the next release's worker, which exports as the worker does",
	"alertmanager": "sends to the receivers of deploy/secrets/alertmanager.yml",
}

// metricsNetwork is where Prometheus scrapes: never through default.
const metricsNetwork = "metrics"

// addressVars are the variables by which a service names another's
// address (host:port, a host, a URL or a DSN): each must reach it.
var addressVars = []string{"OCTFLOW_TEMPORAL_ADDR", "OCTFLOW_S3_ENDPOINT", "OCTFLOW_AUDIT_COLLECTOR", "TEMPORAL_ADDRESS",
	"SQL_HOST", "POSTGRES_SEEDS", "PGHOST", "DATA_SOURCE_URI"}

// reachRule is one pair the split decides: from reaches to (a service
// name or alias) on a network they share, or not.
type reachRule struct {
	from, to string
	want     bool
	why      string
}

// apart are what the split is for, in the shipped file and every overlay.
// (The services on default reach each other there: a pair of them is no
// rule here.)
var apart = []reachRule{
	{"api", "postgresql", false, "no octflow service speaks to PostgreSQL: Temporal does"},
	{"worker", "postgresql", false, "no octflow service speaks to PostgreSQL: Temporal does"},
	{"temporal-ui", "postgresql", false, "the UI reads through Temporal's frontend"},
	{"temporal-ui", "s3", false, "the UI sees sealed payloads only"},
	{"worker", "audit", false, "only the api sends to the collector"},
	{"prometheus", "postgresql", false, "Prometheus reads PostgreSQL through postgres-exporter"},
	{"grafana", "postgresql", false, "Grafana reads Prometheus only"},
	{"node-exporter", "postgresql", false, "node-exporter reads the disk, not the database"},
}

// testReach are the reaches the compose test relies on (run.sh, the
// overlay's services standing for the outside world), and the ones its
// network check asserts absent.
var testReach = []reachRule{
	{"alertmanager", "alert-sink", true, "the receivers deploy/init.sh writes: http://alert-sink:8080/cgi-bin/hook"},
	{"alert-sink", "prometheus", true, "run.sh asks Grafana's datasource URL, http://prometheus:9090, from alert-sink"},
	{"worker", "pacs", true, "the export to the demo campus's PACS, https://pacs:8443"},
	{"worker-next", "pacs", true, "the export, from the next release's worker during an upgrade"},
	{"pacs", "pacs-orthanc", true, "the PACS's TLS front (pacs-tls.conf)"},
	{"worker", "pacs-orthanc", false, "Orthanc's plain port is out of the stack's reach (run.sh)"},
	{"api", "pacs-orthanc", false, "Orthanc's plain port is out of the stack's reach"},
	{"router", "api", true, "the campus's router forwards to octflow's DICOMweb root, https://api:8080/dicom-web/ (run.sh)"},
	{"device", "router", true, "the device's C-STORE to its campus's router (run.sh)"},
	{"device", "api", false, "a device of the router's campus reaches its router, not the stack"},
	{"device", "pacs", false, "a device of the router's campus reaches its router, not the PACS"},
	{"gpu-0", "s3", true, "run.sh's as_s3 gpu-0"},
	{"gpu-0", "postgresql", false, "run.sh's network check from gpu-0"},
	{"gpu-0", "audit", false, "run.sh's network check from gpu-0"},
	{"gpu-0", "alert-sink", false, "run.sh's network check: no GPU node reaches the default network"},
	{"api", "temporal", true, "run.sh's network check from the api (its control)"},
	{"api", "postgresql", false, "run.sh's network check from the api"},
}

// scrape is what deploy/prometheus/prometheus.yml names: the host of
// every static target and Alertmanager, every DNS name, and whether a
// job reads targets from files (GPU nodes on other hosts).
type scrape struct {
	hosts  []string
	fileSD bool
}

func prometheusTargets(t *testing.T) scrape {
	t.Helper()
	type static struct {
		Targets []string `yaml:"targets"`
	}
	var cfg struct {
		Alerting struct {
			Alertmanagers []struct {
				StaticConfigs []static `yaml:"static_configs"`
			} `yaml:"alertmanagers"`
		} `yaml:"alerting"`
		ScrapeConfigs []struct {
			StaticConfigs []static `yaml:"static_configs"`
			DNSSDConfigs  []struct {
				Names []string `yaml:"names"`
			} `yaml:"dns_sd_configs"`
			FileSDConfigs []any `yaml:"file_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal([]byte(read(t, filepath.Join(repoRoot, "deploy/prometheus/prometheus.yml"))), &cfg); err != nil {
		t.Fatalf("deploy/prometheus/prometheus.yml: %v", err)
	}
	var s scrape
	add := func(statics []static) {
		for _, st := range statics {
			for _, target := range st.Targets {
				host, _, _ := strings.Cut(target, ":")
				if host != "127.0.0.1" && host != "localhost" { // Prometheus itself
					s.hosts = append(s.hosts, host)
				}
			}
		}
	}
	for _, am := range cfg.Alerting.Alertmanagers {
		add(am.StaticConfigs)
	}
	for _, sc := range cfg.ScrapeConfigs {
		add(sc.StaticConfigs)
		for _, d := range sc.DNSSDConfigs {
			s.hosts = append(s.hosts, d.Names...)
		}
		s.fileSD = s.fileSD || len(sc.FileSDConfigs) > 0
	}
	slices.Sort(s.hosts)
	s.hosts = slices.Compact(s.hosts)
	// api, worker, gpuworker, temporal, node-exporter, postgres-exporter,
	// alertmanager: a parse that finds fewer checks nothing.
	if len(s.hosts) < 7 {
		t.Fatalf("deploy/prometheus/prometheus.yml: %d targets read (%v)", len(s.hosts), s.hosts)
	}
	return s
}

// configHosts are the hosts other files have a service connect to:
// s3-proxy's stunnel configuration, Grafana's datasource.
func configHosts(t *testing.T) map[string][]string {
	t.Helper()
	hosts := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?m)^connect = ([^:\s]+):\d+$`).FindAllStringSubmatch(read(t, filepath.Join(repoRoot, "deploy/tls-proxy/s3-proxy.conf")), -1) {
		if m[1] != "127.0.0.1" {
			hosts["s3-proxy"] = append(hosts["s3-proxy"], m[1])
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*url: (\S+)$`).FindAllStringSubmatch(read(t, filepath.Join(repoRoot, "deploy/grafana/provisioning/datasources/prometheus.yml")), -1) {
		u, err := url.Parse(m[1])
		if err != nil {
			t.Fatalf("Grafana's datasource URL %q: %v", m[1], err)
		}
		hosts["grafana"] = append(hosts["grafana"], u.Hostname())
	}
	if len(hosts["s3-proxy"]) == 0 || len(hosts["grafana"]) == 0 {
		t.Fatalf("no address read from s3-proxy.conf or Grafana's datasource: %v", hosts)
	}
	return hosts
}

func isGPUNode(s types.ServiceConfig) bool { return len(s.Command) > 0 && s.Command[0] == "gpuworker" }

// ofTheStack is whether a service is the stack's own (the matrix's, or a
// GPU node added from the template), not an overlay's stand-in for the
// world outside it.
func ofTheStack(name string, s types.ServiceConfig) bool {
	_, ok := roleNetworks[name]
	return ok || isGPUNode(s)
}

// answering is, for each service that answers to host (its service name
// or an alias), the networks it answers on.
func answering(p *types.Project, host string) map[string][]string {
	out := map[string][]string{}
	for name, s := range p.Services {
		for n, cfg := range s.Networks {
			if (name == host && cfg.ServiceNameAliasEnabled()) || (cfg != nil && slices.Contains(cfg.Aliases, host)) {
				out[name] = append(out[name], n)
			}
		}
	}
	return out
}

// shared are the networks on which from reaches host.
func shared(p *types.Project, from, host string) []string {
	var nets []string
	for _, on := range answering(p, host) {
		for _, n := range on {
			if _, ok := p.Services[from].Networks[n]; ok && !slices.Contains(nets, n) {
				nets = append(nets, n)
			}
		}
	}
	sort.Strings(nets)
	return nets
}

func internal(p *types.Project, network string) bool {
	n, ok := p.Networks[network]
	return ok && n.Internal
}

// networkProblems is every way p breaks the split: the rules, in order.
func networkProblems(p *types.Project, targets scrape, hosts map[string][]string, rules []reachRule) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	names := slices.Sorted(maps.Keys(p.Services))

	// Every network but default is internal.
	for name, n := range p.Networks {
		if name == "default" && n.Internal {
			bad("the default network is internal: no port could be published, nothing could reach outside")
		}
		if name != "default" && !n.Internal {
			bad("the network %s is not internal: its services could reach outside the host", name)
		}
	}
	for _, name := range names {
		s := p.Services[name]
		if !ofTheStack(name, s) {
			continue
		}
		if s.NetworkMode != "" {
			bad("%s: network_mode %q, want the stack's networks", name, s.NetworkMode)
		}
		var external []string
		for n := range s.Networks {
			if !internal(p, n) {
				external = append(external, n)
			}
		}
		sort.Strings(external)
		// On a non-internal network: those that publish a port, and
		// those that reach outside; a published port's first.
		switch why, out := egress[name]; {
		case len(s.Ports) > 0 && len(external) == 0:
			bad("%s publishes a port on internal networks only: Docker publishes none there", name)
		case len(s.Ports) > 0 && !slices.Contains(external, s.NetworksByPriority()[0]):
			bad("%s publishes a port but is created on %s, an internal network (networks by priority: %v)", name, s.NetworksByPriority()[0], s.NetworksByPriority())
		case len(s.Ports) == 0 && out && len(external) == 0:
			bad("%s has no way out (it %s)", name, why)
		case len(s.Ports) == 0 && !out && len(external) > 0:
			bad("%s is on %v, a non-internal network, without a port to publish or a reason to reach outside (egress)", name, external)
		}
		// No GPU node on a way out of the host.
		if isGPUNode(s) && len(external) > 0 {
			bad("GPU node %s is on %v, a non-internal network", name, external)
		}
		// PostgreSQL: internal networks only, and no octflow service nor
		// GPU node with it.
		for _, n := range shared(p, name, "postgresql") {
			if isGPUNode(s) || strings.HasPrefix(s.Image, "octflow:") || strings.HasPrefix(s.Image, "octflow-test/octflow:") {
				bad("%s shares the network %s with postgresql", name, n)
			}
		}
		if name == "postgresql" && len(external) > 0 {
			bad("postgresql is on %v, a non-internal network", external)
		}
		// Each address its environment names, on a network it shares.
		for _, v := range addressVars {
			if val := s.Environment[v]; val != nil {
				host := hostOf(*val)
				if _, ok := p.Services[host]; ok || len(answering(p, host)) > 0 {
					if len(shared(p, name, host)) == 0 {
						bad("%s does not reach %s (its %s=%s): no network in common", name, host, v, *val)
					}
				} else {
					bad("%s: %s=%s names no service of the stack", name, v, *val)
				}
			}
		}
		for _, host := range hosts[name] {
			if len(shared(p, name, host)) == 0 {
				bad("%s does not reach %s, which its configuration connects to", name, host)
			}
		}
	}

	// Prometheus reaches every target, each service that answers to its
	// name on the metrics network; a GPU node answers to gpuworker.
	prom := p.Services["prometheus"]
	if _, ok := prom.Networks[metricsNetwork]; !ok {
		bad("prometheus is not on the %s network", metricsNetwork)
	}
	for _, host := range targets.hosts {
		who := answering(p, host)
		if len(who) == 0 {
			bad("Prometheus's target %s is no service or alias of the stack", host)
		}
		for svc, on := range who {
			if !slices.Contains(on, metricsNetwork) {
				bad("%s answers to Prometheus's target %s on %v, not on the %s network", svc, host, on, metricsNetwork)
			}
		}
	}
	for _, name := range names {
		if s := p.Services[name]; isGPUNode(s) && !slices.Contains(answering(p, "gpuworker")[name], metricsNetwork) {
			bad("GPU node %s does not answer to gpuworker on the %s network: Prometheus would not find it", name, metricsNetwork)
		}
	}
	out := false
	for n := range prom.Networks {
		out = out || !internal(p, n)
	}
	if targets.fileSD && !out {
		bad("prometheus reads GPU nodes on other hosts from files, but has no way out to them")
	}

	for _, r := range rules {
		if _, ok := p.Services[r.from]; !ok {
			bad("no service %s (%s)", r.from, r.why)
			continue
		}
		if len(answering(p, r.to)) == 0 {
			bad("no service answers to %s (%s)", r.to, r.why)
			continue
		}
		switch on := shared(p, r.from, r.to); {
		case r.want && len(on) == 0:
			bad("%s does not reach %s: %s", r.from, r.to, r.why)
		case !r.want && len(on) > 0:
			bad("%s reaches %s on %v: %s", r.from, r.to, on, r.why)
		}
	}
	return problems
}

// hostOf is the host an address names: host:port, a host, a URL, or a
// DSN such as postgres-exporter's "postgresql:5432/postgres?…".
func hostOf(addr string) string {
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		return u.Hostname()
	}
	host, _, _ := strings.Cut(addr, "/")
	host, _, _ = strings.Cut(host, ":")
	return host
}

// stackVariants are the shipped file and the ways a site or the test
// lays more over it: a GPU node from deploy/compose.gpu.example.yml, the
// nodes of deploy/gpu-override.sh, the compose test's overlay.
func stackVariants(t *testing.T) map[string]*types.Project {
	t.Helper()
	variants := map[string]*types.Project{}
	load := func(label, dir string, env types.Mapping, files ...string) {
		p, err := loadAll(dir, env, files...)
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		variants[label] = p
	}
	load("docker-compose.yml", repoRoot, siteSettings(), "docker-compose.yml")
	load("with deploy/compose.gpu.example.yml", repoRoot, siteSettings(), "docker-compose.yml", "deploy/compose.gpu.example.yml")

	dir := gpuOverride(t)
	load("with deploy/gpu-override.sh's nodes", dir, siteSettings(), "docker-compose.yml", "docker-compose.gpu.yml")

	env := siteSettings()
	env["OCTFLOW_TEST_API_PORT"], env["OCTFLOW_TEST_UI_PORT"] = "18080", "18233"
	load("with compose.test.yml", repoRoot, env, "docker-compose.yml", "deploy/compose-test/compose.test.yml")
	return variants
}

// The matrix, as the shipped file has it: each service on exactly the
// networks of its role.
func TestEachServiceIsOnTheNetworksOfItsRole(t *testing.T) {
	p, err := loadAll(repoRoot, siteSettings(), "docker-compose.yml")
	if err != nil {
		t.Fatalf("load docker-compose.yml: %v", err)
	}
	for name, s := range p.Services {
		want, ok := roleNetworks[name]
		if !ok {
			t.Errorf("%s is on no network of roleNetworks: place it (the networks of what it talks to)", name)
			continue
		}
		got := slices.Sorted(maps.Keys(s.Networks))
		if want = slices.Sorted(slices.Values(want)); !slices.Equal(got, want) {
			t.Errorf("%s is on %v, want %v", name, got, want)
		}
	}
	for name := range roleNetworks {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("roleNetworks places %s, which the stack does not have", name)
		}
	}
	for name, why := range egress {
		if _, ok := roleNetworks[name]; !ok {
			t.Errorf("egress names %s (%s), which the matrix does not have", name, why)
		}
	}
}

// The split holds in the shipped file and under every overlay: what
// each service's settings name it reaches, what the split keeps apart
// stays apart, Prometheus reaches every target on the metrics network,
// and only what publishes a port or must reach outside is on default.
func TestTheNetworksAreSplitByRole(t *testing.T) {
	targets, hosts := prometheusTargets(t), configHosts(t)
	for label, p := range stackVariants(t) {
		t.Run(label, func(t *testing.T) {
			rules := apart
			if label == "with compose.test.yml" {
				rules = append(slices.Clone(apart), testReach...)
				// The PACS's Orthanc: no service of the stack reaches it.
				for name, s := range p.Services {
					if ofTheStack(name, s) && len(shared(p, name, "pacs-orthanc")) > 0 {
						t.Errorf("%s reaches pacs-orthanc", name)
					}
				}
			}
			for _, problem := range networkProblems(p, targets, hosts, rules) {
				t.Error(problem)
			}
			nodes := 0
			for _, s := range p.Services {
				if isGPUNode(s) {
					nodes++
				}
			}
			if want := map[bool]int{true: 3, false: 2}[strings.Contains(label, "gpu")]; nodes != want {
				t.Errorf("%d GPU nodes checked, want %d", nodes, want)
			}
		})
	}
}

// The check above fails a stack that breaks the split: each mutation of
// the shipped file is caught, by the rule that names it.
func TestTheNetworkCheckCatchesABrokenSplit(t *testing.T) {
	targets, hosts := prometheusTargets(t), configHosts(t)
	join := func(svc, network string) func(*types.Project) {
		return func(p *types.Project) {
			s := p.Services[svc]
			s.Networks[network] = nil
			p.Services[svc] = s
		}
	}
	leave := func(svc, network string) func(*types.Project) {
		return func(p *types.Project) {
			s := p.Services[svc]
			delete(s.Networks, network)
			p.Services[svc] = s
		}
	}
	for _, c := range []struct {
		name   string
		mutate func(*types.Project)
		want   string
	}{
		{"a GPU node on the database network", join("gpu-0", "database"), "gpu-0 shares the network database with postgresql"},
		{"a GPU node on default", join("gpu-1", "default"), "GPU node gpu-1 is on [default]"},
		{"the api on the database network", join("api", "database"), "api shares the network database with postgresql"},
		{"postgresql on default", join("postgresql", "default"), "postgresql is on [default]"},
		{"the database network not internal", func(p *types.Project) {
			n := p.Networks["database"]
			n.Internal = false
			p.Networks["database"] = n
		}, "the network database is not internal"},
		{"node-exporter on default", join("node-exporter", "default"), "node-exporter is on [default], a non-internal network"},
		{"the worker without a way out", leave("worker", "default"), "worker has no way out"},
		{"the api published from internal networks only", leave("api", "default"), "api publishes a port on internal networks only"},
		{"the api created on an internal network", func(p *types.Project) {
			s := p.Services["api"]
			s.Networks["default"] = nil // no priority: audit comes first by name
			p.Services["api"] = s
		}, "api publishes a port but is created on audit"},
		{"Prometheus off the metrics network", leave("prometheus", "metrics"), "prometheus is not on the metrics network"},
		{"a target off the metrics network", leave("postgres-exporter", "metrics"), "postgres-exporter answers to Prometheus's target postgres-exporter on [database]"},
		{"a GPU node without its alias", func(p *types.Project) {
			s := p.Services["gpu-0"]
			s.Networks["metrics"] = nil
			p.Services["gpu-0"] = s
		}, "GPU node gpu-0 does not answer to gpuworker"},
		{"the api away from the collector", leave("api", "audit"), "api does not reach audit (its OCTFLOW_AUDIT_COLLECTOR=audit:2514)"},
		{"the S3 proxy away from S3", leave("s3-proxy", "storage"), "s3-proxy does not reach s3, which its configuration connects to"},
		{"the worker with the collector", join("worker", "audit"), "worker reaches audit on [audit]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := loadAll(repoRoot, siteSettings(), "docker-compose.yml")
			if err != nil {
				t.Fatalf("load docker-compose.yml: %v", err)
			}
			if problems := networkProblems(p, targets, hosts, apart); len(problems) > 0 {
				t.Fatalf("the shipped file, before the mutation: %v", problems)
			}
			c.mutate(p)
			problems := networkProblems(p, targets, hosts, apart)
			if !slices.ContainsFunc(problems, func(s string) bool { return strings.HasPrefix(s, c.want) }) {
				t.Errorf("not caught: want %q among %q", c.want, problems)
			}
		})
	}
}

// A GPU node on another host (deploy/compose.remote-node.yml) is a
// Compose project of its own: its services on that project's default
// network alone, which reaches the stack's host as any host would.
func TestTheRemoteNodeKeepsItsOwnNetwork(t *testing.T) {
	p, err := loadAll(filepath.Join(repoRoot, "deploy"), types.Mapping{"OCTFLOW_NODE_ID": "gpu-remote-1",
		"OCTFLOW_NODE_BUNDLE": "/etc/octflow/gpu-remote-1", "OCTFLOW_STACK_HOST": "octflow.hospital.test"}, "compose.remote-node.yml")
	if err != nil {
		t.Fatalf("load deploy/compose.remote-node.yml: %v", err)
	}
	for name, s := range p.Services {
		if len(s.Networks) != 1 || s.Networks["default"] != nil {
			t.Errorf("%s: networks %v, want its project's default alone", name, s.Networks)
		}
		if _, ok := s.Networks["default"]; !ok {
			t.Errorf("%s: networks %v, want its project's default", name, s.Networks)
		}
	}
	for name, n := range p.Networks {
		if name != "default" || n.Internal {
			t.Errorf("the remote node's project has the network %s (internal %v), want its default alone", name, n.Internal)
		}
	}
}
