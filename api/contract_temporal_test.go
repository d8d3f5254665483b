package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"octflow/api"
	"octflow/api/apitest"
	"octflow/api/auth"
	"octflow/api/intake"
	"octflow/audit"
	"octflow/contract"
	"octflow/exam"
)

// The gateway's answers built from what Temporal says (the fleet, the
// task queues, a campus's inbox, an exam it does not know), as the
// handlers really render them, held to api/openapi.yaml.
func TestGatewayAnswersFromTemporalAsItsContractSays(t *testing.T) {
	tokens, err := auth.NewTokens([]auth.TokenEntry{
		{SHA256: auth.HashToken("admin"), Principal: auth.Principal{Name: "a", Role: auth.RoleAdmin}},
		{SHA256: auth.HashToken("clin"), Principal: auth.Principal{Name: "c", Role: auth.RoleClinician, Campus: "north"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	store := &stubStore{}
	gw, err := api.New(api.Config{
		Temporal: stubTemporal{}, Store: store, Tokens: tokens, Policy: exam.DefaultPolicy(),
		Pseudonymizer: intake.NewPseudonymizer([]byte("0123456789abcdef")),
		AuditTrail:    audit.NewLogSink(zapcore.AddSync(io.Discard), audit.Source{ID: "api"}),
		NotifyPoll:    10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	client := apitest.Client(t, srv.Client())

	get := func(path, token string, want int) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
		return resp
	}
	drain := func(resp *http.Response) {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	drain(get("/readyz", "", 200))
	store.down.Store(true)
	drain(get("/readyz", "", 503))
	drain(get("/v1/nodes", "admin", 200))
	drain(get("/v1/queues", "admin", 200))
	drain(get("/v1/exams/E-404?campus=north", "admin", 404))
	drain(get("/v1/exams/E-404", "admin", 400)) // an admin names the campus
	drain(get("/v1/exams/E-404/events", "clin", 404))
	drain(get("/v1/exams/E-404/report?format=json", "clin", 404))
	drain(get("/v1/notifications?campus=south", "clin", 404))

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/nodes/gpu-1/breaker/reset", nil)
	req.Header.Set("Authorization", "Bearer admin")
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Errorf("breaker reset: %v %v", resp.StatusCode, err)
	}
	drain(resp)
	req, _ = http.NewRequest(http.MethodPost, srv.URL+"/v1/nodes/gpu-nowhere/breaker/reset", nil)
	req.Header.Set("Authorization", "Bearer admin")
	resp, err = client.Do(req)
	if err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("breaker reset of an unknown node: %v %v", resp.StatusCode, err)
	}
	drain(resp)

	// The event stream: its two events are read, and checked, as they come.
	resp = get("/v1/notifications?campus=north", "clin", 200)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for seen := 0; seen < 2 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data:") {
			seen++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// stubTemporal answers as a Temporal with one campus inbox, a fleet of
// two nodes and no exam. Any other call panics (its Client is nil).
type stubTemporal struct{ client.Client }

func (stubTemporal) CheckHealth(context.Context, *client.CheckHealthRequest) (*client.CheckHealthResponse, error) {
	return &client.CheckHealthResponse{}, nil
}

func (stubTemporal) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return nil, serviceerror.NewNotFound("no workflow " + id)
}

func (stubTemporal) QueryWorkflow(_ context.Context, id, _ string, query string, args ...any) (converter.EncodedValue, error) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	switch {
	case id == contract.FleetWorkflowID && query == contract.FleetQuery:
		return jsonValue{[]contract.FleetNode{
			{Report: contract.NodeReport{NodeID: "gpu-1", TaskQueue: "gpu-1", Interval: time.Hour, InFlight: 1,
				GPUs:    []exam.GPU{{Index: 0, UUID: "GPU-0", Model: "sim", MemoryTotalMiB: 1024, MemoryFreeMiB: 512, Healthy: true, Simulated: true}},
				Breaker: exam.BreakerStatus{State: exam.BreakerOpen, FailureRate: 0.5, Samples: 4, OpenedAt: &at, Trips: 1}},
				LastSeen: time.Now()},
			{Report: contract.NodeReport{NodeID: "gpu-2", TaskQueue: "gpu-2", Interval: time.Second,
				Breaker: exam.BreakerStatus{State: exam.BreakerClosed}}, LastSeen: at},
		}}, nil
	case id == contract.InboxWorkflowID("north") && query == contract.InboxQuery:
		csf := 250.5
		events := []contract.ReportReadyEvent{
			{Seq: 1, At: at, ExamID: "ex-0123456789abcdef01234567", Campus: "north", Priority: exam.Urgent, Eye: exam.RightEye,
				Summary: exam.Summary{ScanType: "cube", Gradable: "full", CentralSubfieldThicknessUm: &csf, Lesions: 2}},
			{Seq: 2, At: at, ExamID: "ex-89abcdef0123456789abcdef", Campus: "north", Priority: exam.Normal, Reminder: 1,
				Summary: exam.Summary{ScanType: "line", Gradable: "ungradable", NotMeasurable: true, Withheld: []string{"lesions"}, LesionsWithheld: true}},
		}
		var out []contract.ReportReadyEvent
		for _, e := range events {
			if e.Seq > args[0].(int64) {
				out = append(out, e)
			}
		}
		return jsonValue{out}, nil
	}
	return nil, serviceerror.NewNotFound("no workflow " + id)
}

func (stubTemporal) UpdateWorkflow(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	if o.WorkflowID != contract.FleetWorkflowID || o.UpdateName != contract.ResetBreakerUpdate {
		return nil, serviceerror.NewNotFound("no workflow " + o.WorkflowID)
	}
	if o.Args[0] != "gpu-1" {
		return updateHandle{err: temporal.NewApplicationError("no such node", "unknown-node")}, nil
	}
	return updateHandle{gen: 3}, nil
}

func (stubTemporal) CountWorkflow(context.Context, *workflowservice.CountWorkflowExecutionsRequest) (*workflowservice.CountWorkflowExecutionsResponse, error) {
	return &workflowservice.CountWorkflowExecutionsResponse{Count: 2}, nil
}

func (stubTemporal) WorkflowService() workflowservice.WorkflowServiceClient { return stubService{} }

type stubService struct {
	workflowservice.WorkflowServiceClient
}

func (stubService) DescribeTaskQueue(context.Context, *workflowservice.DescribeTaskQueueRequest, ...grpc.CallOption) (*workflowservice.DescribeTaskQueueResponse, error) {
	return &workflowservice.DescribeTaskQueueResponse{Stats: &taskqueuepb.TaskQueueStats{
		ApproximateBacklogCount: 3, ApproximateBacklogAge: durationpb.New(1500 * time.Millisecond),
		TasksAddRate: 1.5, TasksDispatchRate: 1.25}}, nil
}

type updateHandle struct {
	client.WorkflowUpdateHandle
	gen int
	err error
}

func (h updateHandle) Get(_ context.Context, ptr any) error {
	if h.err != nil {
		return h.err
	}
	*ptr.(*int) = h.gen
	return nil
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

// stubStore is an object store that holds nothing and answers Ping
// until it is down.
type stubStore struct{ down atomic.Bool }

func (s *stubStore) Put(context.Context, string, io.Reader, int64, string) error {
	return errors.New("read-only")
}
func (s *stubStore) Get(context.Context, string) (io.ReadCloser, int64, error) {
	return nil, 0, errors.New("empty")
}
func (s *stubStore) Exists(context.Context, string) (bool, error) { return false, nil }
func (s *stubStore) Delete(context.Context, string) error         { return nil }
func (s *stubStore) Ping(context.Context) error {
	if s.down.Load() {
		return errors.New("down")
	}
	return nil
}
