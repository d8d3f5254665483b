package api

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"

	"octflow/contract"
)

// fakeTemporal answers what the event streams and the status metrics ask
// of Temporal, and counts the calls. Any other call panics (its embedded
// Client is nil).
type fakeTemporal struct {
	client.Client
	// latency delays every call, to widen races in tests.
	latency time.Duration

	mu      sync.Mutex
	inboxes map[string][]contract.ReportReadyEvent // by campus
	queries map[string]int                         // inbox queries by campus
	calls   int                                    // every call
}

func newFakeTemporal() *fakeTemporal {
	return &fakeTemporal{inboxes: map[string][]contract.ReportReadyEvent{}, queries: map[string]int{}}
}

// publish adds report-ready events to campus's inbox, numbered on.
func (f *fakeTemporal) publish(campus string, examIDs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range examIDs {
		f.inboxes[campus] = append(f.inboxes[campus], contract.ReportReadyEvent{
			Seq: int64(len(f.inboxes[campus]) + 1), ExamID: id, Campus: campus})
	}
}

func (f *fakeTemporal) inboxQueries(campus string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queries[campus]
}

func (f *fakeTemporal) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeTemporal) call(ctx context.Context) error {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	select {
	case <-time.After(f.latency):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeTemporal) QueryWorkflow(ctx context.Context, workflowID, _ string, queryType string, args ...any) (converter.EncodedValue, error) {
	if err := f.call(ctx); err != nil {
		return nil, err
	}
	campus, ok := strings.CutPrefix(workflowID, "inbox-")
	if !ok || queryType != contract.InboxQuery {
		return nil, serviceerror.NewNotFound("no workflow " + workflowID)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries[campus]++
	events, ok := f.inboxes[campus]
	if !ok {
		return nil, serviceerror.NewNotFound("no inbox " + campus)
	}
	after := args[0].(int64)
	out := []contract.ReportReadyEvent{}
	for _, e := range events {
		if e.Seq > after {
			out = append(out, e)
		}
	}
	return jsonValue{out}, nil
}

func (f *fakeTemporal) CountWorkflow(ctx context.Context, _ *workflowservice.CountWorkflowExecutionsRequest) (*workflowservice.CountWorkflowExecutionsResponse, error) {
	if err := f.call(ctx); err != nil {
		return nil, err
	}
	return &workflowservice.CountWorkflowExecutionsResponse{}, nil
}

func (f *fakeTemporal) WorkflowService() workflowservice.WorkflowServiceClient {
	return fakeService{f: f}
}

// fakeService answers DescribeTaskQueue with an error (that part of a
// scrape is left out) after counting it. Any other call panics.
type fakeService struct {
	workflowservice.WorkflowServiceClient
	f *fakeTemporal
}

func (s fakeService) DescribeTaskQueue(ctx context.Context, _ *workflowservice.DescribeTaskQueueRequest, _ ...grpc.CallOption) (*workflowservice.DescribeTaskQueueResponse, error) {
	if err := s.f.call(ctx); err != nil {
		return nil, err
	}
	return nil, errors.New("no task queues here")
}

// jsonValue is a query's answer.
type jsonValue struct{ v any }

func (j jsonValue) HasValue() bool { return true }

func (j jsonValue) Get(ptr any) error {
	b, err := json.Marshal(j.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, ptr)
}
