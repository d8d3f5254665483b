package workflows

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"

	"octflow/contract"
	"octflow/exam"
)

// HedgeOrder asks the exam of a stage attempt held by a degraded node to
// run the stage again elsewhere.
type HedgeOrder struct {
	WorkflowID, RunID string
	Hedge             contract.Hedge
}

// Judge updates the health of node id from its latest report, against
// the figures of its peers: the other nodes with GPUs of the same model
// that report, are healthy and say how fast they compute. It returns the
// hedges to ask for, urgent stages first.
//
// A healthy node is degraded when its probe, or a stage's median compute
// time, takes more than rules.SlowFactor times its peers' median, or when
// a stage it runs has computed for longer than that many times the peers'
// median for the stage (and at least rules.StallFloor): stopped, while
// its node still reports. A degraded node is healthy again after
// rules.RecoverAfter reports in a row whose probe is within
// rules.RecoverFactor of its peers' and with no stalled stage, or at once
// when it has no peers left to compare with (a slow node is better than
// none). A node judged by its stages while its probe was fine (a slow
// GPU, a stall) is a strike: it stays degraded at least
// rules.RecoverHold, doubled for each strike, so it does not flap between
// its probe's recovery and its stages' judgement. An operator's mark
// (Health.Held) is never overruled.
//
// The stage attempts a degraded node holds are hedged once each after
// rules.HedgeFactor times the peers' median for the stage (at least
// rules.HedgeFloor) since the node took them, on the peer with the
// fewest stages in hand.
func Judge(now time.Time, nodes map[string]*contract.FleetNode, id string, rules contract.PaceRules) []HedgeOrder {
	rules = rules.WithDefaults()
	n := nodes[id]
	if n == nil || n.Report.Pace == nil || n.Report.Draining {
		return nil
	}
	pace := n.Report.Pace
	f := peerFigures(now, nodes, id, pace.Model, rules.MinRuns)
	f.target = hedgeTarget(now, nodes, id)
	h := &n.Health
	if h.State == "" {
		h.State = contract.Healthy
	}
	switch {
	case h.Held:
	case h.State == contract.Healthy:
		if h.Strikes > 0 && now.Sub(h.Since) >= rules.StrikesFade {
			h.Strikes = 0
		}
		why, byProbe := slowness(pace, f, rules)
		if why == "" {
			break
		}
		next := contract.NodeHealth{State: contract.Degraded, Since: now, Reason: why, By: "fleet", Strikes: h.Strikes}
		if !byProbe {
			// Its probe is fine, so it would pass recovery at once: it
			// stays out for a hold that doubles with each strike.
			next.Strikes++
			hold := rules.RecoverHold
			for range next.Strikes - 1 {
				if hold >= rules.MaxHold {
					break
				}
				hold *= 2
			}
			next.HoldUntil = now.Add(min(hold, rules.MaxHold))
		}
		*h = next
	case !f.any():
		*h = contract.NodeHealth{State: contract.Healthy, Since: now, By: "fleet", Strikes: h.Strikes,
			Reason: "no healthy node of its model left to compare with"}
	default:
		if pace.Probes >= rules.MinRuns && f.probe > 0 && pace.ProbeMs <= rules.RecoverFactor*f.probe && stall(pace, f, rules) == "" {
			h.Recovering++
		} else {
			h.Recovering = 0
		}
		if h.Recovering >= rules.RecoverAfter && !now.Before(h.HoldUntil) {
			*h = contract.NodeHealth{State: contract.Healthy, Since: now, By: "fleet", Strikes: h.Strikes,
				Reason: fmt.Sprintf("probe %.0f ms, fleet %.0f ms", pace.ProbeMs, f.probe)}
		}
	}
	if h.State != contract.Degraded {
		h.Hedged = nil
		return nil
	}
	return hedges(n, f, rules)
}

// figures are a node's peers' medians: of their probes, and of each
// stage's compute time; and the peer with the fewest stages in hand,
// where hedges go ("": none).
type figures struct {
	probe  float64
	stages map[exam.Stage]float64
	target string
}

func (f figures) any() bool { return f.probe > 0 || len(f.stages) > 0 }

// peerFigures are the figures of id's peers (see Judge), each counted
// where it rests on at least minRuns runs.
func peerFigures(now time.Time, nodes map[string]*contract.FleetNode, id, model string, minRuns int) figures {
	var probes []float64
	stages := map[exam.Stage][]float64{}
	for _, pid := range sortedIDs(nodes) {
		p := nodes[pid]
		pp := p.Report.Pace
		if pid == id || pp == nil || pp.Model != model || !usable(now, p) {
			continue
		}
		if pp.Probes >= minRuns {
			probes = append(probes, pp.ProbeMs)
		}
		// Order does not matter: each stage's figures are summed up by
		// their median.
		//workflowcheck:ignore
		for stage, s := range pp.Stages {
			if s.Runs >= minRuns {
				stages[stage] = append(stages[stage], s.MedianMs)
			}
		}
	}
	f := figures{probe: contract.Median(probes), stages: map[exam.Stage]float64{}}
	//workflowcheck:ignore
	for stage, ms := range stages {
		f.stages[stage] = contract.Median(ms)
	}
	return f
}

// slowness says why a healthy node is too slow ("": it is not), and
// whether its probe says so.
func slowness(pace *contract.NodePace, f figures, rules contract.PaceRules) (why string, byProbe bool) {
	if pace.Probes >= rules.MinRuns && f.probe > 0 && pace.ProbeMs > rules.SlowFactor*f.probe {
		return fmt.Sprintf("probe %.0f ms, fleet %.0f ms", pace.ProbeMs, f.probe), true
	}
	for _, stage := range sortedStages(pace.Stages) {
		s, ref := pace.Stages[stage], f.stages[stage]
		if s.Runs >= rules.MinRuns && ref > 0 && s.MedianMs > rules.SlowFactor*ref {
			return fmt.Sprintf("%s takes %.0f ms, fleet %.0f ms", stage, s.MedianMs, ref), false
		}
	}
	return stall(pace, f, rules), false
}

// stall says which stage of the node has computed for too long ("": none).
func stall(pace *contract.NodePace, f figures, rules contract.PaceRules) string {
	for _, r := range pace.Running {
		ref := f.stages[r.Stage]
		if r.Computing <= 0 || ref <= 0 {
			continue
		}
		limit := max(time.Duration(rules.SlowFactor*ref*float64(time.Millisecond)), rules.StallFloor)
		if r.Computing > limit {
			return fmt.Sprintf("%s computing for %s, fleet %.0f ms", r.Stage, r.Computing.Round(time.Second), ref)
		}
	}
	return ""
}

// usable says whether node p reports, is healthy and not draining.
func usable(now time.Time, p *contract.FleetNode) bool {
	interval := cmp.Or(p.Report.Interval, defaultReportInterval)
	return !p.Report.Draining && p.Health.State != contract.Degraded && now.Sub(p.LastSeen) <= 3*interval
}

// hedgeTarget is the peer of node id that its hedges go to ("": none):
// of the usable nodes of the same GPU model that serve the same queue
// (a node bound to a campus opens no other campus's stages) and take
// stages (the breaker is not open), the one with the fewest in hand.
func hedgeTarget(now time.Time, nodes map[string]*contract.FleetNode, id string) string {
	n := nodes[id]
	target, load := "", 0
	for _, pid := range sortedIDs(nodes) {
		p := nodes[pid]
		pp := p.Report.Pace
		if pid == id || pp == nil || pp.Model != n.Report.Pace.Model || !usable(now, p) ||
			queueOf(p) != queueOf(n) || p.Report.Breaker.State == exam.BreakerOpen {
			continue
		}
		if l := len(pp.Running); target == "" || l < load {
			target, load = pid, l
		}
	}
	return target
}

// queueOf is the shared queue node n serves.
func queueOf(n *contract.FleetNode) string { return cmp.Or(n.Report.TaskQueue, exam.GPUQueue) }

// hedges are the orders for the stages of degraded node n past their
// deadline, asked once each, urgent first, to run on the healthy peer
// with the fewest stages in hand (none without one); n.Health.Hedged
// keeps the ones asked for that the node still holds.
func hedges(n *contract.FleetNode, f figures, rules contract.PaceRules) []HedgeOrder {
	if f.target == "" {
		return nil
	}
	asked := map[string]bool{}
	for _, k := range n.Health.Hedged {
		asked[k] = true
	}
	var kept []string
	var orders []HedgeOrder
	running := slices.Clone(n.Report.Pace.Running)
	sort.SliceStable(running, func(i, j int) bool {
		return running[i].Bucket.Rank() < running[j].Bucket.Rank()
	})
	for _, r := range running {
		key := r.WorkflowID + "/" + r.RunID + "/" + r.ActivityID
		if asked[key] {
			kept = append(kept, key)
			continue
		}
		deadline := max(time.Duration(rules.HedgeFactor*f.stages[r.Stage]*float64(time.Millisecond)), rules.HedgeFloor)
		if r.Held < deadline {
			continue
		}
		kept = append(kept, key)
		orders = append(orders, HedgeOrder{WorkflowID: r.WorkflowID, RunID: r.RunID, Hedge: contract.Hedge{
			ActivityID: r.ActivityID, Node: n.Report.NodeID, Queue: exam.NodeQueueOf(queueOf(n), f.target),
			Reason: fmt.Sprintf("node %s is degraded (%s); held %s past its deadline of %s", n.Report.NodeID,
				n.Health.Reason, r.Held.Round(time.Second), deadline.Round(100*time.Millisecond)),
		}})
	}
	n.Health.Hedged = kept
	return orders
}

func sortedIDs(nodes map[string]*contract.FleetNode) []string {
	ids := make([]string, 0, len(nodes))
	//workflowcheck:ignore
	for id := range nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func sortedStages(m map[exam.Stage]contract.StagePace) []exam.Stage {
	out := make([]exam.Stage, 0, len(m))
	//workflowcheck:ignore
	for s := range m {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
