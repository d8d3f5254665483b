package contract

import (
	"time"

	"octflow/exam"
)

// NodeReport is what a GPU node tells the fleet on every interval.
type NodeReport struct {
	NodeID    string             `json:"nodeId"`
	TaskQueue string             `json:"taskQueue"`
	GPUs      []exam.GPU         `json:"gpus"`
	InFlight  int                `json:"inFlight"`
	Breaker   exam.BreakerStatus `json:"breaker"`
	Draining  bool               `json:"draining,omitempty"`
	// Interval is how often the node reports; silence for three
	// intervals marks it down.
	Interval time.Duration `json:"interval"`
	// ResetsApplied is the last breaker-reset generation the node applied.
	ResetsApplied int `json:"resetsApplied"`
}

// FleetNode is the fleet's record of one node.
type FleetNode struct {
	Report NodeReport `json:"report"`
	// LastSeen is when the fleet last heard from the node.
	LastSeen time.Time `json:"lastSeen"`
	// ResetGeneration counts operator breaker resets; the node resets its
	// breaker when this is above its Report.ResetsApplied.
	ResetGeneration int `json:"resetGeneration"`
}

// FleetState is the fleet workflow's state, carried across continue-as-new.
type FleetState struct {
	Nodes map[string]*FleetNode `json:"nodes"`
	// HistoryLimit is how many history events a run may grow to before it
	// continues as new (0: the default, 2000).
	HistoryLimit int `json:"historyLimit,omitempty"`
}
