package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"

	"octflow/api/problems"
	"octflow/exam"
	"octflow/lifecycle"
)

// QueueView is one task queue in GET /v1/queues.
type QueueView struct {
	Queue string `json:"queue"`
	Kind  string `json:"kind"` // activity or workflow tasks
	// Backlog and OldestWait are Temporal's approximate figures.
	Backlog    int64   `json:"backlog"`
	OldestWait string  `json:"oldestWait"`
	AddRate    float32 `json:"addRatePerSecond"`
	Dispatch   float32 `json:"dispatchRatePerSecond"`
	Pollers    int     `json:"pollers"`
}

// QueuesView is the body of GET /v1/queues.
type QueuesView struct {
	Queues []QueueView `json:"queues"`
	// ScheduledExams counts the running exams whose workflow last
	// scheduled a stage (its state QUEUED: the stage waits for a node, is
	// claimed or runs), by submitted bucket.
	ScheduledExams map[exam.Priority]int64 `json:"scheduledExams"`
}

// queueStat is what Temporal says of one task queue.
type queueStat struct {
	name, kind    string
	backlog       int64
	age           time.Duration
	add, dispatch float32
	pollers       int
}

// queueStats describes the shared task queues (GPU, CPU, workflows) and
// the GPU queues of the campuses with GPUs of their own.
func (s *Server) queueStats(ctx context.Context) ([]queueStat, error) {
	type queue struct {
		name string
		kind enumspb.TaskQueueType
	}
	queues := []queue{
		{exam.GPUQueue, enumspb.TASK_QUEUE_TYPE_ACTIVITY},
		{exam.CPUQueue, enumspb.TASK_QUEUE_TYPE_ACTIVITY},
		{exam.WorkflowQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW},
	}
	for _, c := range s.cfg.Policy.OwnGPUs {
		queues = append(queues, queue{exam.CampusGPUQueue(c), enumspb.TASK_QUEUE_TYPE_ACTIVITY})
	}
	var out []queueStat
	for _, q := range queues {
		resp, err := s.cfg.Temporal.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
			Namespace: s.cfg.Namespace, TaskQueue: &taskqueuepb.TaskQueue{Name: q.name, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
			TaskQueueType: q.kind, ReportStats: true,
		})
		if err != nil {
			return nil, err
		}
		st := resp.GetStats()
		out = append(out, queueStat{name: q.name, kind: map[enumspb.TaskQueueType]string{enumspb.TASK_QUEUE_TYPE_ACTIVITY: "activity",
			enumspb.TASK_QUEUE_TYPE_WORKFLOW: "workflow"}[q.kind],
			backlog: st.GetApproximateBacklogCount(), age: st.GetApproximateBacklogAge().AsDuration(),
			add: st.GetTasksAddRate(), dispatch: st.GetTasksDispatchRate(), pollers: len(resp.GetPollers())})
	}
	return out, nil
}

// listQueues serves GET /v1/queues: backlog and oldest wait per queue,
// and per bucket the running exams whose workflow last scheduled a stage
// (from the search attributes).
func (s *Server) listQueues(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 10*time.Second)
	defer cancel()
	view := QueuesView{ScheduledExams: map[exam.Priority]int64{}}
	queues, err := s.queueStats(ctx)
	if err != nil {
		return problems.New(http.StatusServiceUnavailable, "unavailable", "temporal: "+err.Error())
	}
	for _, q := range queues {
		view.Queues = append(view.Queues, QueueView{Queue: q.name, Kind: q.kind, Backlog: q.backlog,
			OldestWait: q.age.Round(time.Millisecond).String(), AddRate: q.add, Dispatch: q.dispatch, Pollers: q.pollers})
	}
	for _, b := range exam.Buckets() {
		resp, err := s.cfg.Temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
			Query: fmt.Sprintf("%s = '%s' AND %s = '%s' AND ExecutionStatus = 'Running'",
				exam.AttrState, lifecycle.Queued, exam.AttrPriority, b),
		})
		if err != nil {
			return problems.New(http.StatusServiceUnavailable, "unavailable", "temporal: "+err.Error())
		}
		view.ScheduledExams[b] = resp.GetCount()
	}
	return c.JSON(http.StatusOK, view)
}
