package activities

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"octflow/contract"
	"octflow/exam"
)

// Stage is one stage of the pipeline as it runs: its declaration and
// its activity (StageOf). Each is made in a file of its own, which holds
// all of it.
type Stage struct {
	Spec exam.StageSpec
	// activity is the stage's activity function, run with a's parts.
	activity func(a *Activities) any
}

// StageOf is the stage spec declares, whose activity is run, run with
// the parts of the Activities it is registered with. Its input is its
// own: an image stage's contract.StageInput, the report's
// contract.ReportInput, the notify stage's contract.NotifyInput. StageOf
// states its kind in the spec (exam.StageSpec.Input), which the
// pipeline gives each stage by.
func StageOf[In contract.Input](spec exam.StageSpec, run func(a *Activities, ctx context.Context, in In) (contract.StageOutput, error)) Stage {
	spec.Input = contract.InputKindOf[In]()
	return Stage{Spec: spec, activity: func(a *Activities) any {
		return func(ctx context.Context, in In) (contract.StageOutput, error) { return run(a, ctx, in) }
	}}
}

// Pipeline is the exam pipeline, in the order ExamWorkflow runs it.
// Adding a stage is a file of its own and its place here (see
// docs/development.md, "Adding a stage").
func Pipeline() Stages {
	return Stages{
		StageOf(denoiseSpec(), (*Activities).Denoise),
		StageOf(layersSpec(), (*Activities).SegmentLayers),
		StageOf(lesionsSpec(), (*Activities).MarkLesions),
		StageOf(measureSpec(), (*Activities).Measure),
		StageOf(reportSpec(), (*Activities).RenderReport),
		StageOf(notifySpec(), (*Activities).NotifyWorkstation),
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
		r.RegisterActivityWithOptions(s.activity(a), activity.RegisterOptions{Name: s.Spec.Activity})
	}
}
