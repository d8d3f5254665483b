package exam

import (
	"context"
	"strings"
)

// Stage is one step of the exam pipeline.
type Stage string

// The pipeline's stages.
const (
	Denoise Stage = "denoise"
	Layers  Stage = "layers"
	Lesions Stage = "lesions"
	Measure Stage = "measure"
	Render  Stage = "report"
	Notify  Stage = "notify"
)

// StageSpec declares a stage: everything octflow needs to know of it
// besides its implementation. The queue it runs on, the activity type the
// workflow schedules and the workers register, the GPU memory a node
// reserves for it and its place in the pipeline all derive from here.
type StageSpec struct {
	Stage Stage
	// Activity is the Temporal activity type the stage runs as. Its
	// implementation is the method of the same name on
	// activities.Activities (see activities.StageFunc).
	Activity string
	// GPU says the stage runs on a GPU node and holds one of its GPUs
	// while it computes; other stages run on the CPU workers.
	GPU bool
	// GPUMemoryMiB is the GPU memory the stage is assumed to need when
	// a site sets none (GPU stages only).
	GPUMemoryMiB uint64
	// Model names the stage's served-model setting: OCTFLOW_MODEL_<Model>
	// points the stage at a model served over KServe v2 instead of its
	// Go reference implementation ("": a stage no model runs).
	Model string
}

// stages declares the pipeline, in the order ExamWorkflow runs it.
// Adding a stage is one line here and its implementation (see
// docs/development.md, "Adding a stage").
var stages = []StageSpec{
	{Stage: Denoise, Activity: "Denoise", GPU: true, GPUMemoryMiB: 2048, Model: "DENOISE"},
	{Stage: Layers, Activity: "SegmentLayers", GPU: true, GPUMemoryMiB: 4096, Model: "LAYERS"},
	{Stage: Lesions, Activity: "MarkLesions", GPU: true, GPUMemoryMiB: 2048, Model: "LESIONS"},
	{Stage: Measure, Activity: "Measure", GPU: true, GPUMemoryMiB: 1024},
	{Stage: Render, Activity: "RenderReport"},
	{Stage: Notify, Activity: "NotifyWorkstation"},
}

// Stages returns every stage's declaration, in pipeline order.
func Stages() []StageSpec { return append([]StageSpec(nil), stages...) }

// Pipeline lists the stages in the order ExamWorkflow runs them.
var Pipeline = func() []Stage {
	p := make([]Stage, len(stages))
	for i, s := range stages {
		p[i] = s.Stage
	}
	return p
}()

// Spec returns the stage's declaration; false for a name no stage has.
func (s Stage) Spec() (StageSpec, bool) {
	for _, d := range stages {
		if d.Stage == s {
			return d, true
		}
	}
	return StageSpec{}, false
}

// NeedsGPU reports whether the stage runs on a GPU node.
func (s Stage) NeedsGPU() bool {
	d, _ := s.Spec()
	return d.GPU
}

// Queue is the task queue the stage's activity is scheduled on.
func (s Stage) Queue() string {
	if s.NeedsGPU() {
		return GPUQueue
	}
	return CPUQueue
}

// NodeQueue is the task queue of one GPU node of the shared GPU queue:
// the later GPU stages of an exam whose first stage ran on that node are
// scheduled there, so they find its output in the node's local cache.
func NodeQueue(node string) string { return GPUQueue + "-node-" + node }

// CampusGPUQueue is the GPU queue of a campus whose exams run only on
// nodes bound to it (Policy.OwnGPUs).
func CampusGPUQueue(campus string) string { return GPUQueue + "-campus-" + campus }

// NodeQueueOf is the own queue of node serving the GPU queue queue: on
// the shared queue, NodeQueue; on a campus's own, the campus's queue,
// a dot (which no campus name holds) and node-<node>, so that a node
// queue names the campus whose stages it may carry.
func NodeQueueOf(queue, node string) string {
	if queue == GPUQueue || queue == "" {
		return NodeQueue(node)
	}
	return queue + ".node-" + node
}

// IsNodeQueueOf says whether q is the own queue of some node serving the
// GPU queue queue (NodeQueueOf): the only queues an exam of that queue
// sends its pinned and hedged stages to.
func IsNodeQueueOf(queue, q string) bool {
	node, ok := strings.CutPrefix(q, NodeQueueOf(queue, ""))
	return ok && node != ""
}

// ActivityName is the registered Temporal activity type of the stage
// ("" for a name no stage has).
func (s Stage) ActivityName() string {
	d, _ := s.Spec()
	return d.Activity
}

// StageOfActivity maps an activity type back to its stage ("" if none).
func StageOfActivity(name string) Stage {
	for _, d := range stages {
		if d.Activity == name {
			return d.Stage
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
