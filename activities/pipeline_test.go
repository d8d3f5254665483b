package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
	"octflow/inference"
	"octflow/inference/inferencetest"
	"octflow/octdicom"
	"octflow/report"
	"octflow/storage/storagetest"
)

// pipelinePhantom is the scan the pipeline tests run: small, with fluid
// and drusen.
func pipelinePhantom() *imaging.Phantom {
	return imaging.NewPhantom(imaging.PhantomOptions{Seed: 3, Frames: 5, Rows: 248, Cols: 128, Fluid: true, Drusen: true})
}

// runStages stores the phantom's scan as the gateway would and runs
// every stage of the pipeline but notify on a, in order, one activity
// call each, passing on what the exam workflow passes on: the summary
// and what computed each stage. It returns each stage's output, the
// report stage's input and the exam.
func runStages(t *testing.T, a *Activities) (map[exam.Stage]contract.StageOutput, contract.ReportInput, exam.Submission) {
	t.Helper()
	ref := exam.Ref{Campus: "north", ID: "E1"}
	sub := exam.Submission{ExamID: ref.ID, Campus: ref.Campus, Priority: exam.Normal, ScanKey: exam.ScanKey(ref, "abcdef0123456789"),
		ScanDigest: "abcdef0123456789"}
	var scan bytes.Buffer
	if err := octdicom.WriteDICOM(&scan, pipelinePhantom().Volume, octdicom.Header{SOPInstanceUID: "2.25.1"}); err != nil {
		t.Fatal(err)
	}
	a.Store = storagetest.NewMemory(map[string][]byte{sub.ScanKey: scan.Bytes()})
	a.HeartbeatEvery, a.QuietStart = time.Second, -1
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	RegisterStages(env, a, Pipeline(), true)
	RegisterStages(env, a, Pipeline(), false)
	outs := map[exam.Stage]contract.StageOutput{}
	report := contract.ReportInput{Exam: sub, Algorithms: map[exam.Stage]string{}}
	for _, spec := range Pipeline().Specs() {
		var in any = contract.StageInput{Exam: sub}
		switch spec.Stage {
		case exam.Render:
			in = report
		case exam.Notify:
			continue
		}
		v, err := env.ExecuteActivity(spec.Activity, in)
		if err != nil {
			t.Fatalf("%s: %v", spec.Stage, err)
		}
		var out contract.StageOutput
		if err := v.Get(&out); err != nil {
			t.Fatal(err)
		}
		outs[spec.Stage] = out
		if out.Summary != nil {
			report.Summary = *out.Summary
		}
		if out.Algorithm != "" {
			report.Algorithms[spec.Stage] = out.Algorithm
		}
	}
	return outs, report, sub
}

// Each image stage names what computed it in its output, and the report
// records what the stages named, whatever they are: a stage added to the
// pipeline needs no line in the report stage. The report counts its
// lesions against the quality gate's verdict the measure stage stored,
// as the gate gives it, and adds them to the measure stage's summary.
func TestTheReportRecordsWhatTheStagesSaidOfThemselves(t *testing.T) {
	a := &Activities{}
	outs, in, sub := runStages(t, a)
	want := map[exam.Stage]string{exam.Denoise: "nlm-log/v1", exam.Layers: "chiu-graph/v1", exam.Lesions: "fluid-drusen/v1",
		exam.Measure: "etdrs-layers/v1"}
	if !maps.Equal(in.Algorithms, want) {
		t.Errorf("the stages named %v, want %v", in.Algorithms, want)
	}
	var rep report.Report
	if err := a.getJSON(context.Background(), exam.ReportJSONKey(sub.Ref()), &rep); err != nil {
		t.Fatal(err)
	}
	if got := rep.Algorithms; len(got) != len(want) || got["denoise"] != want[exam.Denoise] || got["measure"] != want[exam.Measure] ||
		got["layers"] != want[exam.Layers] || got["lesions"] != want[exam.Lesions] {
		t.Errorf("the report records %v, want %v", got, want)
	}
	if got, order := rep.AlgorithmOrder, []string{"denoise", "layers", "lesions", "measure"}; !slices.Equal(got, order) {
		t.Errorf("the report orders the stages %q, want the pipeline's %q", got, order)
	}
	// The gate's verdict as the measure stage stored it is the gate's.
	v, layers, err := a.loadVolumeAndLayers(context.Background(), sub)
	if err != nil {
		t.Fatal(err)
	}
	var mf measurementsFile
	if err := a.getJSON(context.Background(), exam.MeasurementsKey(sub.Ref()), &mf); err != nil {
		t.Fatal(err)
	}
	gate := imaging.Assess(v, layers).Mask
	if got := unpackBits(mf.Graded, v.Frames*v.Cols); !slices.Equal(got, gate) || !slices.Contains(gate, true) {
		t.Errorf("measurements.json holds a verdict on %d A-scans unlike the gate's on %d (graded: %v)", len(got), len(gate),
			slices.Contains(gate, true))
	}
	// The report's summary is the measure stage's with its lesions.
	measured, reported := *outs[exam.Measure].Summary, *outs[exam.Render].Summary
	if len(rep.Lesions) == 0 || reported.Lesions != len(rep.Lesions) || reported.LesionFinding != rep.LesionFinding || rep.LesionFinding == "" {
		t.Errorf("the report's summary counts %d lesions (%q); the report %d (%q)", reported.Lesions, reported.LesionFinding,
			len(rep.Lesions), rep.LesionFinding)
	}
	reported.Lesions, reported.LesionFinding = measured.Lesions, measured.LesionFinding
	if a, b := mustJSON(t, reported), mustJSON(t, measured); a != b {
		t.Errorf("the report changed the measure stage's summary beyond its lesions:\n%s\n%s", a, b)
	}
	if out := outs[exam.Render]; out.ReportAt == nil || !out.ReportAt.Equal(rep.GeneratedAt) {
		t.Errorf("the report stage says it made the report at %v; the report says %v", out.ReportAt, rep.GeneratedAt)
	}
}

// Every stage declared with a model setting runs its served model when
// pointed at one, and names it in its output, so the report names it.
func TestEveryStageWithAModelSettingNamesTheModelItRan(t *testing.T) {
	like := pipelinePhantom().Volume
	ctx := context.Background()
	// What each served model computes: the input itself, the reference
	// segmentation, no lesion.
	models := map[exam.Stage]inferencetest.ModelFunc{
		exam.Denoise: func(v *imaging.Volume) ([]int, []float32) { return []int{v.Frames, v.Rows, v.Cols}, v.Data },
		exam.Layers: func(v *imaging.Volume) ([]int, []float32) {
			l, _ := imaging.SegmentLayers(ctx, v)
			var out []float32
			for _, n := range imaging.BoundaryNames {
				out = append(out, l.Boundaries[n]...)
			}
			return []int{len(imaging.BoundaryNames) + 1, v.Frames, v.Cols}, append(out, l.RPEBottom...)
		},
		exam.Lesions: func(v *imaging.Volume) ([]int, []float32) {
			return []int{v.Frames, v.Rows, v.Cols}, make([]float32, len(v.Data))
		},
	}
	a := &Activities{Common: Common{Models: map[exam.Stage]inference.Model{}}}
	for _, spec := range Pipeline().Specs() {
		if spec.Model == "" {
			continue
		}
		fn, ok := models[spec.Stage]
		if !ok {
			t.Fatalf("stage %s (OCTFLOW_MODEL_%s) has no test model here", spec.Stage, spec.Model)
		}
		a.Models[spec.Stage] = inference.Model{URL: inferencetest.Serve(t, like, fn, false)}
	}
	_, in, _ := runStages(t, a)
	for stage, m := range a.Models {
		if got := in.Algorithms[stage]; got != m.Name() || got != "kserve:"+m.URL {
			t.Errorf("stage %s pointed at a model names %q, want %q", stage, got, m.Name())
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The report lists what computed each stage in the order of the pipeline
// its worker runs, not the shipped one's.
func TestTheReportOrdersTheAlgorithmsByItsWorkersPipeline(t *testing.T) {
	shipped := Pipeline().Specs()
	toy := exam.StageSpec{Stage: "toy", Activity: "Toy", Input: exam.ImageInput}
	// The toy stage before measure: the shipped order would put it last.
	custom := append(append(append(exam.Pipeline{}, shipped[:3]...), toy), shipped[3:]...)
	said := map[exam.Stage]string{exam.Denoise: "d", exam.Layers: "l", exam.Lesions: "x", "toy": "t", exam.Measure: "m"}
	for _, c := range []struct {
		name     string
		pipeline exam.Pipeline
		want     []string
	}{
		{"the shipped pipeline (none given)", nil, []string{"denoise", "layers", "lesions", "measure"}},
		{"a pipeline with a stage before measure", custom, []string{"denoise", "layers", "lesions", "toy", "measure"}},
	} {
		if got := (&Activities{Pipeline: c.pipeline}).algorithmOrder(said); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
