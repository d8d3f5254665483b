package activities

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"octflow/contract"
	"octflow/exam"
)

// Stage is one stage of the pipeline as it runs: its declaration and
// its activity. Each is made in a file of its own, which holds all of it.
type Stage struct {
	Spec exam.StageSpec
	// Run is the stage's activity, run with a's parts.
	Run func(a *Activities, ctx context.Context, in contract.StageInput) (contract.StageOutput, error)
}

// Pipeline is the exam pipeline, in the order ExamWorkflow runs it.
// Adding a stage is a file of its own and its place here (see
// docs/development.md, "Adding a stage").
func Pipeline() Stages {
	return Stages{
		{denoiseSpec(), (*Activities).Denoise},
		{layersSpec(), (*Activities).SegmentLayers},
		{lesionsSpec(), (*Activities).MarkLesions},
		{measureSpec(), (*Activities).Measure},
		{reportSpec(), (*Activities).RenderReport},
		{notifySpec(), (*Activities).NotifyWorkstation},
	}
}

// Stages are a pipeline's stages, in their order.
type Stages []Stage

// Specs are the stages' declarations, in their order: what the
// workflows, the GPU nodes and the configuration are handed.
func (stages Stages) Specs() exam.Pipeline {
	out := make(exam.Pipeline, len(stages))
	for i, s := range stages {
		out[i] = s.Spec
	}
	return out
}

// RegisterStages registers on r each of stages that runs on a GPU node
// (gpu) or on the CPU workers (!gpu), under its activity type, run with
// a.
func RegisterStages(r worker.ActivityRegistry, a *Activities, stages Stages, gpu bool) {
	for _, s := range stages {
		if s.Spec.GPU != gpu {
			continue
		}
		run := s.Run
		r.RegisterActivityWithOptions(func(ctx context.Context, in contract.StageInput) (contract.StageOutput, error) {
			return run(a, ctx, in)
		}, activity.RegisterOptions{Name: s.Spec.Activity})
	}
}
