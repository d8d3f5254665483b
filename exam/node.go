package exam

import "time"

// GPU is one device of a GPU node, as the node reports it.
type GPU struct {
	Index          int    `json:"index"`
	UUID           string `json:"uuid"`
	Model          string `json:"model"`
	MemoryTotalMiB uint64 `json:"memoryTotalMiB"`
	MemoryFreeMiB  uint64 `json:"memoryFreeMiB"`
	UtilizationPct uint32 `json:"utilizationPct"`
	// Healthy is true while the GPU has no fault: only a healthy GPU
	// takes stages.
	Healthy bool `json:"healthy"`
	// Faults say why a GPU is not healthy (none while it is).
	Faults []GPUFault `json:"faults,omitempty"`
	// TemperatureC is the GPU's core temperature (0: not read).
	TemperatureC uint32 `json:"temperatureC,omitempty"`
	// Simulated GPUs come from flags, not from NVML.
	Simulated bool `json:"simulated,omitempty"`
}

// GPUFault is one reason a GPU takes no stages. It clears once the node
// reads the GPU well again: by itself for a throttle or a passing Xid
// error, after a GPU reset (and, for an Xid, the node's restart) for the
// faults that need one.
type GPUFault string

// The faults a node reads from NVML (see gpuworker.NVMLInventory).
const (
	// FaultXid: the driver reported a critical Xid error for the GPU
	// since the node started: for 10 minutes, or until the node starts
	// again for one that needs a GPU reset (not one an application
	// causes, such as a page fault).
	FaultXid GPUFault = "xid"
	// FaultECC: uncorrected ECC errors since the driver loaded (NVML's
	// volatile count, which a GPU reset clears).
	FaultECC GPUFault = "ecc"
	// FaultRetiredPages: memory pages to retire, or rows to remap, at
	// the GPU's next reset, or a row remapping that failed.
	FaultRetiredPages GPUFault = "retired-pages"
	// FaultThermal: the hardware holds the GPU's clocks down for heat
	// (two reads in a row).
	FaultThermal GPUFault = "thermal"
	// FaultSlowdown: the hardware holds the clocks down otherwise
	// (slowdown, power brake; two reads in a row).
	FaultSlowdown GPUFault = "hw-slowdown"
	// FaultUnreadable: NVML could not read the GPU.
	FaultUnreadable GPUFault = "unreadable"
)

// GPUFaults are every fault, in the order metrics and the fleet view list
// them.
func GPUFaults() []GPUFault {
	return []GPUFault{FaultXid, FaultECC, FaultRetiredPages, FaultThermal, FaultSlowdown, FaultUnreadable}
}

// BreakerState is where a node's circuit breaker stands.
type BreakerState string

// Closed takes work; Open takes none; HalfOpen lets one probe stage through.
const (
	BreakerClosed   BreakerState = "closed"
	BreakerOpen     BreakerState = "open"
	BreakerHalfOpen BreakerState = "half-open"
)

// BreakerStatus is a node's breaker as the fleet view shows it.
type BreakerStatus struct {
	State       BreakerState `json:"state"`
	FailureRate float64      `json:"failureRate"`
	Samples     int          `json:"samples"`
	OpenedAt    *time.Time   `json:"openedAt,omitempty"`
	Trips       int          `json:"trips"`
}
