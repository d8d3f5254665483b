package gpuworker

import (
	"errors"
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"octflow/exam"
)

// GPU is one device a node can run stages on.
type GPU = exam.GPU

// Inventory reports a node's GPUs as they are now.
type Inventory interface {
	GPUs() ([]GPU, error)
	Close() error
}

// ErrNoNVML means the NVIDIA management library is not on this machine.
var ErrNoNVML = errors.New("NVML not available")

// NVMLInventory reads real GPUs through NVML.
type NVMLInventory struct {
	lib nvml.Interface
}

// OpenNVML initialises NVML through lib (nvml.New() in production).
func OpenNVML(lib nvml.Interface) (*NVMLInventory, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: %v", ErrNoNVML, ret)
	}
	return &NVMLInventory{lib: lib}, nil
}

// GPUs queries every device. A device NVML cannot read is reported
// unhealthy rather than dropped, so the fleet view shows it.
func (n *NVMLInventory) GPUs() ([]GPU, error) {
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml device count: %v", ret)
	}
	gpus := make([]GPU, 0, count)
	for i := range count {
		g := GPU{Index: i, Healthy: true}
		dev, ret := n.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			g.Healthy = false
			gpus = append(gpus, g)
			continue
		}
		if g.Model, ret = dev.GetName(); ret != nvml.SUCCESS {
			g.Healthy = false
		}
		if g.UUID, ret = dev.GetUUID(); ret != nvml.SUCCESS {
			g.Healthy = false
		}
		if mem, ret := dev.GetMemoryInfo(); ret == nvml.SUCCESS {
			g.MemoryTotalMiB, g.MemoryFreeMiB = mem.Total>>20, mem.Free>>20
		} else {
			g.Healthy = false
		}
		if util, ret := dev.GetUtilizationRates(); ret == nvml.SUCCESS {
			g.UtilizationPct = util.Gpu
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// Close shuts NVML down.
func (n *NVMLInventory) Close() error {
	if ret := n.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvml shutdown: %v", ret)
	}
	return nil
}

// SimulatedGPUs describe GPUs for a node without NVML: the dev stack,
// tests and the benchmark.
type SimulatedGPUs struct {
	Count     int
	Model     string
	MemoryGiB float64
}

// SimulatedInventory serves SimulatedGPUs. Free memory and health can be
// changed, as a real GPU's would.
type SimulatedInventory struct {
	mu   sync.Mutex
	gpus []GPU
}

// NewSimulatedInventory creates count identical GPUs.
func NewSimulatedInventory(s SimulatedGPUs) *SimulatedInventory {
	if s.Model == "" {
		s.Model = "simulated GPU"
	}
	if s.MemoryGiB == 0 {
		s.MemoryGiB = 24
	}
	inv := &SimulatedInventory{}
	for i := range s.Count {
		mib := uint64(s.MemoryGiB * 1024)
		inv.gpus = append(inv.gpus, GPU{Index: i, UUID: fmt.Sprintf("SIM-GPU-%d", i), Model: s.Model,
			MemoryTotalMiB: mib, MemoryFreeMiB: mib, Healthy: true, Simulated: true})
	}
	return inv
}

// GPUs returns a copy of the simulated devices.
func (s *SimulatedInventory) GPUs() ([]GPU, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]GPU(nil), s.gpus...), nil
}

// Set changes one simulated GPU's free memory and health.
func (s *SimulatedInventory) Set(index int, freeMiB uint64, healthy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gpus[index].MemoryFreeMiB, s.gpus[index].Healthy = freeMiB, healthy
}

// Close does nothing.
func (s *SimulatedInventory) Close() error { return nil }

// Discover uses NVML when the machine has it and the simulated GPUs
// otherwise. It says which it chose.
func Discover(lib nvml.Interface, fallback SimulatedGPUs) (Inventory, string, error) {
	inv, err := OpenNVML(lib)
	if err == nil {
		gpus, err := inv.GPUs()
		if err == nil && len(gpus) > 0 {
			return inv, "nvml", nil
		}
		inv.Close()
	}
	if fallback.Count < 1 {
		return nil, "", fmt.Errorf("no GPU found through NVML (%v) and no simulated GPUs configured", err)
	}
	return NewSimulatedInventory(fallback), "simulated", nil
}
