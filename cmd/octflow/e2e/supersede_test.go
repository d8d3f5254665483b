package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"octflow/activities"
	"octflow/api"
	"octflow/api/intake"
	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
	"octflow/octdicom"
	"octflow/octdicom/results"
	"octflow/report/reporttest"
)

// An admin supersedes a COMPLETED, exported exam's report (issue 41):
// the rerun runs every stage once more, its report replaces the first
// (kept under its run's keys) and says what it replaces and why, the
// first report's open review closes as superseded (its decision kept)
// and the new report's opens, and the new results reach the real
// Orthanc naming the first ones as their predecessors, with an IOCM
// rejection note of every object the first run sent. Bad input and a
// second supersede while one runs are refused and start nothing.
func TestASupersedingRerunReplacesTheReportEverywhere(t *testing.T) {
	plugin := needOrthanc(t)
	orthanc := startOrthanc(t, map[string]any{"Plugins": []string{plugin}, "DicomWeb": map[string]any{"Enable": true}}, nil)
	h := newHarness(t, 1, func(c *devsystem.Config) { c.PACSURL = orthanc.base + "/dicom-web" })
	ctx := context.Background()
	const id, study = "supersede-1", "2.25.4100"
	campus := "?campus=" + h.sys.Secrets.Campus
	admin, clin := h.sys.Secrets.Admin, h.sys.Secrets.Clinician
	ref := h.ref(id)

	var scan bytes.Buffer
	if err := octdicom.WriteDICOM(&scan, imaging.NewPhantom(small(410)).Volume, octdicom.Header{
		SOPInstanceUID: "2.25.4101", StudyInstanceUID: study, SeriesInstanceUID: "2.25.4102", PatientID: "SUPERSEDE-PATIENT"}); err != nil {
		t.Fatal(err)
	}
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: id, Priority: "normal"}, scan.Bytes()); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	st := h.waitFor(id, 3*time.Minute, func(s *api.ExamStatus) bool {
		return s.Export != nil && s.Export.Status != contract.ExportPending
	})
	if st.State != lifecycle.Completed || st.Export.Status != contract.ExportDelivered {
		t.Fatalf("first run: %s, export %+v", st.State, st.Export)
	}
	run1, review1 := h.runID(h.examWF(id)), h.runID(h.reviewWF(id))
	rep1, raw1 := h.readReport(exam.ReportJSONKey(ref))
	pdf1 := h.read(exam.ReportPDFKey(ref))
	if rep1.Run != run1 || rep1.Supersedes != nil {
		t.Fatalf("the first report is run %q's superseding %+v, want run %q's", rep1.Run, rep1.Supersedes, run1)
	}
	h.review(clin, id, "approve", "", http.StatusOK)

	// Refused, with nothing started: a plain rerun of a COMPLETED exam,
	// a supersede without a reason, a clinician's supersede.
	rerun := func(token, body string, status int, v any) {
		t.Helper()
		var r *strings.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		if r == nil {
			h.call(http.MethodPost, token, "/v1/exams/"+id+"/rerun"+campus, nil, status, v)
			return
		}
		h.call(http.MethodPost, token, "/v1/exams/"+id+"/rerun"+campus, r, status, v)
	}
	rerun(admin, "", http.StatusConflict, nil)
	rerun(admin, `{"supersede":true}`, http.StatusBadRequest, nil)
	rerun(clin, `{"supersede":true,"reason":"wrong eye"}`, http.StatusForbidden, nil)
	if n := h.executions(id); n != 1 {
		t.Fatalf("%d runs after refused reruns, want 1", n)
	}

	// The supersede; a second one while it runs is 409.
	const reason = "Layer fix 2.3.1: boundaries misplaced on this device"
	supersededAt := time.Now()
	var started api.ExamStatus
	rerun(admin, fmt.Sprintf(`{"supersede":true,"reason":%q}`, reason), http.StatusAccepted, &started)
	if started.State == lifecycle.Completed || started.Runs != 2 {
		t.Errorf("the supersede answered %s with %d runs, want the new run under way", started.State, started.Runs)
	}
	rerun(admin, `{"supersede":true,"reason":"again"}`, http.StatusConflict, nil)
	st = h.waitFor(id, 3*time.Minute, func(s *api.ExamStatus) bool {
		return s.Runs == 2 && s.State.Terminal() && s.Export != nil && s.Export.DeliveredAt != nil && s.Export.DeliveredAt.After(supersededAt) &&
			s.Review == exam.ReviewPending // the new report's review, once the first closed
	})
	run2 := h.runID(h.examWF(id))
	if st.State != lifecycle.Completed || run2 == run1 || h.executions(id) != 2 {
		t.Fatalf("after the supersede: %s, run %s (first %s), %d runs", st.State, run2, run1, h.executions(id))
	}

	// Each run ran each stage once: one report per run, no refusal.
	for _, run := range []string{run1, run2} {
		done := h.completedActivities(h.examWF(id), run)
		for _, spec := range activities.Pipeline().Specs() {
			if done[spec.Activity] != 1 {
				t.Errorf("run %s completed %s %d times, want once", run, spec.Activity, done[spec.Activity])
			}
		}
	}

	// The exam's status and report are the new run's; the first report
	// is kept under its run's keys.
	rep2, _ := h.readReport(exam.ReportJSONKey(ref))
	if rep2.Run != run2 || rep2.Supersedes == nil || rep2.Supersedes.Run != run1 || rep2.Supersedes.Reason != reason ||
		!rep2.Supersedes.GeneratedAt.Equal(rep1.GeneratedAt) {
		t.Errorf("the report is run %q's superseding %+v, want run %q's superseding %q", rep2.Run, rep2.Supersedes, run2, run1)
	}
	if st.Report == nil || st.Report.JSONKey != exam.ReportJSONKey(ref) {
		t.Errorf("the exam's status points at report %+v", st.Report)
	}
	var served json.RawMessage
	h.getJSON(clin, "/v1/exams/"+id+"/report?format=json", http.StatusOK, &served)
	if !bytes.Contains(served, []byte(run2)) || !bytes.Contains(served, []byte(`"supersedes"`)) {
		t.Errorf("the gateway serves a report that is not the new one: %.200s", served)
	}
	if text := strings.Join(strings.Fields(reporttest.PDFText(t, h.read(exam.ReportPDFKey(ref)))), " "); !strings.Contains(text,
		"Replaces the report of "+rep1.GeneratedAt.UTC().Format(time.RFC3339)+": "+reason) {
		t.Errorf("the new PDF does not say what it replaces:\n%s", text)
	}
	if !bytes.Equal(h.read(exam.RunReportJSONKey(ref, run1)), raw1) || !bytes.Equal(h.read(exam.RunReportPDFKey(ref, run1)), pdf1) {
		t.Error("the first report is not kept under its run's keys")
	}

	// The first report's review is closed, as superseded, its approval
	// kept; the exam's review is the new report's, and takes decisions.
	desc, err := h.sys.App.Client().DescribeWorkflowExecution(ctx, h.reviewWF(id), review1)
	if err != nil {
		t.Fatal(err)
	}
	if s := desc.GetWorkflowExecutionInfo().GetStatus(); s != enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
		t.Errorf("the first report's review is %s, want closed (continued as the new report's)", s)
	}
	var kept contract.ReviewArchive
	if err := json.Unmarshal(h.read(exam.RunReviewKey(ref, run1)), &kept); err != nil {
		t.Fatal(err)
	}
	if kept.Status != exam.ReviewSuperseded || !kept.Closed || kept.SupersededBy != run2 || len(kept.Reviews) != 1 ||
		kept.Reviews[0].Decision != exam.Approve {
		t.Errorf("the first review was archived as %+v, want closed, superseded by %s, with its approval", kept, run2)
	}
	if st.Review != exam.ReviewPending {
		t.Errorf("the exam's review is %q, want the new report's, pending", st.Review)
	}
	if r := h.review(clin, id, "amend", "checked against the fix", http.StatusOK); r.Review != exam.ReviewAmended {
		t.Errorf("a decision on the new report: %+v", r)
	}

	// In the PACS: the new PDF and SR name the first ones as their
	// predecessors; the rejection note rejects every object the first
	// run sent.
	var sent struct {
		Runs []struct {
			Run     string              `json:"run"`
			Objects []results.Reference `json:"objects"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(h.read(exam.ExportsKey(ref)), &sent); err != nil {
		t.Fatal(err)
	}
	if len(sent.Runs) != 2 || sent.Runs[0].Run != run1 || sent.Runs[1].Run != run2 {
		t.Fatalf("exports.json records %+v, want the two runs in order", sent.Runs)
	}
	byKind := func(refs []results.Reference) map[string]results.Reference {
		m := map[string]results.Reference{}
		for _, r := range refs {
			m[r.Kind] = r
		}
		return m
	}
	first, second := byKind(sent.Runs[0].Objects), byKind(sent.Runs[1].Objects)
	var firstUIDs []string
	for _, r := range sent.Runs[0].Objects {
		firstUIDs = append(firstUIDs, r.SOPInstanceUID)
	}
	slices.Sort(firstUIDs)
	if len(firstUIDs) < 2 || len(sent.Runs[1].Objects) != len(firstUIDs)+1 {
		t.Fatalf("the first run sent %d objects, the second %d, want one more (the rejection note)", len(firstUIDs), len(sent.Runs[1].Objects))
	}
	modalities := map[string]int{}
	var ids []string
	orthanc.call(http.MethodPost, "/tools/find", strings.NewReader(fmt.Sprintf(`{"Level":"Instance","Query":{"StudyInstanceUID":%q}}`, study)), &ids)
	for _, oid := range ids {
		var tags map[string]any
		orthanc.call(http.MethodGet, "/instances/"+oid+"/simplified-tags", nil, &tags)
		modalities[fmt.Sprint(tags["Modality"])]++
	}
	if modalities["DOC"] != 2 || modalities["SR"] != 2 || modalities["KO"] != 1 {
		t.Errorf("Orthanc holds %v in the study, want both runs' PDF and SR and one rejection note", modalities)
	}
	tagsOf := func(sop string) map[string]any {
		t.Helper()
		var found []string
		orthanc.call(http.MethodPost, "/tools/find", strings.NewReader(fmt.Sprintf(`{"Level":"Instance","Query":{"SOPInstanceUID":%q}}`, sop)), &found)
		if len(found) != 1 {
			t.Fatalf("Orthanc holds %d instances %s, want one", len(found), sop)
		}
		var tags map[string]any
		orthanc.call(http.MethodGet, "/instances/"+found[0]+"/simplified-tags", nil, &tags)
		return tags
	}
	for _, kind := range []string{results.KindPDF, results.KindMacularGridSR} {
		old, cur := first[kind], second[kind]
		if old.SOPInstanceUID == "" || cur.SOPInstanceUID == "" || old.SOPInstanceUID == cur.SOPInstanceUID {
			t.Errorf("%s: first %s, second %s; want two instances", kind, old.SOPInstanceUID, cur.SOPInstanceUID)
			continue
		}
		if got := referenced(tagsOf(cur.SOPInstanceUID)["PredecessorDocumentsSequence"]); !slices.Equal(got, []string{old.SOPInstanceUID}) {
			t.Errorf("the new %s names predecessors %v, want the first run's %s", kind, got, old.SOPInstanceUID)
		}
	}
	kos := tagsOf(second[results.KindRejection].SOPInstanceUID)
	if got := referenced(kos["CurrentRequestedProcedureEvidenceSequence"]); !slices.Equal(got, firstUIDs) {
		t.Errorf("the rejection note rejects %v, want every object of the first run %v", got, firstUIDs)
	}
	if title := fmt.Sprint(kos["ConceptNameCodeSequence"]); !strings.Contains(title, "113001") {
		t.Errorf("the rejection note's title is %s, want (113001, DCM, Rejected for Quality Reasons)", title)
	}
}

// referenced lists the Referenced SOP Instance UIDs under a
// hierarchical reference sequence (study, series, SOP) as Orthanc's
// simplified tags give it, sorted.
func referenced(seq any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			if uid, ok := v["ReferencedSOPInstanceUID"].(string); ok {
				out = append(out, uid)
			}
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(seq)
	slices.Sort(out)
	return out
}

// completedActivities counts a run's completed activities by type.
func (h *harness) completedActivities(workflowID, runID string) map[string]int {
	h.t.Helper()
	it := h.sys.App.Client().GetWorkflowHistory(context.Background(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	scheduled, done := map[int64]string{}, map[string]int{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			h.t.Fatal(err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled[ev.GetEventId()] = a.GetActivityType().GetName()
		}
		if c := ev.GetActivityTaskCompletedEventAttributes(); c != nil {
			done[scheduled[c.GetScheduledEventId()]]++
		}
	}
	return done
}
