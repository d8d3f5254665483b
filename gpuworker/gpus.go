package gpuworker

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

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

// XidHold is how long a critical Xid error keeps its GPU from taking
// stages after the driver reports it.
const XidHold = 10 * time.Minute

// applicationXids are the Xid errors an application causes on a healthy
// GPU (a graphics engine exception, a page fault, a stopped or cleaned
// up channel): a stage's own fault, which its attempt and the node's
// breaker answer for, not the GPU's.
var applicationXids = map[uint64]bool{13: true, 31: true, 43: true, 45: true}

// NVMLInventory reads real GPUs through NVML: inventory, temperature and
// health (GPU health in docs/gpu-nodes.md). Critical Xid errors come as
// NVML events, which it watches from OpenNVML until Close.
type NVMLInventory struct {
	lib nvml.Interface
	now func() time.Time

	mu   sync.Mutex
	xids map[int]xidSeen // the last critical Xid of each GPU, by index

	events nvml.EventSet // nil: no GPU reports Xid events
	stop   chan struct{}
	done   chan struct{}
}

// xidSeen is a critical Xid error and when it came.
type xidSeen struct {
	xid uint64
	at  time.Time
}

// OpenNVML initialises NVML through lib (nvml.New() in production) and
// starts watching for critical Xid errors.
func OpenNVML(lib nvml.Interface) (*NVMLInventory, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: %v", ErrNoNVML, ret)
	}
	n := &NVMLInventory{lib: lib, now: time.Now, xids: map[int]xidSeen{}, stop: make(chan struct{}), done: make(chan struct{})}
	n.watchXids()
	return n, nil
}

// watchXids registers every GPU that reports them for critical Xid
// events and waits for them until Close.
func (n *NVMLInventory) watchXids() {
	count, ret := n.lib.DeviceGetCount()
	set, sret := n.lib.EventSetCreate()
	registered := false
	for i := 0; ret == nvml.SUCCESS && sret == nvml.SUCCESS && i < count; i++ {
		dev, r := n.lib.DeviceGetHandleByIndex(i)
		if r != nvml.SUCCESS {
			continue
		}
		if types, r := dev.GetSupportedEventTypes(); r != nvml.SUCCESS || types&nvml.EventTypeXidCriticalError == 0 {
			continue
		}
		if dev.RegisterEvents(nvml.EventTypeXidCriticalError, set) == nvml.SUCCESS {
			registered = true
		}
	}
	if !registered {
		if sret == nvml.SUCCESS {
			set.Free()
		}
		close(n.done)
		return
	}
	n.events = set
	go func() {
		defer close(n.done)
		for {
			select {
			case <-n.stop:
				return
			default:
			}
			data, ret := n.lib.EventSetWait(set, 500)
			switch {
			case ret == nvml.ERROR_TIMEOUT:
			case ret != nvml.SUCCESS:
				select { // NVML failing: the GPUs' reads say so; wait, then try again
				case <-n.stop:
					return
				case <-time.After(time.Second):
				}
			case data.EventType&nvml.EventTypeXidCriticalError != 0 && !applicationXids[data.EventData]:
				if idx, r := data.Device.GetIndex(); r == nvml.SUCCESS {
					n.mu.Lock()
					n.xids[idx] = xidSeen{xid: data.EventData, at: n.now()}
					n.mu.Unlock()
				}
			}
		}
	}()
}

// GPUs queries every device. A device NVML cannot read, or one with a
// fault, is reported unhealthy rather than dropped, so the fleet view
// shows it and no stage is bound to it.
func (n *NVMLInventory) GPUs() ([]GPU, error) {
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml device count: %v", ret)
	}
	gpus := make([]GPU, 0, count)
	for i := range count {
		g := GPU{Index: i}
		var r reading
		dev, ret := n.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			g.Faults = []exam.GPUFault{exam.FaultUnreadable}
			gpus = append(gpus, g)
			continue
		}
		var rets []nvml.Return
		g.Model, ret = dev.GetName()
		rets = append(rets, ret)
		g.UUID, ret = dev.GetUUID()
		rets = append(rets, ret)
		mem, ret := dev.GetMemoryInfo()
		rets = append(rets, ret)
		g.MemoryTotalMiB, g.MemoryFreeMiB = mem.Total>>20, mem.Free>>20
		r.unreadable = slices.ContainsFunc(rets, func(r nvml.Return) bool { return r != nvml.SUCCESS })
		if util, ret := dev.GetUtilizationRates(); ret == nvml.SUCCESS {
			g.UtilizationPct = util.Gpu
		}
		if t, ret := dev.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
			g.TemperatureC = t
		}
		// A reading a GPU does not support (NOT_SUPPORTED: no ECC on
		// this model, say) is no fault.
		if reasons, ret := dev.GetCurrentClocksEventReasons(); ret == nvml.SUCCESS {
			r.clockReasons = reasons
		}
		if ecc, ret := dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); ret == nvml.SUCCESS {
			r.eccUncorrected = ecc
		}
		if pending, ret := dev.GetRetiredPagesPendingStatus(); ret == nvml.SUCCESS {
			r.pagesPending = pending == nvml.FEATURE_ENABLED
		}
		n.mu.Lock()
		seen, ok := n.xids[i]
		n.mu.Unlock()
		r.xidLately = ok && n.now().Sub(seen.at) < XidHold
		g.Faults = r.faults()
		g.Healthy = len(g.Faults) == 0
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// reading is what NVML said of one GPU's health.
type reading struct {
	unreadable     bool
	clockReasons   uint64 // nvml.ClocksEventReason* bits
	eccUncorrected uint64 // since the GPU's last reset
	pagesPending   bool
	xidLately      bool // a critical Xid within XidHold
}

// faults are the GPU faults a reading shows, in exam.GPUFaults' order.
func (r reading) faults() []exam.GPUFault {
	var out []exam.GPUFault
	if r.xidLately {
		out = append(out, exam.FaultXid)
	}
	if r.eccUncorrected > 0 {
		out = append(out, exam.FaultECC)
	}
	if r.pagesPending {
		out = append(out, exam.FaultRetiredPages)
	}
	const thermal = nvml.ClocksEventReasonSwThermalSlowdown | nvml.ClocksThrottleReasonHwThermalSlowdown
	const slowdown = nvml.ClocksThrottleReasonHwSlowdown | nvml.ClocksThrottleReasonHwPowerBrakeSlowdown
	switch {
	case r.clockReasons&thermal != 0:
		out = append(out, exam.FaultThermal)
	case r.clockReasons&slowdown != 0:
		// The hardware slowdown bit comes with thermal slowdown too:
		// only without it is it a slowdown of its own.
		out = append(out, exam.FaultSlowdown)
	}
	if r.unreadable {
		out = append(out, exam.FaultUnreadable)
	}
	return out
}

// Close stops watching for Xid errors and shuts NVML down.
func (n *NVMLInventory) Close() error {
	close(n.stop)
	<-n.done
	if n.events != nil {
		n.events.Free()
	}
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

// SetFaults gives one simulated GPU the faults a real one could report
// (none: healthy again), as tests and drills need: an Xid, thermal
// throttling, an ECC error.
func (s *SimulatedInventory) SetFaults(index int, faults ...exam.GPUFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gpus[index].Faults = slices.Clone(faults)
	s.gpus[index].Healthy = len(faults) == 0
}

// Close does nothing.
func (s *SimulatedInventory) Close() error { return nil }

// Where a node's GPUs come from (OCTFLOW_GPU_SOURCE).
const (
	// SourceAuto: NVML where its library is on the machine, simulated
	// GPUs where it is not (a laptop, the dev stack).
	SourceAuto = "auto"
	// SourceNVML: NVML or nothing: a GPU host whose NVML fails refuses
	// to start rather than simulate.
	SourceNVML = "nvml"
	// SourceSimulated: simulated GPUs even where NVML is.
	SourceSimulated = "simulated"
)

// Discover opens the node's GPUs from source and says which it chose.
// Only a machine without NVML's library at all gets the simulated GPUs
// under SourceAuto: where the library loads but cannot read a GPU, the
// node refuses to start, as it does under SourceNVML.
func Discover(lib nvml.Interface, source string, fallback SimulatedGPUs) (Inventory, string, error) {
	simulated := func() (Inventory, string, error) {
		if fallback.Count < 1 {
			return nil, "", errors.New("no simulated GPUs configured")
		}
		return NewSimulatedInventory(fallback), SourceSimulated, nil
	}
	switch source {
	case SourceSimulated:
		return simulated()
	case SourceAuto, SourceNVML:
	default:
		return nil, "", fmt.Errorf("GPU source %q: want auto, nvml or simulated", source)
	}
	inv, err := OpenNVML(lib)
	if errors.Is(err, ErrNoNVML) && source == SourceAuto {
		return simulated()
	}
	if err != nil {
		return nil, "", fmt.Errorf("GPUs through NVML: %w", err)
	}
	gpus, err := inv.GPUs()
	if err == nil && len(gpus) == 0 {
		err = errors.New("NVML finds no GPU")
	}
	if err != nil {
		inv.Close()
		return nil, "", fmt.Errorf("GPUs through NVML: %w", err)
	}
	return inv, SourceNVML, nil
}
