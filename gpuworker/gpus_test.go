package gpuworker

import (
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
		{"software thermal slowdown", reading{clockReasons: nvml.ClocksEventReasonSwThermalSlowdown}, []exam.GPUFault{exam.FaultThermal}},
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
	clocks  uint64
	ecc     uint64
	pending bool
	noName  bool
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
			GetUUIDFunc:                func() (string, nvml.Return) { return "GPU-" + string(rune('a'+i)), nvml.SUCCESS },
			GetMemoryInfoFunc:          func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 80 << 30, Free: 79 << 30}, nvml.SUCCESS },
			GetUtilizationRatesFunc:    func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 5}, nvml.SUCCESS },
			GetTemperatureFunc:         func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 41, nvml.SUCCESS },
			GetTotalEccErrorsFunc: func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
				mu.Lock()
				defer mu.Unlock()
				return g.ecc, nvml.SUCCESS
			},
			GetCurrentClocksEventReasonsFunc: func() (uint64, nvml.Return) { mu.Lock(); defer mu.Unlock(); return g.clocks, nvml.SUCCESS },
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
	// An application's Xid (31, a page fault) is the stage's, not the
	// GPU's; Xid 79 (fallen off the bus) is the GPU's.
	xids <- nvml.EventData{EventType: nvml.EventTypeXidCriticalError, EventData: 1<<32 | 31}
	xids <- nvml.EventData{EventType: nvml.EventTypeXidCriticalError, EventData: 0<<32 | 79}
	xids <- nvml.EventData{EventType: nvml.EventTypeXidCriticalError, EventData: 0<<32 | 79} // the watcher has taken the first
	got := read("after Xid 79 on GPU 0 and Xid 31 on GPU 1")
	if got[0].Healthy || !slices.Equal(got[0].Faults, []exam.GPUFault{exam.FaultXid}) || !got[1].Healthy {
		t.Errorf("after the Xids: GPU 0 %v %v, GPU 1 %v %v; want GPU 0 out for its Xid, GPU 1 healthy", got[0].Healthy, got[0].Faults, got[1].Healthy, got[1].Faults)
	}
	clock.Lock()
	now = now.Add(XidHold + time.Second)
	clock.Unlock()
	if got := read("past the Xid's hold"); !got[0].Healthy {
		t.Errorf("GPU 0 past the Xid's hold: faults %v, want healthy again", got[0].Faults)
	}
	// Thermal throttling on GPU 1 takes it out while it lasts; ECC
	// errors and pending retirements on GPU 0 until they clear.
	gpus[1].clocks = nvml.ClocksThrottleReasonHwThermalSlowdown | nvml.ClocksThrottleReasonHwSlowdown
	gpus[0].ecc, gpus[0].pending = 3, true
	got = read("throttled and ECC")
	if !slices.Equal(got[1].Faults, []exam.GPUFault{exam.FaultThermal}) || !slices.Equal(got[0].Faults, []exam.GPUFault{exam.FaultECC, exam.FaultRetiredPages}) {
		t.Errorf("GPU 0 %v, GPU 1 %v; want ECC and retired pages, thermal", got[0].Faults, got[1].Faults)
	}
	gpus[1].clocks, gpus[0].ecc, gpus[0].pending = 0, 0, false
	if got := read("cleared"); !got[0].Healthy || !got[1].Healthy {
		t.Errorf("once cleared: %v %v, want both healthy", got[0].Faults, got[1].Faults)
	}
	gpus[1].noName = true
	if got := read("unreadable"); got[1].Healthy || !slices.Equal(got[1].Faults, []exam.GPUFault{exam.FaultUnreadable}) {
		t.Errorf("a GPU NVML cannot read: %v %v, want unhealthy, unreadable", got[1].Healthy, got[1].Faults)
	}
}

func TestAGPUHostWhoseNVMLFailsRefusesToStart(t *testing.T) {
	noLibrary := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
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
		{"auto, NVML without a GPU", SourceAuto, noGPU, "refused: NVML finds no GPU"},
		{"nvml, no library", SourceNVML, noLibrary, "refused: NVML not available"},
		{"nvml, a GPU", SourceNVML, fakeNVML([]*fakeGPU{{}}, make(chan nvml.EventData)), SourceNVML},
		{"simulated where NVML is", SourceSimulated, fakeNVML([]*fakeGPU{{}}, make(chan nvml.EventData)), SourceSimulated},
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
			inv.Close()
		}
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
