package deployment

import (
	"testing"

	"go.temporal.io/sdk/client"

	"octflow/exam"
)

// A build may take exams only when its workers poll both of the pipeline
// worker's queues: with the workflow queue alone, a pinned exam's CPU
// stages would leave its build.
func TestABuildIsPolledOnlyWhenBothPipelineQueuesAre(t *testing.T) {
	wf := client.WorkerDeploymentTaskQueueInfo{Name: exam.WorkflowQueue, Type: client.TaskQueueTypeWorkflow}
	cpu := client.WorkerDeploymentTaskQueueInfo{Name: exam.CPUQueue, Type: client.TaskQueueTypeActivity}
	cpuAsWorkflow := client.WorkerDeploymentTaskQueueInfo{Name: exam.CPUQueue, Type: client.TaskQueueTypeWorkflow}
	for _, tc := range []struct {
		name   string
		queues []client.WorkerDeploymentTaskQueueInfo
		want   bool
	}{
		{"both", []client.WorkerDeploymentTaskQueueInfo{wf, cpu}, true},
		{"workflows only", []client.WorkerDeploymentTaskQueueInfo{wf}, false},
		{"CPU stages only", []client.WorkerDeploymentTaskQueueInfo{cpu}, false},
		{"the CPU queue polled for workflows", []client.WorkerDeploymentTaskQueueInfo{wf, cpuAsWorkflow}, false},
		{"none", nil, false},
	} {
		if got := pollsPipeline(tc.queues); got != tc.want {
			t.Errorf("%s: polled %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestTheRunningQueryNamesTheVersionAndCannotBeBrokenOutOf(t *testing.T) {
	if got, want := runningOn("octflow", "1.0.0+abc"), "ExecutionStatus = 'Running' AND TemporalWorkerDeploymentVersion = 'octflow:1.0.0+abc'"; got != want {
		t.Errorf("query %q, want %q", got, want)
	}
	if got := runningOn("octflow", "x' OR 'a'='a"); got != "ExecutionStatus = 'Running' AND TemporalWorkerDeploymentVersion = 'octflow:x OR a=a'" {
		t.Errorf("a quote in a build ID reached the query: %q", got)
	}
}
