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
	// QueuedExams counts exams waiting for a stage, by submitted bucket.
	QueuedExams map[exam.Priority]int64 `json:"queuedExams"`
}

// listQueues serves GET /v1/queues: backlog and oldest wait per queue,
// and the waiting exams per bucket (from the search attributes).
func (s *Server) listQueues(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 10*time.Second)
	defer cancel()
	view := QueuesView{QueuedExams: map[exam.Priority]int64{}}
	for _, q := range []struct {
		name string
		kind enumspb.TaskQueueType
	}{
		{exam.GPUQueue, enumspb.TASK_QUEUE_TYPE_ACTIVITY},
		{exam.CPUQueue, enumspb.TASK_QUEUE_TYPE_ACTIVITY},
		{exam.WorkflowQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW},
	} {
		resp, err := s.cfg.Temporal.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
			Namespace: s.cfg.Namespace, TaskQueue: &taskqueuepb.TaskQueue{Name: q.name, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
			TaskQueueType: q.kind, ReportStats: true,
		})
		if err != nil {
			return problem(http.StatusServiceUnavailable, "unavailable", "temporal: "+err.Error())
		}
		st := resp.GetStats()
		view.Queues = append(view.Queues, QueueView{
			Queue: q.name, Kind: map[enumspb.TaskQueueType]string{enumspb.TASK_QUEUE_TYPE_ACTIVITY: "activity",
				enumspb.TASK_QUEUE_TYPE_WORKFLOW: "workflow"}[q.kind],
			Backlog: st.GetApproximateBacklogCount(), OldestWait: st.GetApproximateBacklogAge().AsDuration().Round(time.Millisecond).String(),
			AddRate: st.GetTasksAddRate(), Dispatch: st.GetTasksDispatchRate(), Pollers: len(resp.GetPollers()),
		})
	}
	for _, b := range []exam.Priority{exam.Urgent, exam.Normal, exam.Low} {
		resp, err := s.cfg.Temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
			Query: fmt.Sprintf("%s = '%s' AND %s = '%s' AND ExecutionStatus = 'Running'",
				exam.AttrState, lifecycle.Queued, exam.AttrPriority, b),
		})
		if err != nil {
			return problem(http.StatusServiceUnavailable, "unavailable", "temporal: "+err.Error())
		}
		view.QueuedExams[b] = resp.GetCount()
	}
	return c.JSON(http.StatusOK, view)
}
