package e2e

// The production stack's compose file, loaded with the compose
// specification's own library (it cannot be run here: images cannot be
// pulled on these machines).

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"gopkg.in/yaml.v3"

	"octflow/internal/devstack"
)

// roles are the compose services that run octflow: the command each runs.
var roles = map[string]string{"api": "api", "worker": "worker", "gpu-0": "gpuworker", "gpu-1": "gpuworker", "temporal-namespace": "setup",
	"worker-deployment": "deployment promote"}

func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	// The loader reads the working directory, which an earlier test's
	// stack may have moved into a folder since removed.
	t.Chdir(repoRoot)
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  repoRoot,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(repoRoot, "docker-compose.yml")}},
		// What deploy/init.sh writes to .env: without it the file does
		// not load (deploy/compose-test's TestTheStackDoesNotStartWithoutItsSettings).
		Environment: types.Mapping{"OCTFLOW_PUBLIC_URL": "https://octflow.hospital.test", "OCTFLOW_TEMPORAL_BIND": "127.0.0.1",
			"OCTFLOW_S3_BIND": "127.0.0.1"},
	}, func(o *loader.Options) {
		o.SetProjectName("octflow", true)
		// The env files hold the secrets and are not committed.
		o.SkipResolveEnvironment = true
	})
	if err != nil {
		t.Fatalf("load docker-compose.yml: %v", err)
	}
	return p
}

// commandVars is every OCTFLOW_* variable `octflow <command>` reads, from
// its own -h.
func commandVars(t *testing.T, command string) map[string]bool {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "OCTFLOW_TEST_AS_MAIN="+command+" -h")
	out, _ := cmd.CombinedOutput() // -h exits non-zero
	vars := map[string]bool{}
	for _, v := range regexp.MustCompile(`OCTFLOW_[A-Z0-9_]+`).FindAllString(string(out), -1) {
		vars[v] = true
	}
	if len(vars) == 0 {
		t.Fatalf("octflow %s -h named no variable:\n%s", command, out)
	}
	return vars
}

func TestTheComposeStackHasEveryPartPinnedAndChecked(t *testing.T) {
	p := loadCompose(t)
	want := []string{"alertmanager", "api", "audit", "gpu-0", "gpu-1", "grafana", "node-exporter", "postgres-exporter", "postgres-roles",
		"postgresql", "prometheus", "s3", "s3-proxy", "s3-setup", "temporal", "temporal-namespace", "temporal-schema", "temporal-ui", "worker",
		"worker-deployment"}
	if got := slices.Sorted(maps.Keys(p.Services)); !slices.Equal(got, want) {
		t.Fatalf("services %v, want %v", got, want)
	}
	jobs := map[string]bool{"temporal-schema": true, "temporal-namespace": true, "s3-setup": true, "worker-deployment": true,
		"postgres-roles": true}
	pinned := regexp.MustCompile(`^[a-z0-9./-]+:[A-Za-z0-9._-]+$`)
	for name, s := range p.Services {
		if !pinned.MatchString(s.Image) || strings.HasSuffix(s.Image, ":latest") {
			t.Errorf("%s: image %q is not pinned to a version", name, s.Image)
		}
		if !jobs[name] && (s.HealthCheck == nil || s.HealthCheck.Disable || len(s.HealthCheck.Test) == 0) {
			t.Errorf("%s: no healthcheck", name)
		}
		for dep, d := range s.DependsOn {
			if d.Condition != types.ServiceConditionHealthy && d.Condition != types.ServiceConditionCompletedSuccessfully {
				t.Errorf("%s depends on %s with condition %q, want it healthy or completed", name, dep, d.Condition)
			}
		}
	}
	for _, c := range []struct{ service, image string }{
		{"temporal", "octflow-temporal:"}, {"temporal-schema", "temporalio/admin-tools:"},
		{"temporal-ui", "temporalio/ui:"}, {"s3", "versity/versitygw:"}, {"postgresql", "postgres:"},
	} {
		if !strings.HasPrefix(p.Services[c.service].Image, c.image) {
			t.Errorf("%s runs %s, want an image of %s", c.service, p.Services[c.service].Image, c.image)
		}
	}
	if cmd := strings.Join(p.Services["temporal-schema"].Command, " "); !strings.Contains(cmd, "temporal-sql-tool") ||
		!strings.Contains(cmd, "postgresql/v12/temporal/versioned") || !strings.Contains(cmd, "postgresql/v12/visibility/versioned") {
		t.Errorf("the schema job does not set up both schemas with temporal-sql-tool: %s", cmd)
	}
	// Every piece of state has a named volume.
	if !slices.ContainsFunc(p.Services["grafana"].Volumes, func(v types.ServiceVolumeConfig) bool {
		return strings.HasSuffix(v.Source, "deploy/grafana/dashboards")
	}) {
		t.Error("grafana does not mount the dashboards")
	}
	for service, target := range map[string]string{"postgresql": "/var/lib/postgresql/data", "s3": "/data",
		"prometheus": "/prometheus", "grafana": "/var/lib/grafana", "audit": "/var/log/audit", "api": "/var/spool/octflow-audit",
		"gpu-0": "/var/lib/octflow/takes", "gpu-1": "/var/lib/octflow/takes"} {
		if !slices.ContainsFunc(p.Services[service].Volumes, func(v types.ServiceVolumeConfig) bool {
			return v.Type == types.VolumeTypeVolume && v.Target == target
		}) {
			t.Errorf("%s keeps %s in no named volume", service, target)
		}
	}
	// GPU nodes: each has a node ID of its own, and as shipped runs on
	// the CPU, reserving no GPU (deploy/gpu-override.sh gives each its
	// own: deploy/compose-test's TestTheGPUOverrideGivesEachGPUANode).
	ids := map[string]string{}
	for _, name := range []string{"gpu-0", "gpu-1"} {
		s := p.Services[name]
		if id := s.Environment["OCTFLOW_NODE_ID"]; id == nil || *id == "" || ids[*id] != "" {
			t.Errorf("%s: node ID %v, want one of its own", name, id)
		} else {
			ids[*id] = name
		}
		if s.Deploy != nil && s.Deploy.Resources.Reservations != nil && len(s.Deploy.Resources.Reservations.Devices) > 0 {
			t.Errorf("%s reserves %+v as shipped, want no GPU", name, s.Deploy.Resources.Reservations.Devices)
		}
		if src := s.Environment["OCTFLOW_GPU_SOURCE"]; src == nil || *src != "cpu" {
			t.Errorf("%s: OCTFLOW_GPU_SOURCE %v, want cpu", name, src)
		}
	}
}

func TestEveryOctflowVariableInTheComposeStackIsOneTheBinaryReads(t *testing.T) {
	p := loadCompose(t)
	for service, role := range roles {
		s, ok := p.Services[service]
		words := len(strings.Fields(role))
		if !ok || len(s.Command) < words || strings.Join(s.Command[:words], " ") != role || !strings.HasPrefix(s.Image, "octflow:") {
			t.Fatalf("service %s does not run `octflow %s`: %s %v", service, role, s.Image, s.Command)
		}
		reads := commandVars(t, role)
		set := 0
		for k, v := range s.Environment {
			if !strings.HasPrefix(k, "OCTFLOW_") {
				continue
			}
			set++
			if !reads[k] {
				t.Errorf("%s sets %s, which `octflow %s` does not read", role, k, role)
			}
			// A secret file must be one the service mounts.
			if strings.HasSuffix(k, "_FILE") && v != nil && strings.HasPrefix(*v, "/run/secrets/") &&
				!slices.ContainsFunc(s.Secrets, func(sec types.ServiceSecretConfig) bool { return "/run/secrets/"+sec.Source == *v }) {
				t.Errorf("%s: %s=%s, a secret the service does not mount", role, k, *v)
			}
		}
		if set == 0 {
			t.Errorf("%s sets no OCTFLOW_ variable", role)
		}
	}
}

func TestTheStacksTemporalRunsTheDynamicConfigExamsRelyOn(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy/temporal/dynamicconfig.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var dc map[string][]struct {
		Value any `yaml:"value"`
	}
	if err := yaml.Unmarshal(b, &dc); err != nil {
		t.Fatal(err)
	}
	dev := devstack.DefaultDynamicConfig()
	for _, key := range []string{"matching.enableFairness", "matching.numTaskqueueReadPartitions", "matching.numTaskqueueWritePartitions",
		"history.queueShrinkPredicateMaxPendingKeys"} {
		if len(dc[key]) != 1 || dc[key][0].Value != dev[key] {
			t.Errorf("%s = %v in the stack's dynamic config, want %v as in the dev stack", key, dc[key], dev[key])
		}
	}
	p := loadCompose(t)
	if !slices.ContainsFunc(p.Services["temporal"].Volumes, func(v types.ServiceVolumeConfig) bool {
		return strings.HasSuffix(v.Source, "deploy/temporal/dynamicconfig.yaml")
	}) {
		t.Error("the temporal service does not mount deploy/temporal/dynamicconfig.yaml")
	}
}

// The GPU node on another host (deploy/compose.remote-node.yml): every
// OCTFLOW_ variable one gpuworker reads, every secret file one it mounts,
// Temporal over mTLS with the node's own certificate, S3 through the
// tunnel that presents it.
func TestTheRemoteGPUNodeRecipeIsOneTheBinaryReads(t *testing.T) {
	t.Chdir(repoRoot)
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  filepath.Join(repoRoot, "deploy"),
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(repoRoot, "deploy/compose.remote-node.yml")}},
		Environment: types.Mapping{"OCTFLOW_NODE_ID": "gpu-remote-1", "OCTFLOW_NODE_BUNDLE": "/etc/octflow/gpu-remote-1",
			"OCTFLOW_STACK_HOST": "octflow.example.org"},
	}, func(o *loader.Options) {
		o.SetProjectName("octflow-node", true)
		o.SkipResolveEnvironment = true
	})
	if err != nil {
		t.Fatalf("load deploy/compose.remote-node.yml: %v", err)
	}
	gpu, ok := p.Services["gpu"]
	if !ok || len(gpu.Command) == 0 || gpu.Command[0] != "gpuworker" {
		t.Fatalf("the remote node's gpu service does not run `octflow gpuworker`: %v", gpu.Command)
	}
	reads := commandVars(t, "gpuworker")
	env := func(k string) string {
		if v := gpu.Environment[k]; v != nil {
			return *v
		}
		return ""
	}
	for k, v := range gpu.Environment {
		if !strings.HasPrefix(k, "OCTFLOW_") {
			continue
		}
		if !reads[k] {
			t.Errorf("the remote node sets %s, which `octflow gpuworker` does not read", k)
		}
		if v != nil && strings.HasPrefix(*v, "/run/secrets/") &&
			!slices.ContainsFunc(gpu.Secrets, func(sec types.ServiceSecretConfig) bool { return "/run/secrets/"+sec.Source == *v }) {
			t.Errorf("the remote node: %s=%s, a secret it does not mount", k, *v)
		}
	}
	if env("OCTFLOW_TEMPORAL_ADDR") != "octflow.example.org:7233" || env("OCTFLOW_TEMPORAL_TLS") != "true" ||
		env("OCTFLOW_TEMPORAL_CERT_FILE") != "/run/secrets/node.pem" {
		t.Errorf("the remote node does not reach Temporal at the stack's host over mTLS with its own certificate: %v", gpu.Environment)
	}
	if env("OCTFLOW_S3_ENDPOINT") != "s3-tunnel:7070" || env("OCTFLOW_S3_ACCESS_KEY_FILE") == "" {
		t.Errorf("the remote node does not reach S3 through its tunnel with its own account: %v", gpu.Environment)
	}
	tunnel := strings.Join(p.Services["s3-tunnel"].Command, " ")
	for _, want := range []string{"connect = octflow.example.org:7443", "cert = /run/secrets/node.pem", "verifyChain = yes", "checkHost = s3-proxy"} {
		if !strings.Contains(tunnel, want) {
			t.Errorf("the S3 tunnel's configuration lacks %q: %s", want, tunnel)
		}
	}
	for _, sec := range p.Secrets {
		if !strings.HasPrefix(sec.File, "/etc/octflow/gpu-remote-1/") {
			t.Errorf("secret %s from %s, not the node's bundle", sec.Name, sec.File)
		}
	}
}
