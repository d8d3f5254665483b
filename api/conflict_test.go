package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"octflow/api/auth"
	"octflow/api/intake"
	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
	"octflow/octdicom"
	"octflow/storage/storagetest"
)

// conflictTemporal knows one exam (or none) and its scan's digest. Any
// call but a description panics (its embedded Client is nil), which the
// gateway answers 500: a start, a query, a listing never happen here.
type conflictTemporal struct {
	client.Client
	known  string // the workflow ID Temporal knows, "" for none
	digest string
}

func (f *conflictTemporal) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if id != f.known {
		return nil, serviceerror.NewNotFound("no workflow " + id)
	}
	p, err := converter.GetDefaultDataConverter().ToPayload(f.digest)
	if err != nil {
		return nil, err
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "run-1"},
		Memo:      &commonpb.Memo{Fields: map[string]*commonpb.Payload{contract.MemoScanDigest: p}},
	}}, nil
}

// A device that sends another scan under an exam ID its campus already
// used is answered 409 exam-conflict, whether Temporal still knows the
// exam or only the exam's own record does (its retention passed), and
// nothing is stored or started for it.
func TestAnotherScanUnderATakenExamIDIs409(t *testing.T) {
	var scan bytes.Buffer
	p := imaging.NewPhantom(imaging.PhantomOptions{Seed: 1, Frames: 3, Rows: 64, Cols: 16})
	if err := octdicom.WriteDICOM(&scan, p.Volume, octdicom.Header{SOPInstanceUID: "1.2"}); err != nil {
		t.Fatal(err)
	}
	const examID = "E-1"
	pseudonyms := intake.NewPseudonymizer([]byte("0123456789abcdef"))
	ref := pseudonyms.ExamRef("north", examID)
	const otherDigest = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
	record, _ := json.Marshal(exam.Record{Exam: ref, ScanDigest: otherDigest, Priority: exam.Low})
	cases := []struct {
		name     string
		temporal *conflictTemporal
		objects  map[string][]byte
	}{
		{"Temporal knows the exam", &conflictTemporal{known: contract.ExamWorkflowID(ref), digest: otherDigest}, nil},
		{"only the exam's record does", &conflictTemporal{}, map[string][]byte{exam.RecordKey(ref): record}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store := storagetest.NewMemory(c.objects)
			tokens, err := auth.NewTokens([]auth.TokenEntry{{SHA256: auth.HashToken("dev"), Principal: auth.Principal{Name: "d", Role: auth.RoleDevice, DeviceID: "oct-1", Campus: "north"}}})
			if err != nil {
				t.Fatal(err)
			}
			srv := newServer(t, Config{Tokens: tokens, Pseudonymizer: pseudonyms,
				SpoolDir: t.TempDir(), MaxScanBytes: 32 << 20, Temporal: c.temporal, Store: store})

			contentType, body := Multipart(intake.Meta{ExamID: examID, Priority: "low"}, scan.Bytes())
			req := httptest.NewRequest(http.MethodPost, "/v1/exams", body)
			req.Header.Set("Content-Type", contentType)
			req.Header.Set("Authorization", "Bearer dev")
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)

			var prob struct {
				Type   string `json:"type"`
				ExamID string `json:"examId"`
			}
			_ = json.Unmarshal(rec.Body.Bytes(), &prob)
			if rec.Code != http.StatusConflict || !strings.HasSuffix(prob.Type, "exam-conflict") || prob.ExamID != ref.ID {
				t.Fatalf("answered %d %s, want 409 exam-conflict naming %s", rec.Code, rec.Body, ref.ID)
			}
			if puts := store.Puts(); len(puts) != 0 {
				t.Errorf("a conflicting scan stored %v", puts)
			}
		})
	}
}
