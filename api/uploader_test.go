package api

import (
	"testing"

	"octflow/contract"
	"octflow/exam"
	"octflow/lifecycle"
)

// TestTheDevicesViewOfAnExamHidesWhatIsNotItsOwn: the device that sent
// an exam sees where it stands, not the report's summary, its review,
// the node that ran it, nor a failure's own words (a stage's or the PACS
// export's, which name nodes, stores and DICOM values); the clinician's
// view, which it is copied from, is left as it was.
func TestTheDevicesViewOfAnExamHidesWhatIsNotItsOwn(t *testing.T) {
	const stageWords = "open s3://octflow/exams/north/E-1/volume.nrrd: node gpu-7 lost"
	const exportWords = "PACS refused SOP Instance 1.2.826.0.1.3680043.10.1234.5: 0xA700"
	st := &ExamStatus{ExamID: "E-1", Campus: "north", Node: "gpu-7", Review: exam.ReviewStatus("pending"),
		LastFailure: &lifecycle.Failure{Stage: exam.Layers, Message: stageWords, Type: contract.ErrTypeNodeLost, Attempt: 2},
		Report:      &ReportInfo{JSONKey: "k.json", PDFKey: "k.pdf", Summary: &exam.Summary{Lesions: 2}},
		Export:      &ExportInfo{Status: contract.ExportStatus("failed"), Tries: 3, Failure: exportWords}}
	got := forUploader(st)
	switch {
	case got.Node != "":
		t.Errorf("node %q shown to the device", got.Node)
	case got.LastFailure == nil || got.LastFailure.Message == stageWords || got.LastFailure.Stage != exam.Layers ||
		got.LastFailure.Type != contract.ErrTypeNodeLost || got.LastFailure.Attempt != 2:
		t.Errorf("failure %+v: want its stage, type and attempt, not its words", got.LastFailure)
	case got.Export == nil || got.Export.Failure == exportWords || got.Export.Failure == "" || got.Export.Tries != 3:
		t.Errorf("export %+v: want its status and tries, and its failure's kind, not its words", got.Export)
	case got.Report == nil || got.Report.Summary != nil || got.Review != "":
		t.Errorf("report %+v, review %q: the clinicians' summary and review shown to the device", got.Report, got.Review)
	}
	if st.Node != "gpu-7" || st.LastFailure.Message != stageWords || st.Export.Failure != exportWords || st.Report.Summary == nil {
		t.Errorf("the clinician's view changed: %+v", st)
	}
}
