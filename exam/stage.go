package exam

import (
	"context"
	"strings"
)

// Stage is one step of the exam pipeline.
type Stage string

// The names of octflow's stages. Each is declared where it is
// implemented (package activities); the names are vocabulary, for what
// a stage means to the pipeline (the review starts after the report, a
// failed notification fails no exam) and for the API.
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
// reserves for it and its model setting all derive from here. Each stage
// declares its own, beside its implementation (package activities).
type StageSpec struct {
	Stage Stage
	// Activity is the Temporal activity type the stage runs as.
	Activity string
	// GPU says the stage runs on a GPU node and holds one of its GPUs
	// while it computes; other stages run on the CPU workers.
	GPU bool
	// GPUMemoryMiB is the GPU memory a node reserves for the stage unless
	// it is told otherwise (gpuworker.Config.StageMemoryMiB; GPU stages
	// only).
	GPUMemoryMiB uint64
	// Model names the stage's served-model setting: OCTFLOW_MODEL_<Model>
	// points the stage at a model served over KServe v2 instead of its
	// Go reference implementation ("": a stage no model runs).
	Model string
	// Input is what the pipeline gives the stage: the kind of input its
	// activity takes, which activities.StageOf sets from the activity's
	// type (the workflows refuse a stage that states none).
	Input InputKind
}

// InputKind names the input the pipeline gives a stage (package
// contract holds each: contract.InputKindOf).
type InputKind string

// The inputs a stage may take.
const (
	// ImageInput is the exam alone (contract.StageInput): an image
	// stage reads what it needs from the object store.
	ImageInput InputKind = "image"
	// ReportInput is the exam and what the stages before said of it
	// (contract.ReportInput).
	ReportInput InputKind = "report"
	// NotifyInput is the exam and its headline result
	// (contract.NotifyInput), as the review's reminders give it too.
	NotifyInput InputKind = "notify"
)

// Queue is the task queue the stage's activity is scheduled on: the
// shared GPU queue for a GPU stage, the CPU workers' queue otherwise
// (Policy.StageQueue gives an exam's own).
func (s StageSpec) Queue() string {
	if s.GPU {
		return GPUQueue
	}
	return CPUQueue
}

// Pipeline is the stages an exam runs through, in their order. Its
// declarations are the stages' own (package activities, a file each);
// the workflows, the GPU nodes and the configuration are handed it.
type Pipeline []StageSpec

// Spec is the declaration of stage s; false for a stage not in p.
func (p Pipeline) Spec(s Stage) (StageSpec, bool) {
	for _, d := range p {
		if d.Stage == s {
			return d, true
		}
	}
	return StageSpec{}, false
}

// OfActivity is the declaration of the stage that runs as the activity
// type name; false for an activity of no stage in p.
func (p Pipeline) OfActivity(name string) (StageSpec, bool) {
	for _, d := range p {
		if d.Activity == name {
			return d, true
		}
	}
	return StageSpec{}, false
}

// GPU says whether s is a GPU stage of p.
func (p Pipeline) GPU(s Stage) bool {
	d, ok := p.Spec(s)
	return ok && d.GPU
}

// Stages lists the stages' names in order.
func (p Pipeline) Stages() []Stage {
	out := make([]Stage, len(p))
	for i, d := range p {
		out[i] = d.Stage
	}
	return out
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
