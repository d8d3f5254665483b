package workflows

import (
	"slices"
	"strings"
	"testing"
	"time"

	"octflow/contract"
	"octflow/exam"
)

var judgeNow = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

// paced is a node that reported just now with these figures.
func paced(id, model string, probeMs float64, stages map[exam.Stage]contract.StagePace, running ...contract.RunningStage) *contract.FleetNode {
	return &contract.FleetNode{LastSeen: judgeNow, Health: contract.NodeHealth{State: contract.Healthy},
		Report: contract.NodeReport{NodeID: id, Interval: 10 * time.Second,
			Pace: &contract.NodePace{Model: model, ProbeMs: probeMs, Probes: 5, Stages: stages, Running: running}}}
}

func layersMs(ms float64) map[exam.Stage]contract.StagePace {
	return map[exam.Stage]contract.StagePace{exam.Layers: {MedianMs: ms, Runs: 5}}
}

func computing(stage exam.Stage, since time.Duration) contract.RunningStage {
	return contract.RunningStage{WorkflowID: "exam/north/" + string(stage), RunID: "r1", ActivityID: string(stage) + "-1",
		Stage: stage, Bucket: exam.Normal, Held: since, Computing: since}
}

func TestJudgeMarksASlowNodeDegradedAgainstItsPeers(t *testing.T) {
	peers := func() map[string]*contract.FleetNode {
		return map[string]*contract.FleetNode{
			"a": paced("a", "L4", 30, layersMs(1000)),
			"b": paced("b", "L4", 34, layersMs(1100)),
		}
	}
	cases := []struct {
		name   string
		node   *contract.FleetNode
		change func(map[string]*contract.FleetNode)
		want   string // the reason's start; "": healthy
	}{
		{"as fast as its peers", paced("x", "L4", 40, layersMs(1500)), nil, ""},
		{"probe and stage slower, but under three times", paced("x", "L4", 90, layersMs(3100)), nil, ""},
		{"probe four times its peers'", paced("x", "L4", 130, nil), nil, "probe 130 ms, fleet 32 ms"},
		{"a stage four times its peers'", paced("x", "L4", 40, layersMs(4300)), nil, "layers takes 4300 ms"},
		{"a stage computing far past its peers'", paced("x", "L4", 40, nil, computing(exam.Layers, 20*time.Second)), nil, "layers computing for 20s"},
		{"a long stage, but within the stall floor", paced("x", "L4", 40, nil, computing(exam.Layers, 8*time.Second)), nil, ""},
		{"too few probes to judge", func() *contract.FleetNode { n := paced("x", "L4", 500, nil); n.Report.Pace.Probes = 2; return n }(), nil, ""},
		{"peers of another model", paced("x", "H100", 500, nil), nil, ""},
		{"peers silent for three intervals", paced("x", "L4", 500, nil), func(ns map[string]*contract.FleetNode) {
			for _, id := range []string{"a", "b"} {
				ns[id].LastSeen = judgeNow.Add(-31 * time.Second)
			}
		}, ""},
		{"peers that are degraded themselves", paced("x", "L4", 500, nil), func(ns map[string]*contract.FleetNode) {
			ns["a"].Health.State, ns["b"].Health.State = contract.Degraded, contract.Degraded
		}, ""},
		{"a draining node is not judged", func() *contract.FleetNode { n := paced("x", "L4", 500, nil); n.Report.Draining = true; return n }(), nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nodes := peers()
			nodes["x"] = c.node
			if c.change != nil {
				c.change(nodes)
			}
			Judge(judgeNow, nodes, "x", contract.PaceRules{})
			h := nodes["x"].Health
			switch {
			case c.want == "" && h.State != contract.Healthy:
				t.Errorf("health %+v, want healthy", h)
			case c.want != "" && (h.State != contract.Degraded || !strings.HasPrefix(h.Reason, c.want) || h.By != "fleet" || !h.Since.Equal(judgeNow)):
				t.Errorf("health %+v, want degraded by the fleet for %q", h, c.want)
			}
		})
	}
}

func TestJudgeBringsADegradedNodeBackOnlyAfterItsProbesRunAtNormalSpeed(t *testing.T) {
	nodes := map[string]*contract.FleetNode{"a": paced("a", "L4", 30, layersMs(1000)), "x": paced("x", "L4", 300, nil)}
	judge := func(probeMs float64) contract.NodeHealth {
		nodes["x"].Report.Pace.ProbeMs = probeMs
		Judge(judgeNow, nodes, "x", contract.PaceRules{})
		return nodes["x"].Health
	}
	if h := judge(300); h.State != contract.Degraded {
		t.Fatalf("health %+v, want degraded", h)
	}
	// Two good reports, a slow one (the count starts again), then three.
	for i, probe := range []float64{35, 40, 200, 35, 33} {
		if h := judge(probe); h.State != contract.Degraded {
			t.Fatalf("report %d: healthy after %+v, before three good reports in a row", i, h)
		}
	}
	if h := judge(31); h.State != contract.Healthy || h.By != "fleet" {
		t.Errorf("after three good reports in a row: %+v, want healthy", h)
	}

	// An operator's mark holds whatever the probes say.
	nodes["x"].Health = contract.NodeHealth{State: contract.Degraded, Held: true, By: "ops"}
	for range 5 {
		judge(30)
	}
	if h := nodes["x"].Health; h.State != contract.Degraded || h.By != "ops" {
		t.Errorf("an operator's mark was overruled: %+v", h)
	}

	// A degraded node with no peer left is better than no node.
	nodes["x"].Health = contract.NodeHealth{State: contract.Degraded, By: "fleet"}
	delete(nodes, "a")
	if h := judge(300); h.State != contract.Healthy {
		t.Errorf("the only node left stays degraded: %+v", h)
	}
}

func TestJudgeHedgesADegradedNodesStagesPastTheirDeadlineOnceUrgentFirst(t *testing.T) {
	taken := func(id string, bucket exam.Priority, ago time.Duration) contract.RunningStage {
		return contract.RunningStage{WorkflowID: "exam/north/" + id, RunID: "r1", ActivityID: "layers-1", Stage: exam.Layers,
			Bucket: bucket, Held: ago}
	}
	// The fleet's layers take 4 s: a stage is hedged after 8 s.
	x := paced("x", "L4", 300, nil, taken("low", exam.Low, 9*time.Second), taken("urgent", exam.Urgent, 9*time.Second),
		taken("young", exam.Urgent, 7*time.Second))
	nodes := map[string]*contract.FleetNode{"a": paced("a", "L4", 30, layersMs(4000)), "x": x}
	orders := Judge(judgeNow, nodes, "x", contract.PaceRules{})
	var got []string
	for _, o := range orders {
		got = append(got, o.WorkflowID)
		if o.Hedge.ActivityID != "layers-1" || o.Hedge.Node != "x" || !strings.Contains(o.Hedge.Reason, "degraded") ||
			o.Hedge.Queue != exam.NodeQueue("a") {
			t.Errorf("order %+v", o)
		}
	}
	if want := []string{"exam/north/urgent", "exam/north/low"}; !slices.Equal(got, want) {
		t.Errorf("hedged %v, want %v (urgent first, none before its deadline)", got, want)
	}
	// The next report: only the one that passed its deadline since.
	x.Report.Pace.Running[2].Held = 9 * time.Second
	orders = Judge(judgeNow, nodes, "x", contract.PaceRules{})
	if len(orders) != 1 || orders[0].WorkflowID != "exam/north/young" {
		t.Errorf("second report hedged %+v, want only the young stage", orders)
	}
	// Stages the node no longer holds are forgotten.
	x.Report.Pace.Running = x.Report.Pace.Running[:1]
	Judge(judgeNow, nodes, "x", contract.PaceRules{})
	if len(x.Health.Hedged) != 1 {
		t.Errorf("hedged keys %v, want only the stage still held", x.Health.Hedged)
	}
	// With no healthy node to run them, nothing is hedged.
	nodes["x"].Health = contract.NodeHealth{State: contract.Degraded, Held: true}
	x.Report.Pace.Running = append(x.Report.Pace.Running, taken("lonely", exam.Urgent, time.Hour))
	nodes["a"].Health.State = contract.Degraded
	if orders := Judge(judgeNow, nodes, "x", contract.PaceRules{}); len(orders) != 0 {
		t.Errorf("hedged %+v with no healthy node left", orders)
	}
	nodes["a"].Health.State = contract.Healthy

	// A healthy node's stages are never hedged.
	a := nodes["a"]
	a.Report.Pace.Running = []contract.RunningStage{taken("slow", exam.Normal, time.Hour)}
	if orders := Judge(judgeNow, nodes, "a", contract.PaceRules{}); len(orders) != 0 || a.Health.State != contract.Healthy {
		t.Errorf("a healthy node with a long stage: %+v, orders %+v", a.Health, orders)
	}
}

// A node judged by its stages while its probe is fine would pass the
// probe's recovery at once and take stages again to be judged again: it
// stays degraded for a hold that doubles with each strike, and the
// strikes fade after a healthy hour.
func TestJudgeHoldsANodeSlowAtItsStagesLongerAtEachStrike(t *testing.T) {
	rules := contract.PaceRules{RecoverHold: time.Minute}
	slow := func() map[string]*contract.FleetNode {
		return map[string]*contract.FleetNode{"a": paced("a", "L4", 30, layersMs(1000)), "x": paced("x", "L4", 30, layersMs(5000))}
	}
	nodes := slow()
	now := judgeNow
	judge := func() contract.NodeHealth {
		nodes["a"].LastSeen, nodes["x"].LastSeen = now, now // both report
		Judge(now, nodes, "x", rules)
		return nodes["x"].Health
	}
	for strike, hold := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute} {
		h := judge()
		if h.State != contract.Degraded || h.Strikes != strike+1 || !h.HoldUntil.Equal(now.Add(hold)) {
			t.Fatalf("strike %d: %+v; want degraded, held %s", strike+1, h, hold)
		}
		// Its probe is fine and it runs no stage: three good reports,
		// still held until the hold is over.
		nodes["x"].Report.Pace.Stages = nil
		for range 3 {
			now = now.Add(10 * time.Second)
			if h := judge(); h.State != contract.Degraded {
				t.Fatalf("strike %d: healthy %s after it was degraded, before its %s hold", strike+1, now.Sub(judgeNow), hold)
			}
		}
		now = nodes["x"].Health.HoldUntil
		if h := judge(); h.State != contract.Healthy || h.Strikes != strike+1 {
			t.Fatalf("strike %d: after its hold %+v, want healthy with its strikes kept", strike+1, h)
		}
		// Slow at its stages again.
		nodes["x"].Report.Pace.Stages = layersMs(5000)
		now = now.Add(time.Minute)
	}
	// Healthy for an hour: the strikes are forgotten.
	nodes = slow()
	nodes["x"].Health = contract.NodeHealth{State: contract.Healthy, Since: now.Add(-time.Hour), Strikes: 3}
	if h := judge(); h.Strikes != 1 || !h.HoldUntil.Equal(now.Add(time.Minute)) {
		t.Errorf("after a healthy hour: %+v; want the first strike's hold again", h)
	}
	// Judged by its probe, a node comes back on its probe: no hold.
	nodes = map[string]*contract.FleetNode{"a": paced("a", "L4", 30, nil), "x": paced("x", "L4", 300, nil)}
	if h := judge(); h.State != contract.Degraded || !h.HoldUntil.IsZero() || h.Strikes != 0 {
		t.Errorf("judged by its probe: %+v; want degraded with no hold", h)
	}
}

// A node bound to a campus holds no other campus's keys: a degraded
// node's stages are hedged only on a peer that serves its queue, and
// with none, not at all; speed is still compared across queues.
func TestJudgeHedgesOnlyOnAPeerServingTheSameQueue(t *testing.T) {
	held := contract.RunningStage{WorkflowID: "exam/north/1", RunID: "r1", ActivityID: "layers-1", Stage: exam.Layers,
		Bucket: exam.Normal, Held: time.Minute}
	bound := func(n *contract.FleetNode, campus string) *contract.FleetNode {
		n.Report.TaskQueue = exam.CampusGPUQueue(campus)
		return n
	}
	for _, tc := range []struct {
		name  string
		peers []*contract.FleetNode
		want  string // the queue hedged to; "": none
	}{
		{"a shared node and one of north", []*contract.FleetNode{paced("a", "L4", 30, layersMs(4000)),
			bound(paced("b", "L4", 30, layersMs(4000)), "north")}, exam.NodeQueueOf(exam.CampusGPUQueue("north"), "b")},
		{"a node of south only", []*contract.FleetNode{bound(paced("s", "L4", 30, layersMs(4000)), "south")}, ""},
		{"a shared node only", []*contract.FleetNode{paced("a", "L4", 30, layersMs(4000))}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := bound(paced("x", "L4", 300, nil, held), "north")
			nodes := map[string]*contract.FleetNode{"x": x}
			for _, p := range tc.peers {
				nodes[p.Report.NodeID] = p
			}
			orders := Judge(judgeNow, nodes, "x", contract.PaceRules{})
			if x.Health.State != contract.Degraded {
				t.Fatalf("x is %s, want degraded against its peers on any queue", x.Health.State)
			}
			var got string
			if len(orders) > 0 {
				got = orders[0].Hedge.Queue
			}
			if got != tc.want || len(orders) > 1 {
				t.Errorf("hedged to %q (%d orders), want %q", got, len(orders), tc.want)
			}
		})
	}
}
