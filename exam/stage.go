package exam

import "context"

// Stage is one step of the exam pipeline.
type Stage string

// The pipeline, in order.
const (
	Denoise Stage = "denoise"
	Layers  Stage = "layers"
	Lesions Stage = "lesions"
	Measure Stage = "measure"
	Render  Stage = "report"
	Notify  Stage = "notify"
)

// Pipeline lists the stages in the order ExamWorkflow runs them.
var Pipeline = []Stage{Denoise, Layers, Lesions, Measure, Render, Notify}

// NeedsGPU reports whether the stage runs on a GPU node.
func (s Stage) NeedsGPU() bool {
	switch s {
	case Denoise, Layers, Lesions, Measure:
		return true
	}
	return false
}

// Queue is the task queue the stage's activity is scheduled on.
func (s Stage) Queue() string {
	if s.NeedsGPU() {
		return GPUQueue
	}
	return CPUQueue
}

// NodeQueue is the task queue of one GPU node: the later GPU stages of
// an exam whose first stage ran on that node are scheduled there, so they
// find its output in the node's local cache.
func NodeQueue(node string) string { return GPUQueue + "-node-" + node }

// ActivityName is the registered Temporal activity type of the stage.
func (s Stage) ActivityName() string {
	switch s {
	case Denoise:
		return "Denoise"
	case Layers:
		return "SegmentLayers"
	case Lesions:
		return "MarkLesions"
	case Measure:
		return "Measure"
	case Render:
		return "RenderReport"
	case Notify:
		return "NotifyWorkstation"
	}
	return ""
}

// StageOfActivity maps an activity type back to its stage ("" if none).
func StageOfActivity(name string) Stage {
	for _, s := range Pipeline {
		if s.ActivityName() == name {
			return s
		}
	}
	return ""
}

type gpuKey struct{}

// WithGPU records in ctx the index of the GPU a stage was granted.
func WithGPU(ctx context.Context, index int) context.Context {
	return context.WithValue(ctx, gpuKey{}, index)
}

// GPUFrom returns the GPU index a stage was granted, if it runs on one.
func GPUFrom(ctx context.Context) (int, bool) {
	i, ok := ctx.Value(gpuKey{}).(int)
	return i, ok
}
