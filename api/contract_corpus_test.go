package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap/zapcore"

	"octflow/api"
	"octflow/api/apitest"
	"octflow/api/auth"
	"octflow/api/intake"
	"octflow/audit"
	"octflow/codec"
	"octflow/contract"
	"octflow/exam"
	"octflow/lifecycle"
)

// Every exam of the replay corpus (workflows/testdata), served by a
// Temporal stand-in that answers with its recorded history: the status
// and the timeline the real handlers fold from it, as a client reads
// them, are what api/openapi.yaml says.
func TestRecordedExamsAnswerAsTheContractSays(t *testing.T) {
	const corpus = "../workflows/testdata/"
	sealer, err := codec.Open(corpus + "codec-keys.json")
	if err != nil {
		t.Fatal(err)
	}
	dc, fc := codec.Converters(sealer)
	files, err := filepath.Glob(corpus + "exam_*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded exam in %s (%v)", corpus, err)
	}
	sender, err := dc.ToPayload("oct-1")
	if err != nil {
		t.Fatal(err)
	}
	tc := &corpusTemporal{runs: map[string][]*historypb.HistoryEvent{},
		memo: &commonpb.Memo{Fields: map[string]*commonpb.Payload{contract.MemoDeviceID: sender}}}
	var latest []string // the run of each file
	for _, f := range files {
		events := readHistory(t, f)
		id := events[0].GetWorkflowExecutionStartedEventAttributes().GetOriginalExecutionRunId()
		tc.runs[id] = events
		latest = append(latest, id)
	}
	tokens, err := auth.NewTokens([]auth.TokenEntry{
		{SHA256: auth.HashToken("clin"), Principal: auth.Principal{Name: "c", Role: auth.RoleClinician, Campus: "north"}},
		{SHA256: auth.HashToken("sender"), Principal: auth.Principal{Name: "s", Role: auth.RoleDevice, DeviceID: "oct-1", Campus: "north"}},
		{SHA256: auth.HashToken("other"), Principal: auth.Principal{Name: "o", Role: auth.RoleDevice, DeviceID: "oct-2", Campus: "north"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := api.New(api.Config{
		Temporal: tc, Tokens: tokens, Policy: exam.DefaultPolicy(), Converters: lifecycle.Converters{Data: dc, Failure: fc},
		Pseudonymizer: intake.NewPseudonymizer([]byte("0123456789abcdef")),
		AuditTrail:    audit.NewLogSink(zapcore.AddSync(io.Discard), audit.Source{ID: "api"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()

	// How many recorded exams show the clinician a failure's words and a
	// node: what the devices' view is checked to hide.
	var withFailure, withNode int
	defer func() {
		if withFailure == 0 || withNode == 0 {
			t.Errorf("the corpus shows a failure's message in %d exams and a node in %d: the device's view of them is untested", withFailure, withNode)
		}
	}()
	reviews := []string{""}
	if more, _ := filepath.Glob(corpus + "review_*.json"); len(more) > 0 {
		reviews = append(reviews, more...)
	}
	for i, f := range files {
		for _, review := range reviews {
			name := filepath.Base(f)
			if review != "" {
				if events := tc.runs[latest[i]]; events[len(events)-1].GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED {
					continue // only a completed exam has a review
				}
				name += "+" + filepath.Base(review)
			}
			t.Run(name, func(t *testing.T) {
				tc.set(latest[i], review, t)
				client := apitest.Client(t, srv.Client())
				var clinicians map[string]any // the clinician's view of the exam
				for _, path := range []string{"/v1/exams/E-1", "/v1/exams/E-1/events"} {
					req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
					req.Header.Set("Authorization", "Bearer clin")
					resp, err := client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
					}
					if path == "/v1/exams/E-1" {
						_ = json.Unmarshal(b, &clinicians)
					}
				}
				if f, ok := clinicians["lastFailure"].(map[string]any); ok && f["message"] != "" {
					withFailure++
				}
				if clinicians["node"] != nil {
					withNode++
				}
				// The device that sent the exam sees where it stands, not
				// what it found; another device of the campus, nothing.
				for _, d := range []struct {
					token  string
					status int
				}{{"sender", http.StatusOK}, {"other", http.StatusNotFound}} {
					req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/exams/E-1", nil)
					req.Header.Set("Authorization", "Bearer "+d.token)
					resp, err := client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					var st map[string]any
					_ = json.NewDecoder(resp.Body).Decode(&st)
					resp.Body.Close()
					if resp.StatusCode != d.status {
						t.Errorf("device %s reads the exam: %d, want %d", d.token, resp.StatusCode, d.status)
					}
					if rep, ok := st["report"].(map[string]any); ok && rep["summary"] != nil {
						t.Errorf("device %s sees the report's clinical summary: %v", d.token, rep["summary"])
					}
					if _, ok := st["review"]; ok {
						t.Errorf("device %s sees the review: %v", d.token, st["review"])
					}
					// Nor which node ran it, nor a failure's own words.
					if _, ok := st["node"]; ok {
						t.Errorf("device %s sees the node: %v", d.token, st["node"])
					}
					if f, ok := st["lastFailure"].(map[string]any); ok {
						if cf, _ := clinicians["lastFailure"].(map[string]any); cf == nil || f["message"] == cf["message"] {
							t.Errorf("device %s reads the failure's own words %q", d.token, f["message"])
						}
					}
					if e, ok := st["export"].(map[string]any); ok && e["failure"] != nil {
						if ce, _ := clinicians["export"].(map[string]any); ce == nil || e["failure"] == ce["failure"] {
							t.Errorf("device %s reads the export failure's own words %q", d.token, e["failure"])
						}
					}
				}
			})
		}
	}
}

func readHistory(t *testing.T, path string) []*historypb.HistoryEvent {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return h.GetEvents()
}

// corpusTemporal answers for one recorded exam at a time: every exam
// workflow ID is that exam, whose runs (a rerun names the one before)
// and review come from the corpus.
type corpusTemporal struct {
	client.Client
	runs map[string][]*historypb.HistoryEvent // by run ID
	// memo is every exam's start memo: sent by device oct-1.
	memo *commonpb.Memo

	mu     sync.Mutex
	latest string
	review []*historypb.HistoryEvent
}

func (c *corpusTemporal) set(latest, review string, t *testing.T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.latest, c.review = latest, nil
	if review != "" {
		c.review = readHistory(t, review)
	}
}

func (c *corpusTemporal) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !strings.HasPrefix(id, "exam/") {
		return nil, serviceerror.NewNotFound("no workflow " + id)
	}
	status := enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	events := c.runs[c.latest]
	switch events[len(events)-1].GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
		status = enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
		status = enumspb.WORKFLOW_EXECUTION_STATUS_FAILED
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: c.latest}, Status: status, Memo: c.memo}}, nil
}

func (c *corpusTemporal) GetWorkflowHistory(_ context.Context, id, runID string, _ bool, _ enumspb.HistoryEventFilterType) client.HistoryEventIterator {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case strings.HasPrefix(id, "exam/") && c.runs[runID] != nil:
		return &events{list: c.runs[runID]}
	case strings.HasPrefix(id, "review/") && c.review != nil:
		return &events{list: c.review}
	}
	return &events{err: serviceerror.NewNotFound("no workflow " + id)}
}

// events is a history's iterator.
type events struct {
	list []*historypb.HistoryEvent
	err  error
}

func (e *events) HasNext() bool { return e.err != nil || len(e.list) > 0 }

func (e *events) Next() (*historypb.HistoryEvent, error) {
	if e.err != nil {
		err := e.err
		e.err = nil
		return nil, err
	}
	ev := e.list[0]
	e.list = e.list[1:]
	return ev, nil
}
