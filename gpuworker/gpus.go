package gpuworker

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
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
// stages after the driver reports it, unless the error is one a GPU
// recovers from only by a reset (resetXids).
const XidHold = 10 * time.Minute

// applicationXids are the Xid errors an application causes on a healthy
// GPU (a graphics engine exception, a page fault, a stopped or cleaned
// up channel, a video processor exception): a stage's own fault, which
// its attempt and the node's breaker answer for, not the GPU's.
var applicationXids = map[uint64]bool{13: true, 31: true, 43: true, 45: true, 68: true}

// resetXids are the Xid errors after which a GPU needs a reset (double
// bit and uncontained ECC errors, row remapping events, an NVLink error,
// a GPU fallen off the bus, GSP errors): they keep the GPU out until the
// node starts again, which an operator does after resetting the GPU.
var resetXids = map[uint64]bool{48: true, 63: true, 64: true, 74: true, 79: true, 92: true, 94: true, 95: true, 119: true, 120: true}

// clockFaultReads is how many reads in a row must show a clock fault
// before it counts: the hardware slowdown bit may be set for one reading
// during a clock change.
const clockFaultReads = 2

// NVMLInventory reads real GPUs through NVML: inventory, temperature and
// health (GPU health in docs/gpu-nodes.md). Critical Xid errors come as
// NVML events, which it watches from OpenNVML until Close.
type NVMLInventory struct {
	lib nvml.Interface
	now func() time.Time

	mu        sync.Mutex
	xids      map[int]xidSeen // the last critical Xid of each GPU, by index
	clockRuns map[int]int     // reads in a row showing a clock fault, by index

	events nvml.EventSet // nil: no GPU reports Xid events
	stop   chan struct{}
	done   chan struct{}
	closed sync.Once
}

// xidSeen is a critical Xid error and when it came.
type xidSeen struct {
	xid uint64
	at  time.Time
}

// OpenNVML initialises NVML through lib (nvml.New() in production) and
// starts watching for critical Xid errors. ErrNoNVML means the library
// is not on the machine; any other failure is the driver's.
func OpenNVML(lib nvml.Interface) (*NVMLInventory, error) {
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, fmt.Errorf("%w: %v", ErrNoNVML, ret)
	default:
		return nil, fmt.Errorf("NVML did not start: %v", ret)
	}
	n := &NVMLInventory{lib: lib, now: time.Now, xids: map[int]xidSeen{}, clockRuns: map[int]int{},
		stop: make(chan struct{}), done: make(chan struct{})}
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
					// A later, passing Xid does not end the hold of one
					// that needs a reset.
					if !resetXids[n.xids[idx].xid] {
						n.xids[idx] = xidSeen{xid: data.EventData, at: n.now()}
					}
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
		// this model, no page retirement where rows are remapped) is no
		// fault. The throttle reasons, not their newer name (clock event
		// reasons), which drivers before R535 lack.
		var clocks uint64
		if reasons, ret := dev.GetCurrentClocksThrottleReasons(); ret == nvml.SUCCESS {
			clocks = reasons
		}
		if ecc, ret := dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); ret == nvml.SUCCESS {
			r.eccUncorrected = ecc
		}
		if pending, ret := dev.GetRetiredPagesPendingStatus(); ret == nvml.SUCCESS {
			r.pagesPending = pending == nvml.FEATURE_ENABLED
		}
		if _, _, pending, failed, ret := dev.GetRemappedRows(); ret == nvml.SUCCESS {
			r.pagesPending = r.pagesPending || pending || failed
		}
		n.mu.Lock()
		seen, ok := n.xids[i]
		if clockFault(clocks) {
			n.clockRuns[i]++
		} else {
			n.clockRuns[i] = 0
		}
		if n.clockRuns[i] >= clockFaultReads {
			r.clockReasons = clocks
		}
		n.mu.Unlock()
		r.xidLately = ok && (resetXids[seen.xid] || n.now().Sub(seen.at) < XidHold)
		g.Faults = r.faults()
		g.Healthy = len(g.Faults) == 0
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// reading is what NVML said of one GPU's health.
type reading struct {
	unreadable     bool
	clockReasons   uint64 // nvml.ClocksThrottleReason* bits, held for clockFaultReads reads
	eccUncorrected uint64 // since the driver loaded (NVML's volatile count)
	pagesPending   bool   // pages to retire, rows to remap, or a failed remapping
	xidLately      bool   // a critical Xid within XidHold, or one that needs a reset
}

// Clock reasons that are faults: the hardware holds the clocks down for
// heat, or otherwise (slowdown, power brake). The driver's own thermal
// slowdown, a power cap and idle clocks are routine under load.
const (
	thermalClocks  = nvml.ClocksThrottleReasonHwThermalSlowdown
	slowdownClocks = nvml.ClocksThrottleReasonHwSlowdown | nvml.ClocksThrottleReasonHwPowerBrakeSlowdown
)

func clockFault(reasons uint64) bool { return reasons&(thermalClocks|slowdownClocks) != 0 }

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
	switch {
	case r.clockReasons&thermalClocks != 0:
		out = append(out, exam.FaultThermal)
	case r.clockReasons&slowdownClocks != 0:
		// The hardware slowdown bit comes with thermal slowdown too:
		// only without it is it a slowdown of its own.
		out = append(out, exam.FaultSlowdown)
	}
	if r.unreadable {
		out = append(out, exam.FaultUnreadable)
	}
	return out
}

// Close stops watching for Xid errors and shuts NVML down, once.
func (n *NVMLInventory) Close() error {
	var err error
	n.closed.Do(func() {
		close(n.stop)
		<-n.done
		if n.events != nil {
			n.events.Free()
		}
		if ret := n.lib.Shutdown(); ret != nvml.SUCCESS {
			err = fmt.Errorf("nvml shutdown: %v", ret)
		}
	})
	return err
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
	stop chan struct{} // closed by Close (nil: no faults file followed)
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
	if healthy {
		s.gpus[index].Faults = nil
	}
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

// FollowFaults makes the simulated GPUs take their faults from a file,
// read every 250 ms until Close: one line per faulty GPU, its index and
// its faults ("0 thermal", "1 xid,ecc"); a GPU not named, or a file that
// is absent or empty, has none. A process that drives a simulated node
// from outside (octflow bench's --gpu-faults) writes it. Lines that do not
// parse are left out.
func (s *SimulatedInventory) FollowFaults(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		return
	}
	s.stop = make(chan struct{})
	stop := s.stop
	go func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		last := ""
		for {
			b, _ := os.ReadFile(path) // absent: no faults
			if string(b) != last {
				last = string(b)
				faults := parseFaults(last)
				for i := range s.count() {
					s.SetFaults(i, faults[i]...)
				}
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
}

func (s *SimulatedInventory) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.gpus)
}

// parseFaults reads FollowFaults's file: faults by GPU index.
func parseFaults(text string) map[int][]exam.GPUFault {
	out := map[int][]exam.GPUFault{}
	for line := range strings.Lines(text) {
		index, list, ok := strings.Cut(strings.TrimSpace(line), " ")
		i, err := strconv.Atoi(index)
		if !ok || err != nil || i < 0 {
			continue
		}
		for f := range strings.SplitSeq(strings.TrimSpace(list), ",") {
			if fault := exam.GPUFault(strings.TrimSpace(f)); slices.Contains(exam.GPUFaults(), fault) {
				out[i] = append(out[i], fault)
			}
		}
	}
	return out
}

// Close stops following a faults file.
func (s *SimulatedInventory) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		close(s.stop)
		s.stop = nil
	}
	return nil
}

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
	// SourceCPU: no GPU: the stages run on the node's CPU, in as many
	// slots as it is given simulated GPUs, each named CPUModel (the
	// production stack's default node, which needs no GPU to start).
	SourceCPU = "cpu"
)

// CPUModel names the slots of a node without a GPU (SourceCPU) in the
// fleet view and the node's metrics.
const CPUModel = "CPU (no GPU)"

// Discover opens the node's GPUs from source and says which it chose.
// Only a machine without NVML's library at all gets the simulated GPUs
// under SourceAuto: where the library is but does not start (a driver
// not loaded, a version mismatch), cannot count the GPUs or finds none,
// the node refuses to start, as it does under SourceNVML.
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
	case SourceCPU:
		if fallback.Count < 1 {
			return nil, "", errors.New("no CPU slots configured")
		}
		fallback.Model = CPUModel
		return NewSimulatedInventory(fallback), SourceCPU, nil
	case SourceAuto, SourceNVML:
	default:
		return nil, "", fmt.Errorf("GPU source %q: want auto, nvml, simulated or cpu", source)
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
