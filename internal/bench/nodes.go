package bench

import (
	"context"
	"slices"
	"strings"
	"time"

	"octflow/api"
	"octflow/contract"
	"octflow/exam"
)

// NodeResult is one GPU node over a burst, as the fleet view showed it.
type NodeResult struct {
	Node string `json:"node"`
	// Gray: the node the run made slow (Config.GrayNode).
	Gray bool `json:"gray,omitempty"`
	// DegradedAtS is when the fleet first judged the node degraded, in
	// seconds from the burst's start (nil: never), and Reason why.
	DegradedAtS *float64 `json:"degradedAtS,omitempty"`
	Reason      string   `json:"reason,omitempty"`
	// DegradedS is how long it was degraded over the burst, as sampled
	// every second; UnhealthyGPUS, how long its GPUs reported a fault
	// (GPU-seconds).
	DegradedS     float64 `json:"degradedS"`
	UnhealthyGPUS float64 `json:"unhealthyGpuS"`
	// StageMs is the node's median compute time per stage, the latest it
	// reported before it was degraded (a degraded node drops them).
	StageMs map[exam.Stage]float64 `json:"stageMs"`
	ProbeMs float64                `json:"probeMs"`
}

// watchNodes samples the fleet view every second until ctx ends, then
// sends what it saw, one NodeResult per node, ordered by node.
func watchNodes(ctx context.Context, admin *api.Client, start time.Time) <-chan []NodeResult {
	out := make(chan []NodeResult, 1)
	go func() {
		seen := map[string]*NodeResult{}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			var views []api.NodeView
			// A fleet view that does not answer is sampled next time.
			if admin.Get(ctx, "/v1/nodes", &views) == nil {
				sample(seen, views, start)
			}
			select {
			case <-ctx.Done():
				res := make([]NodeResult, 0, len(seen))
				for _, n := range seen {
					res = append(res, *n)
				}
				slices.SortFunc(res, func(a, b NodeResult) int { return strings.Compare(a.Node, b.Node) })
				out <- res
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// sample adds one look at the fleet view to seen.
func sample(seen map[string]*NodeResult, views []api.NodeView, start time.Time) {
	now := time.Now()
	for _, v := range views {
		n := seen[v.NodeID]
		if n == nil {
			n = &NodeResult{Node: v.NodeID, StageMs: map[exam.Stage]float64{}}
			seen[v.NodeID] = n
		}
		if v.Health.State == contract.Degraded {
			n.DegradedS++
			if n.DegradedAtS == nil {
				at := now.Sub(start).Seconds()
				n.DegradedAtS, n.Reason = &at, v.Health.Reason
			}
		}
		for _, g := range v.GPUs {
			if !g.Healthy {
				n.UnhealthyGPUS++
			}
		}
		if v.Pace == nil {
			continue
		}
		n.ProbeMs = v.Pace.ProbeMs
		for stage, sp := range v.Pace.Stages {
			n.StageMs[stage] = sp.MedianMs
		}
	}
}

// hedgesOf is the hedged stage tries over a burst, by which run won.
func hedgesOf(before, after counterSet) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if won, ok := strings.CutPrefix(k, "octflow_stage_hedges{"); ok {
			if d := v - before[k]; d > 0 {
				out[strings.TrimSuffix(won, "}")] = d
			}
		}
	}
	return out
}
