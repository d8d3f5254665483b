package contract

import (
	"slices"
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
	// Pace is how fast the node computes (nil: a node that does not say).
	Pace *NodePace `json:"pace,omitempty"`
}

// FleetNode is the fleet's record of one node.
type FleetNode struct {
	Report NodeReport `json:"report"`
	// LastSeen is when the fleet last heard from the node.
	LastSeen time.Time `json:"lastSeen"`
	// ResetGeneration counts operator breaker resets; the node resets its
	// breaker when this is above its Report.ResetsApplied.
	ResetGeneration int `json:"resetGeneration"`
	// Health is the fleet's judgement of the node's speed; a degraded
	// node takes no new work (it reads this at its next report).
	Health NodeHealth `json:"health"`
}

// NodeState is what the fleet holds for one node that the node applies
// (NodeStateQuery): its health, without the stages it was asked to
// hedge, and the breaker resets asked for.
type NodeState struct {
	// Known: the fleet has a record of the node.
	Known           bool   `json:"known"`
	Health          string `json:"health,omitempty"`
	Reason          string `json:"reason,omitempty"`
	By              string `json:"by,omitempty"`
	ResetGeneration int    `json:"resetGeneration"`
}

// FleetState is the fleet workflow's state, carried across continue-as-new.
type FleetState struct {
	Nodes map[string]*FleetNode `json:"nodes"`
	// HistoryLimit is how many history events a run may grow to before it
	// continues as new (0: the default, 2000).
	HistoryLimit int `json:"historyLimit,omitempty"`
	// Pace tunes the judgement of gray nodes.
	Pace PaceRules `json:"pace,omitzero"`
}

// NodePace is how fast a node computes, as it measures itself: the
// basis of the fleet's judgement of gray nodes (workflows.Judge).
type NodePace struct {
	// Model is the GPU model the figures are for (the node's first GPU).
	Model string `json:"model"`
	// ProbeMs is the median of the node's latest probes: the same
	// computation timed on every node at every report (a denoise of one
	// full-size B-scan), so nodes compare even when they run no stages.
	ProbeMs float64 `json:"probeMs"`
	// Probes is how many probes ProbeMs is the median of.
	Probes int `json:"probes"`
	// Stages is the median compute time (a GPU held) of each stage's
	// latest runs that ended well. A node clears them while the fleet
	// holds it degraded, so the slow runs of that time do not outlive it.
	Stages map[exam.Stage]StagePace `json:"stages,omitempty"`
	// Running is the node's stage attempts in flight.
	Running []RunningStage `json:"running,omitempty"`
}

// StagePace is the median compute time of a stage's latest runs.
type StagePace struct {
	MedianMs float64 `json:"medianMs"`
	Runs     int     `json:"runs"`
}

// RunningStage is one stage attempt a node holds: which exam's, for how
// long, and whether it computes now. The durations are the node's, as of
// its report, so the fleet never compares two machines' clocks.
type RunningStage struct {
	WorkflowID string        `json:"workflowId"`
	RunID      string        `json:"runId"`
	ActivityID string        `json:"activityId"`
	Stage      exam.Stage    `json:"stage"`
	Bucket     exam.Priority `json:"bucket,omitempty"`
	// Held is how long the node has held it (since Temporal handed it
	// over); Computing, how long it has held its GPU (0: it does not, as
	// while it reads its input or stores its output).
	Held      time.Duration `json:"held"`
	Computing time.Duration `json:"computing,omitempty"`
}

// Node health as the fleet judges it.
const (
	Healthy  = "healthy"
	Degraded = "degraded"
)

// NodeHealth is the fleet's judgement of a node's speed.
type NodeHealth struct {
	// State is Healthy or Degraded.
	State string `json:"state"`
	// Since is when the node entered State (zero: healthy since it joined).
	Since time.Time `json:"since,omitzero"`
	// Reason says why, in words ("probe 412 ms, fleet 31 ms").
	Reason string `json:"reason,omitempty"`
	// By is "fleet" for a judgement, or the operator who marked the node.
	By string `json:"by,omitempty"`
	// Held: an operator marked the node degraded; only an operator's
	// healthy mark clears it.
	Held bool `json:"held,omitempty"`
	// Strikes counts the fleet's judgements of the node by its stages
	// (its probe was fine: a slow GPU, a stall) since it was last healthy
	// for PaceRules.StrikesFade; HoldUntil is the earliest it may be
	// healthy again, RecoverHold doubled per strike, so a node that is
	// only slow at its stages does not flap.
	Strikes   int       `json:"strikes,omitempty"`
	HoldUntil time.Time `json:"holdUntil,omitzero"`
	// Recovering counts the node's reports in a row at normal speed while
	// degraded; RecoverAfter of them make it healthy.
	Recovering int `json:"recovering,omitempty"`
	// Hedged is the activities of the node the fleet asked their exams to
	// run again elsewhere ("workflowID/runID/activityID"), so each is
	// asked once.
	Hedged []string `json:"hedged,omitempty"`
}

// NodeMark is an operator's mark of a node (MarkNodeUpdate).
type NodeMark struct {
	NodeID string `json:"nodeId"`
	// State is Degraded (the node takes no work until marked healthy) or
	// Healthy (the mark and any judgement are cleared; the fleet judges
	// the node afresh).
	State string `json:"state"`
	By    string `json:"by"`
}

// Hedge asks an exam to run a stage attempt again on another node.
type Hedge struct {
	ActivityID string `json:"activityId"`
	// Node is the degraded node that holds the attempt.
	Node   string `json:"node"`
	Reason string `json:"reason"`
	// Queue is the task queue of the healthy node the fleet chose to run
	// it (its exam.NodeQueue; "": the shared queue): a degraded node may
	// still have a poll out on the shared queue.
	Queue string `json:"queue,omitempty"`
}

// PaceRules tune the fleet's judgement of gray nodes. The zero value of a
// field is its default (DefaultPaceRules).
type PaceRules struct {
	// SlowFactor: a node whose probe, or a stage's median, takes more than
	// this many times the fleet's is degraded (3); so is one with a stage
	// computing that many times the fleet's median and at least StallFloor.
	SlowFactor float64 `json:"slowFactor,omitempty"`
	// RecoverFactor: a degraded node whose probe is within this many
	// times the fleet's counts as recovering (1.5).
	RecoverFactor float64 `json:"recoverFactor,omitempty"`
	// RecoverAfter is how many recovering reports in a row make a
	// degraded node healthy (3).
	RecoverAfter int `json:"recoverAfter,omitempty"`
	// MinRuns is how many runs a median needs to be judged, or judged
	// against (3).
	MinRuns int `json:"minRuns,omitempty"`
	// HedgeFactor: a stage on a degraded node held for longer than this
	// many times the fleet's median for it is run again elsewhere (2),
	// and never before HedgeFloor (2 s): the node is already known slow,
	// and a hedge costs one more run on a healthy node. StallFloor is the least time a
	// stage computes before it can be judged stalled (10 s).
	HedgeFactor float64       `json:"hedgeFactor,omitempty"`
	HedgeFloor  time.Duration `json:"hedgeFloor,omitempty"`
	StallFloor  time.Duration `json:"stallFloor,omitempty"`
	// RecoverHold is how long a node judged by its stages (not its probe)
	// stays degraded at least, doubled for each strike up to MaxHold (1
	// min, 1 h); StrikesFade is how long it must then stay healthy for its
	// strikes to be forgotten (1 h).
	RecoverHold time.Duration `json:"recoverHold,omitempty"`
	MaxHold     time.Duration `json:"maxHold,omitempty"`
	StrikesFade time.Duration `json:"strikesFade,omitempty"`
}

// WithDefaults fills the zero fields of r.
func (r PaceRules) WithDefaults() PaceRules {
	if r.SlowFactor <= 0 {
		r.SlowFactor = 3
	}
	if r.RecoverFactor <= 0 {
		r.RecoverFactor = 1.5
	}
	if r.RecoverAfter <= 0 {
		r.RecoverAfter = 3
	}
	if r.MinRuns <= 0 {
		r.MinRuns = 3
	}
	if r.HedgeFactor <= 0 {
		r.HedgeFactor = 2
	}
	if r.HedgeFloor <= 0 {
		r.HedgeFloor = 2 * time.Second
	}
	if r.StallFloor <= 0 {
		r.StallFloor = 10 * time.Second
	}
	if r.RecoverHold <= 0 {
		r.RecoverHold = time.Minute
	}
	if r.MaxHold <= 0 {
		r.MaxHold = time.Hour
	}
	if r.StrikesFade <= 0 {
		r.StrikesFade = time.Hour
	}
	return r
}

// Median is the median of xs (0 for none): how a node sums up its
// figures and the fleet its nodes'.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
