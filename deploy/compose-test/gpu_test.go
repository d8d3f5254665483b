package composetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// The shipped stack starts on any host: no service asks for a GPU or
// sees one (no device reservation, no NVIDIA variable in the image or a
// service), and its GPU nodes run on the CPU.
func TestTheShippedStackAsksForNoGPU(t *testing.T) {
	p := shipped(t)
	for name, s := range p.Services {
		if s.Deploy != nil && s.Deploy.Resources.Reservations != nil && len(s.Deploy.Resources.Reservations.Devices) > 0 {
			t.Errorf("%s reserves devices %+v: the stack would not start without them", name, s.Deploy.Resources.Reservations.Devices)
		}
		for k := range s.Environment {
			if strings.HasPrefix(k, "NVIDIA_") {
				t.Errorf("%s sets %s", name, k)
			}
		}
	}
	for _, name := range []string{"gpu-0", "gpu-1"} {
		if v := p.Services[name].Environment["OCTFLOW_GPU_SOURCE"]; v == nil || *v != "cpu" {
			t.Errorf("%s: OCTFLOW_GPU_SOURCE %v, want cpu", name, v)
		}
	}
	if df := read(t, filepath.Join(repoRoot, "Dockerfile")); strings.Contains(df, "NVIDIA_VISIBLE_DEVICES") {
		t.Error("the image sets NVIDIA_VISIBLE_DEVICES: every role's container would ask for every GPU")
	}
}

// deploy/gpu-override.sh, from a host's `nvidia-smi -L`, gives each GPU
// a node of its own with only that GPU reserved and NVML required, the
// GPUs after the second as copies of gpu-1; the stack loads with it.
// Without NVIDIA's driver it refuses, saying so, and writes nothing.
func TestTheGPUOverrideGivesEachGPUANode(t *testing.T) {
	script, err := filepath.Abs(filepath.Join(repoRoot, "deploy/gpu-override.sh"))
	if err != nil {
		t.Fatal(err)
	}
	dir := gpuOverride(t)
	p, err := loadStack(dir, siteSettings(), "docker-compose.yml", "docker-compose.gpu.yml")
	if err != nil {
		t.Fatalf("load docker-compose.yml with docker-compose.gpu.yml: %v", err)
	}
	for i, name := range []string{"gpu-0", "gpu-1", "gpu-2"} {
		s, ok := p.Services[name]
		if !ok {
			t.Errorf("no %s for GPU %d", name, i)
			continue
		}
		var devices []types.DeviceRequest
		if s.Deploy != nil && s.Deploy.Resources.Reservations != nil {
			devices = s.Deploy.Resources.Reservations.Devices
		}
		if len(devices) != 1 || devices[0].Driver != "nvidia" || !slices.Equal(devices[0].IDs, []string{string(rune('0' + i))}) ||
			!slices.Contains(devices[0].Capabilities, "utility") {
			t.Errorf("%s reserves %+v, want GPU %d only, with NVML's utility capability", name, devices, i)
		}
		if v := s.Environment["OCTFLOW_GPU_SOURCE"]; v == nil || *v != "nvml" {
			t.Errorf("%s: OCTFLOW_GPU_SOURCE %v, want nvml", name, v)
		}
		if v := s.Environment["OCTFLOW_NODE_ID"]; v == nil || *v != name {
			t.Errorf("%s: OCTFLOW_NODE_ID %v", name, v)
		}
		if v := s.Environment["OCTFLOW_NODE_TAKES_DIR"]; v == nil || *v != "/var/lib/octflow/takes/"+name {
			t.Errorf("%s: OCTFLOW_NODE_TAKES_DIR %v, want its own directory in the gpu-takes volume", name, v)
		}
		if len(s.Secrets) == 0 || s.Command[0] != "gpuworker" {
			t.Errorf("%s is not a GPU node of the stack (command %v, secrets %d)", name, s.Command, len(s.Secrets))
		}
	}
	for name, s := range p.Services {
		if s.Deploy != nil && s.Deploy.Resources.Reservations != nil && len(s.Deploy.Resources.Reservations.Devices) > 0 &&
			!strings.HasPrefix(name, "gpu-") {
			t.Errorf("%s, not a GPU node, reserves a GPU", name)
		}
	}

	if _, err := exec.LookPath("nvidia-smi"); err == nil {
		t.Skip("this host has nvidia-smi: the refusal without a driver is not seen here")
	}
	empty := t.TempDir()
	cmd := exec.Command(script)
	cmd.Dir = empty
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no NVIDIA driver on this host") {
		t.Errorf("gpu-override.sh without a driver: %v: %s; want a refusal naming the driver", err, out)
	}
	if _, err := os.Stat(filepath.Join(empty, "docker-compose.gpu.yml")); err == nil {
		t.Error("gpu-override.sh wrote docker-compose.gpu.yml without a driver")
	}
}

// gpuOverride runs deploy/gpu-override.sh on testdata/nvidia-smi-L.txt
// in a directory holding a copy of docker-compose.yml, and returns the
// directory (its docker-compose.gpu.yml written).
func gpuOverride(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "docker-compose.yml"), []byte(read(t, filepath.Join(repoRoot, "docker-compose.yml"))), 0o600); err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs(filepath.Join(repoRoot, "deploy/gpu-override.sh"))
	if err != nil {
		t.Fatal(err)
	}
	listing, err := filepath.Abs("testdata/nvidia-smi-L.txt")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script, "--from", listing)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gpu-override.sh: %v: %s", err, out)
	}
	return dir
}
