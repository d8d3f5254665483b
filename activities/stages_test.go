package activities

import (
	"context"
	"slices"
	"testing"

	"octflow/contract"
	"octflow/exam"
)

// The shipped pipeline is one the workers and the workflows can run:
// every stage named once and run as an activity of its own, a GPU stage
// with the GPU memory a node reserves for it, a CPU stage with none, and
// the report and notify stages, which the pipeline and the review speak
// of, among them.
func TestThePipelineIsOneTheWorkflowsCanRun(t *testing.T) {
	var names []exam.Stage
	var activities []string
	for _, s := range Pipeline() {
		spec := s.Spec
		if s.activity == nil {
			t.Errorf("stage %s has no activity", spec.Stage)
		}
		if slices.Contains(names, spec.Stage) || slices.Contains(activities, spec.Activity) || spec.Stage == "" || spec.Activity == "" {
			t.Errorf("stage %q (activity %q) is unnamed or named twice", spec.Stage, spec.Activity)
		}
		names, activities = append(names, spec.Stage), append(activities, spec.Activity)
		if spec.GPU != (spec.GPUMemoryMiB > 0) {
			t.Errorf("stage %s: GPU %t with %d MiB of GPU memory", spec.Stage, spec.GPU, spec.GPUMemoryMiB)
		}
		if spec.Model != "" && !spec.GPU {
			t.Errorf("stage %s has a model setting but runs on the CPU workers", spec.Stage)
		}
	}
	for _, needed := range []exam.Stage{exam.Render, exam.Notify} {
		if !slices.Contains(names, needed) {
			t.Errorf("the pipeline %v has no %s stage", names, needed)
		}
	}
}

// A stage states the input its activity takes: the pipeline gives it
// by that statement, not by the stage's name.
func TestAStageStatesTheInputItsActivityTakes(t *testing.T) {
	spec := exam.StageSpec{Stage: "toy", Activity: "Toy"}
	cases := []struct {
		name  string
		stage Stage
		want  exam.InputKind
	}{
		{"the exam alone", StageOf(spec, func(*Activities, context.Context, contract.StageInput) (contract.StageOutput, error) {
			return contract.StageOutput{}, nil
		}), exam.ImageInput},
		{"a report's", StageOf(spec, func(*Activities, context.Context, contract.ReportInput) (contract.StageOutput, error) {
			return contract.StageOutput{}, nil
		}), exam.ReportInput},
		{"a notification's", StageOf(spec, func(*Activities, context.Context, contract.NotifyInput) (contract.StageOutput, error) {
			return contract.StageOutput{}, nil
		}), exam.NotifyInput},
		{"the report stage", StageOf(reportSpec(), (*Activities).RenderReport), exam.ReportInput},
		{"the notify stage", StageOf(notifySpec(), (*Activities).NotifyWorkstation), exam.NotifyInput},
		{"the denoise stage", StageOf(denoiseSpec(), (*Activities).Denoise), exam.ImageInput},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.stage.Spec.Input; got != c.want {
				t.Errorf("states %q, want %q", got, c.want)
			}
		})
	}
}
