package e2e

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"octflow/cmd/octflow/internal/cli"
	"octflow/exam"
	"octflow/internal/bench"
	"octflow/internal/cost"
)

// TestBenchRunsASmallScenario runs `octflow bench` end to end on a small
// burst from three campuses: GPU nodes are real processes (this test
// binary re-executed as gpuworker), one is killed with SIGKILL mid-burst,
// stages fail at random.
// Every exam must complete once, resends must be answered 200, and the
// result must hold the measurements the README describes.
func TestBenchRunsASmallScenario(t *testing.T) {
	c := bench.Config{Exams: 30, Nodes: 2, GPUsPerNode: 1, StageTime: 100 * time.Millisecond, FailRate: 0.05,
		Kills: 1, ResendRate: 0.2, Seed: 3, Mix: map[string]int{"urgent": 10, "normal": 60, "low": 30}, Campuses: 3,
		Node: func(args, env []string) *exec.Cmd {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(append(os.Environ(), env...), "OCTFLOW_TEST_AS_MAIN=gpuworker "+strings.Join(args, " "))
			return cmd
		}}
	// Five attempts, not three: at a 5 % fault rate three faults in a row
	// (or a kill and two faults) end an exam DEAD in about one run in
	// fifty, which is the policy working, not the benchmark failing; the
	// DEAD path has tests of its own.
	pol := bench.Policy()
	pol.MaxAttempts = 5
	res, err := cli.RunBenchOnDevSystem(context.Background(), c, pol, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	if res.Completed != c.Exams || res.DuplicateExecutions != 0 || res.DuplicateReports != 0 {
		t.Errorf("completed %d of %d (DEAD: %v), duplicate executions %d, duplicate reports %d", res.Completed, c.Exams,
			res.DeadExams, res.DuplicateExecutions, res.DuplicateReports)
	}
	if res.Resends == 0 || res.ResendsAnsweredOK != res.Resends || res.NodeKills != 1 {
		t.Errorf("resends %d (answered 200: %d), kills %d", res.Resends, res.ResendsAnsweredOK, res.NodeKills)
	}
	if len(res.Kills) != res.NodeKills || len(res.Kills) == 1 && (!strings.HasPrefix(res.Kills[0].Node, "bench-gpu-") ||
		res.Kills[0].At.Before(res.StartedAt) || res.Kills[0].At.After(res.StartedAt.Add(time.Duration(res.MakespanS*float64(time.Second))))) {
		t.Errorf("kills %+v, not one node killed during the burst from %s", res.Kills, res.StartedAt)
	}
	for _, b := range []exam.Priority{exam.Urgent, exam.Normal, exam.Low} {
		if s := res.QueueWaitS[string(b)]; s.N == 0 || s.Max < s.P50 {
			t.Errorf("queue wait of %s: %+v", b, s)
		}
	}
	// Each campus's waits, and together every exam's.
	perCampus := 0
	for campus, waits := range res.CampusQueueWaitS {
		for _, s := range waits {
			perCampus += s.N
		}
		if len(waits) == 0 {
			t.Errorf("campus %s: no waits", campus)
		}
	}
	if len(res.CampusQueueWaitS) != 3 || perCampus != res.QueueWaitS["urgent"].N+res.QueueWaitS["normal"].N+res.QueueWaitS["low"].N {
		t.Errorf("waits of %d campuses, %d exams in all: %+v", len(res.CampusQueueWaitS), perCampus, res.CampusQueueWaitS)
	}
	// Start, six stages: at least seven workflow tasks and a history of
	// scheduled, started and completed events for each.
	if res.WorkflowTasksPerExam < 7 || res.EventsPerExam < 3*float64(len(shipped())) {
		t.Errorf("per exam: %.1f workflow tasks, %.1f history events", res.WorkflowTasksPerExam, res.EventsPerExam)
	}
	// The engine's cost per exam, from the same histories: one pipeline
	// and one review run per exam, every stage attempted at least once,
	// and the inbox and fleet counted.
	pipe, total := res.CostPerExam[cost.Pipeline], res.CostPerExam["total"]
	if res.Cost.Sources[cost.Pipeline].Runs != c.Exams || res.Cost.Sources[cost.Review].Runs != c.Exams ||
		pipe.Events != res.EventsPerExam || pipe.ActivityAttempts < float64(len(shipped())) ||
		pipe.Actions < 1+pipe.ActivityAttempts+pipe.Upserts || res.Cost.Sources[cost.Inbox].Signals == 0 ||
		res.Cost.Sources[cost.Fleet].Runs == 0 || total.Actions <= pipe.Actions {
		t.Errorf("engine cost %+v, per exam %+v", res.Cost, res.CostPerExam)
	}
	// What the processes' own counters say of the burst: every stage
	// wrote its output and the gateway the scan, every stage reported
	// its end, and the CPU each side used.
	// A killed node's counters go with it (its successor counts from 0),
	// so with a kill only the CPU stages, which the system process that
	// is never killed completes, are sure to be counted for every exam.
	completed := float64(len(shipped()) - 1)
	if res.NodeKills > 0 {
		completed = 0
		for _, st := range shipped() {
			if !st.GPU {
				completed++
			}
		}
	}
	if r := res.Requests; r.ObjectStore["put"] < 4 || r.ObjectStore["get"] < 1 || r.ObjectBytesWritten <= 0 ||
		r.Engine["RespondActivityTaskCompleted"] < completed || r.Engine["StartWorkflowExecution"] < 1 {
		t.Errorf("requests per exam %+v (want at least %.0f stage completions)", r, completed)
	}
	if u := res.CPU; u.SystemMsPerExam <= 0 || u.NodesMsPerExam <= 0 || u.BareMsPerWorkflow <= 0 {
		t.Errorf("CPU per exam %+v", u)
	}
	if res.DispatchLatencyIdleMs.N != 3 || res.MakespanS < 0.5*res.GPUTimeLimitS || res.ExamsPerS <= 0 {
		t.Errorf("dispatch %+v, makespan %.1f s against a %.1f s limit, %.2f exams/s",
			res.DispatchLatencyIdleMs, res.MakespanS, res.GPUTimeLimitS, res.ExamsPerS)
	}
}
