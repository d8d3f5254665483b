package gpuworker

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"octflow/exam"
)

func TestAGPUsFaultsAreWhatNVMLReads(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    reading
		want []exam.GPUFault
	}{
		{"healthy, clocks down for power cap and idle only", reading{clockReasons: nvml.ClocksEventReasonSwPowerCap | nvml.ClocksEventReasonGpuIdle}, nil},
		{"hardware thermal slowdown (with its slowdown bit)", reading{clockReasons: nvml.ClocksThrottleReasonHwThermalSlowdown | nvml.ClocksThrottleReasonHwSlowdown}, []exam.GPUFault{exam.FaultThermal}},
		{"the driver's own thermal slowdown, routine under load", reading{clockReasons: nvml.ClocksEventReasonSwThermalSlowdown}, nil},
		{"power brake", reading{clockReasons: nvml.ClocksThrottleReasonHwPowerBrakeSlowdown}, []exam.GPUFault{exam.FaultSlowdown}},
		{"uncorrected ECC errors", reading{eccUncorrected: 2}, []exam.GPUFault{exam.FaultECC}},
		{"pages pending retirement", reading{pagesPending: true}, []exam.GPUFault{exam.FaultRetiredPages}},
		{"an Xid lately", reading{xidLately: true}, []exam.GPUFault{exam.FaultXid}},
		{"all at once, unreadable too", reading{xidLately: true, eccUncorrected: 1, pagesPending: true, unreadable: true,
			clockReasons: nvml.ClocksThrottleReasonHwSlowdown}, []exam.GPUFault{exam.FaultXid, exam.FaultECC, exam.FaultRetiredPages, exam.FaultSlowdown, exam.FaultUnreadable}},
	} {
		if got := tc.r.faults(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: faults %v, want %v", tc.name, got, tc.want)
		}
	}
}

// fakeGPU is what the NVML stand-in answers for one device. NVML itself
// cannot run on a machine without an NVIDIA driver, so the inventory is
// tested against go-nvml's own mock of its interface.
type fakeGPU struct {
	clocks    uint64
	ecc       uint64
	pending   bool // pages to retire
	remapping bool // rows to remap
	noName    bool
	noUUID    bool
	noHandle  bool
}

// fakeNVML is an NVML of two GPUs that sends the Xid events put on its
// channel.
func fakeNVML(gpus []*fakeGPU, xids chan nvml.EventData) *mock.Interface {
	var mu sync.Mutex
	devices := make([]*mock.Device, len(gpus))
	for i, g := range gpus {
		devices[i] = &mock.Device{
			GetIndexFunc:               func() (int, nvml.Return) { return i, nvml.SUCCESS },
			GetSupportedEventTypesFunc: func() (uint64, nvml.Return) { return nvml.EventTypeXidCriticalError, nvml.SUCCESS },
			RegisterEventsFunc:         func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS },
			GetUUIDFunc: func() (string, nvml.Return) {
				if g.noUUID {
					return "", nvml.ERROR_UNKNOWN
				}
				return "GPU-" + string(rune('a'+i)), nvml.SUCCESS
			},
			GetMemoryInfoFunc:       func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 80 << 30, Free: 79 << 30}, nvml.SUCCESS },
			GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 5}, nvml.SUCCESS },
			GetTemperatureFunc:      func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 41, nvml.SUCCESS },
			GetTotalEccErrorsFunc: func(kind nvml.MemoryErrorType, counter nvml.EccCounterType) (uint64, nvml.Return) {
				mu.Lock()
				defer mu.Unlock()
				if kind != nvml.MEMORY_ERROR_TYPE_UNCORRECTED || counter != nvml.VOLATILE_ECC {
					return 7, nvml.SUCCESS // corrected or lifetime errors: no fault of today's
				}
				return g.ecc, nvml.SUCCESS
			},
			GetCurrentClocksThrottleReasonsFunc: func() (uint64, nvml.Return) { mu.Lock(); defer mu.Unlock(); return g.clocks, nvml.SUCCESS },
			GetRemappedRowsFunc: func() (int, int, bool, bool, nvml.Return) {
				mu.Lock()
				defer mu.Unlock()
				return 0, 0, g.remapping, false, nvml.SUCCESS
			},
			GetRetiredPagesPendingStatusFunc: func() (nvml.EnableState, nvml.Return) {
				mu.Lock()
				defer mu.Unlock()
				if g.pending {
					return nvml.FEATURE_ENABLED, nvml.SUCCESS
				}
				return nvml.FEATURE_DISABLED, nvml.SUCCESS
			},
			GetNameFunc: func() (string, nvml.Return) {
				if g.noName {
					return "", nvml.ERROR_UNKNOWN
				}
				return "NVIDIA H100 80GB HBM3", nvml.SUCCESS
			},
		}
	}
	return &mock.Interface{
		InitFunc:           func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(gpus), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if gpus[i].noHandle {
				return nil, nvml.ERROR_GPU_IS_LOST
			}
			return devices[i], nvml.SUCCESS
		},
		EventSetCreateFunc: func() (nvml.EventSet, nvml.Return) {
			return &mock.EventSet{FreeFunc: func() nvml.Return { return nvml.SUCCESS }}, nvml.SUCCESS
		},
		EventSetWaitFunc: func(_ nvml.EventSet, ms uint32) (nvml.EventData, nvml.Return) {
			select {
			case e := <-xids:
				e.Device = devices[e.EventData>>32] // the GPU's index, in the test's own high bits
				e.EventData &= 1<<32 - 1
				return e, nvml.SUCCESS
			case <-time.After(time.Duration(ms) * time.Millisecond):
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
		},
	}
}

func TestNVMLFaultsTakeAGPUOutUntilTheyClear(t *testing.T) {
	gpus := []*fakeGPU{{}, {}}
	xids := make(chan nvml.EventData)
	inv, err := OpenNVML(fakeNVML(gpus, xids))
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	var clock sync.Mutex
	inv.now = func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
	read := func(step string) []GPU {
		t.Helper()
		got, err := inv.GPUs()
		if err != nil || len(got) != 2 {
			t.Fatalf("%s: %v, %d GPUs", step, err, len(got))
		}
		return got
	}
	if got := read("at start"); !got[0].Healthy || !got[1].Healthy || got[0].TemperatureC != 41 || got[1].Model == "" {
		t.Fatalf("at start: %+v", got)
	}
	// An application's Xid (43, a stopped channel) is the stage's, not the
	// GPU's; Xid 62 (a micro-controller halt) is GPU 0's for XidHold, Xid
	// 79 (fallen off the bus) GPU 1's until it is reset.
	send := func(xs ...uint64) {
		for _, x := range xs { // the last is sent again: then the watcher has taken the one before
			xids <- nvml.EventData{EventType: nvml.EventTypeXidCriticalError, EventData: x}
		}
	}
	send(0<<32|43, 0<<32|43)
	if got := read("after an application's Xid"); !got[0].Healthy {
		t.Errorf("Xid 43 took GPU 0 out: %v", got[0].Faults)
	}
	send(0<<32|62, 1<<32|79, 1<<32|79)
	got := read("after the Xids")
	if !slices.Equal(got[0].Faults, []exam.GPUFault{exam.FaultXid}) || !slices.Equal(got[1].Faults, []exam.GPUFault{exam.FaultXid}) {
		t.Errorf("after the Xids: GPU 0 %v, GPU 1 %v; want both out for their Xids", got[0].Faults, got[1].Faults)
	}
	clock.Lock()
	now = now.Add(XidHold + time.Second)
	clock.Unlock()
	if got := read("past the Xid's hold"); !got[0].Healthy || got[1].Healthy {
		t.Errorf("past the Xid's hold: GPU 0 %v, GPU 1 %v; want GPU 0 back, GPU 1 still out until a reset", got[0].Faults, got[1].Faults)
	}
	// A passing Xid on GPU 1 does not end the hold of its Xid 79.
	send(1<<32|62, 1<<32|62)
	clock.Lock()
	now = now.Add(XidHold + time.Second)
	clock.Unlock()
	if got := read("a passing Xid after one that needs a reset"); got[1].Healthy {
		t.Errorf("Xid 62 after Xid 79, past its hold: GPU 1 healthy again, want it out until a reset")
	}
	// Hardware thermal slowdown takes a GPU out once two reads in a row
	// show it, and while it lasts; uncorrected ECC errors and pages or
	// rows waiting for a reset, at once.
	gpus[0].clocks = nvml.ClocksThrottleReasonHwThermalSlowdown | nvml.ClocksThrottleReasonHwSlowdown
	if got := read("one throttled read"); !got[0].Healthy {
		t.Errorf("one read of thermal slowdown took GPU 0 out: %v", got[0].Faults)
	}
	if got := read("two throttled reads"); !slices.Equal(got[0].Faults, []exam.GPUFault{exam.FaultThermal}) {
		t.Errorf("two reads of thermal slowdown: GPU 0 %v, want thermal", got[0].Faults)
	}
	gpus[0].clocks = 0
	gpus[0].ecc = 3
	if got := read("ECC"); !slices.Equal(got[0].Faults, []exam.GPUFault{exam.FaultECC}) {
		t.Errorf("uncorrected ECC errors: GPU 0 %v, want ecc alone", got[0].Faults)
	}
	gpus[0].ecc, gpus[0].remapping = 0, true
	if got := read("rows to remap"); !slices.Equal(got[0].Faults, []exam.GPUFault{exam.FaultRetiredPages}) {
		t.Errorf("rows waiting to be remapped: GPU 0 %v, want retired-pages", got[0].Faults)
	}
	gpus[0].remapping, gpus[0].pending = false, true
	if got := read("pages to retire"); !slices.Equal(got[0].Faults, []exam.GPUFault{exam.FaultRetiredPages}) {
		t.Errorf("pages waiting to be retired: GPU 0 %v, want retired-pages", got[0].Faults)
	}
	gpus[0].pending = false
	if got := read("cleared"); !got[0].Healthy {
		t.Errorf("once cleared: GPU 0 %v, want healthy", got[0].Faults)
	}
	for _, broken := range []func(*fakeGPU){
		func(g *fakeGPU) { g.noName = true },
		func(g *fakeGPU) { g.noUUID = true },
		func(g *fakeGPU) { g.noHandle = true },
	} {
		*gpus[0] = fakeGPU{}
		broken(gpus[0])
		if got := read("unreadable"); got[0].Healthy || !slices.Equal(got[0].Faults, []exam.GPUFault{exam.FaultUnreadable}) {
			t.Errorf("a GPU NVML cannot read (%+v): %v %v, want unhealthy, unreadable", *gpus[0], got[0].Healthy, got[0].Faults)
		}
	}
	if err := inv.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

func TestAGPUHostWhoseNVMLFailsRefusesToStart(t *testing.T) {
	noLibrary := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	noDriver := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }}
	brokenDriver := fakeNVML([]*fakeGPU{{}}, make(chan nvml.EventData))
	brokenDriver.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
	noGPU := fakeNVML(nil, make(chan nvml.EventData))
	sim := SimulatedGPUs{Count: 2}
	for _, tc := range []struct {
		name, source string
		lib          nvml.Interface
		want         string // the source chosen, or a part of the refusal
	}{
		{"auto, no NVML library: a laptop", SourceAuto, noLibrary, SourceSimulated},
		{"auto, NVML that cannot count its GPUs", SourceAuto, brokenDriver, "refused: nvml device count"},
		{"auto, NVML's library without its driver", SourceAuto, noDriver, "refused: NVML did not start"},
		{"auto, NVML without a GPU", SourceAuto, noGPU, "refused: NVML finds no GPU"},
		{"nvml, no library", SourceNVML, noLibrary, "refused: NVML not available"},
		{"nvml, a GPU", SourceNVML, fakeNVML([]*fakeGPU{{}}, make(chan nvml.EventData)), SourceNVML},
		{"simulated where NVML is", SourceSimulated, fakeNVML([]*fakeGPU{{}}, make(chan nvml.EventData)), SourceSimulated},
		{"cpu where NVML is", SourceCPU, fakeNVML([]*fakeGPU{{}}, make(chan nvml.EventData)), SourceCPU},
		{"cpu without NVML", SourceCPU, noLibrary, SourceCPU},
		{"a source of no kind", "cuda", noLibrary, "refused: GPU source \"cuda\""},
	} {
		inv, source, err := Discover(tc.lib, tc.source, sim)
		switch refusal, refused := strings.CutPrefix(tc.want, "refused: "); {
		case refused && (err == nil || !strings.Contains(err.Error(), refusal)):
			t.Errorf("%s: source %q, err %v; want a refusal saying %q", tc.name, source, err, refusal)
		case !refused && (err != nil || source != tc.want):
			t.Errorf("%s: source %q, err %v; want %s", tc.name, source, err, tc.want)
		}
		if inv != nil {
			if gpus, _ := inv.GPUs(); source == SourceCPU && (len(gpus) != sim.Count || gpus[0].Model != CPUModel) {
				t.Errorf("%s: slots %+v, want %d named %q", tc.name, gpus, sim.Count, CPUModel)
			}
			inv.Close()
		}
	}
}

// A node without a GPU and without slots has nothing to offer: it
// refuses to start, whatever the host's NVML.
func TestACPUNodeWithoutSlotsRefusesToStart(t *testing.T) {
	inv, source, err := Discover(fakeNVML([]*fakeGPU{{}}, make(chan nvml.EventData)), SourceCPU, SimulatedGPUs{Count: 0})
	if err == nil || !strings.Contains(err.Error(), "no CPU slots") {
		t.Errorf("source %q, err %v; want a refusal for want of slots", source, err)
	}
	if inv != nil {
		inv.Close()
	}
}

func TestASimulatedGPUWithAFaultGetsNoSlotUntilItClears(t *testing.T) {
	s, inv, _, _ := newSlots(1)
	for _, f := range []exam.GPUFault{exam.FaultXid, exam.FaultThermal, exam.FaultECC} {
		inv.SetFaults(0, f)
		if gpus, _ := inv.GPUs(); gpus[0].Healthy || !slices.Equal(gpus[0].Faults, []exam.GPUFault{f}) {
			t.Fatalf("a simulated %s: %+v", f, gpus[0])
		}
		if p := s.TryReserveSlot(nil); p != nil {
			t.Errorf("a slot was granted on a GPU with a simulated %s", f)
			s.release(p)
		}
		inv.SetFaults(0)
		p := s.TryReserveSlot(nil)
		if p == nil {
			t.Fatalf("no slot once the simulated %s cleared", f)
		}
		s.release(p)
	}
}

// A simulated node driven from outside (octflow bench) takes its GPUs'
// faults from a file, and is healthy again once the file is gone.
func TestSimulatedGPUsFollowTheirFaultsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "faults")
	inv := NewSimulatedInventory(SimulatedGPUs{Count: 2})
	inv.FollowFaults(path)
	defer inv.Close()
	faultsOf := func() [][]exam.GPUFault {
		gpus, _ := inv.GPUs()
		out := make([][]exam.GPUFault, len(gpus))
		for i, g := range gpus {
			if g.Healthy != (len(g.Faults) == 0) {
				t.Errorf("GPU %d healthy %v with faults %v", i, g.Healthy, g.Faults)
			}
			out[i] = g.Faults
		}
		return out
	}
	wait := func(want [][]exam.GPUFault) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if got := faultsOf(); slices.EqualFunc(got, want, func(a, b []exam.GPUFault) bool { return slices.Equal(a, b) }) {
				return
			}
		}
		t.Fatalf("faults %v, want %v", faultsOf(), want)
	}
	if err := os.WriteFile(path, []byte("1 xid, ecc\nnot a line\n7 thermal\n0 melted\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wait([][]exam.GPUFault{nil, {exam.FaultXid, exam.FaultECC}})
	if err := os.WriteFile(path, []byte("0 thermal\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wait([][]exam.GPUFault{{exam.FaultThermal}, nil})
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	wait([][]exam.GPUFault{nil, nil})
}
