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
	Healthy        bool   `json:"healthy"`
	// Simulated GPUs come from flags, not from NVML.
	Simulated bool `json:"simulated,omitempty"`
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
