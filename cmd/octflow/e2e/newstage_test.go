package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"

	"octflow/activities"
	"octflow/api/intake"
	"octflow/contract"
	"octflow/exam"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
)

// toyStage is a stage as a new file in activities/ declares one: its
// declaration and its activity. It runs on the CPU workers, reads what
// the measure stage stored, writes a note of its own beside it and names
// what wrote it.
func toyStage() activities.Stage {
	return activities.StageOf(exam.StageSpec{Stage: "toy", Activity: "WriteToyNote"},
		func(a *activities.Activities, ctx context.Context, in contract.StageInput) (contract.StageOutput, error) {
			ref := in.Exam.Ref()
			rc, n, err := a.Store.Get(ctx, exam.MeasurementsKey(ref))
			if err != nil {
				return contract.StageOutput{}, err
			}
			defer rc.Close()
			if _, err := io.Copy(io.Discard, rc); err != nil {
				return contract.StageOutput{}, err
			}
			note, _ := json.Marshal(map[string]any{"measurementsBytes": n})
			key := exam.ObjectKey(ref, "toy.json")
			if err := a.Store.Put(ctx, key, bytes.NewReader(note), int64(len(note)), "application/json"); err != nil {
				return contract.StageOutput{}, err
			}
			return contract.StageOutput{Keys: []string{key}, Node: a.Node, Algorithm: "toy-note/v1"}, nil
		})
}

// Adding a stage is a file of its own and its place in the pipeline's
// order (docs/development.md, "Adding a stage"): the toy stage, placed
// after measure, runs in that place on the embedded stack, on the CPU
// workers, for every exam, and shows in the exam's timeline as any
// stage does; the exam goes on to its report.
func TestAStageAddedToThePipelineRunsOnTheEmbeddedStack(t *testing.T) {
	shippedStages := activities.Pipeline()
	var stages []activities.Stage
	for _, s := range shippedStages {
		stages = append(stages, s)
		if s.Spec.Stage == exam.Measure {
			stages = append(stages, toyStage())
		}
	}
	h := newHarness(t, 1, func(c *devsystem.Config) { c.Stages = stages })
	ctx := context.Background()
	_, scan := phantomDICOM(t, small(61))
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "toy-1"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	final := h.waitTerminal("toy-1")
	if final.State != lifecycle.Completed || final.Report == nil {
		t.Fatalf("the exam ended %s: %+v", final.State, final.LastFailure)
	}
	note, err := h.store.ReadAll(ctx, exam.ObjectKey(h.ref("toy-1"), "toy.json"))
	var got struct{ MeasurementsBytes int64 }
	if err != nil || json.Unmarshal(note, &got) != nil || got.MeasurementsBytes < 100 {
		t.Fatalf("the toy stage's note: %q (%v); want the size of the measurements it read", note, err)
	}

	// The report names what computed the toy stage, as the stage said
	// (the report stage has no line for it), in the order the pipeline
	// it ran in put it: after measure.
	rep, _ := h.readReport(exam.ReportJSONKey(h.ref("toy-1")))
	if rep.Algorithms["toy"] != "toy-note/v1" || rep.Algorithms["measure"] == "" {
		t.Errorf("the report names %v, want the toy stage's algorithm beside the others", rep.Algorithms)
	}
	if want := []string{"denoise", "layers", "lesions", "measure", "toy"}; !slices.Equal(rep.AlgorithmOrder, want) {
		t.Errorf("the report lists the algorithms in the order %v, want the pipeline's %v", rep.AlgorithmOrder, want)
	}

	var events []lifecycle.Entry
	h.getJSON(h.sys.Secrets.Clinician, "/v1/exams/toy-1/events", http.StatusOK, &events)
	var order []exam.Stage
	for _, e := range events {
		if e.To == lifecycle.Executing {
			order = append(order, e.Stage)
		}
		if e.Stage == "toy" && e.To == lifecycle.Queued && e.Info["queue"] != exam.CPUQueue {
			t.Errorf("the toy stage was queued on %v, want the CPU workers' %s", e.Info["queue"], exam.CPUQueue)
		}
	}
	want := []exam.Stage{exam.Denoise, exam.Layers, exam.Lesions, exam.Measure, "toy", exam.Render, exam.Notify}
	if !slices.Equal(order, want) {
		t.Errorf("stages executed %v, want %v", order, want)
	}
	// The shipped pipeline is left as it was.
	if got, want := fmt.Sprint(activities.Pipeline().Specs().Stages()), fmt.Sprint(shippedStages.Specs().Stages()); got != want {
		t.Errorf("the shipped pipeline changed to %s", got)
	}
}
