package contract

import (
	"strconv"
	"strings"
	"time"

	"octflow/exam"
)

// StageInput is an image stage's input (denoise, layers, lesions,
// measure, and any stage a pipeline adds), and the export's: the exam it
// works on. What it needs of the stages before it, it reads from the
// object store under the exam's keys.
type StageInput struct {
	Exam exam.Submission `json:"exam"`
}

// ReportInput is the report stage's input: the exam, and what the
// stages before it said of their work, which the pipeline passes on.
type ReportInput struct {
	Exam exam.Submission `json:"exam"`
	// Summary is the exam's headline result as the measure stage made
	// it; the report adds its lesions.
	Summary exam.Summary `json:"summary"`
	// Algorithms name what computed each stage before the report
	// (StageOutput.Algorithm), which the report records.
	Algorithms map[exam.Stage]string `json:"algorithms"`
	// Rerun is the run's ExamInput.Rerun: a superseding run's report
	// replaces the report of the run it names, and says so.
	Rerun *Rerun `json:"rerun,omitempty"`
}

// NotifyInput is the notify stage's input, and the review's reminder's:
// the exam and its headline result.
type NotifyInput struct {
	Exam    exam.Submission `json:"exam"`
	Summary exam.Summary    `json:"summary"`
	// Reminder numbers a repeated report-ready push for an urgent exam
	// still awaiting review (0 for the first push).
	Reminder int `json:"reminder,omitempty"`
}

// Input is an input the pipeline gives a stage.
type Input interface {
	StageInput | ReportInput | NotifyInput
}

// InputKindOf is the kind of input In is, which a stage taking it
// states (exam.StageSpec.Input) and the pipeline gives by.
func InputKindOf[In Input]() exam.InputKind {
	var in In
	switch any(in).(type) {
	case ReportInput:
		return exam.ReportInput
	case NotifyInput:
		return exam.NotifyInput
	}
	return exam.ImageInput
}

// StageOutput says what a stage wrote.
type StageOutput struct {
	Keys []string `json:"keys"`
	// Algorithm names what computed the stage's output: its reference
	// implementation and version, or the served model it was pointed at.
	// The pipeline passes it on to the report, which records it.
	Algorithm string `json:"algorithm,omitempty"`
	// Summary is the exam's headline result, from the stage that made it
	// (the measure stage) or added to it (the report's lesions): the
	// pipeline passes it on to the stages after.
	Summary *exam.Summary `json:"summary,omitempty"`
	// ReportAt is when the report stage made the report (the report's
	// generatedAt): the exam's review window runs from it.
	ReportAt *time.Time `json:"reportAt,omitempty"`
	Note     string     `json:"note,omitempty"`
	// Delivered is set by the notify stage once the workstation took the event.
	Delivered bool `json:"delivered,omitempty"`
	// NodeQueue is the task queue of the GPU node that ran the stage and
	// keeps its output in a local cache; the exam's next GPU stage is
	// sent there first. Empty for CPU stages.
	NodeQueue string `json:"nodeQueue,omitempty"`
	// ObjectBytesRead is how many bytes the stage read from the object
	// store (reads served by the node's cache are not counted).
	ObjectBytesRead int64 `json:"objectBytesRead,omitempty"`
	// GPUHeld is when the stage held its GPU on a GPU node, from its
	// start to the GPU's release (its input was read before, its output
	// is stored after); nil for a stage that ran without one.
	GPUHeld *Span `json:"gpuHeld,omitempty"`
	// Node is the node or worker that ran the stage, and GPU the GPU it
	// computed on (nil: none).
	Node string `json:"node,omitempty"`
	GPU  *int   `json:"gpu,omitempty"`
}

// Span is a stretch of time.
type Span struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Heartbeat is what a running stage reports every few seconds.
type Heartbeat struct {
	Node  string     `json:"node,omitempty"`
	Stage exam.Stage `json:"stage"`
	GPU   *int       `json:"gpu,omitempty"`
	// StartedAt is when the stage's work began on the node (its GPU
	// bound); unset while it waits for a GPU.
	StartedAt *time.Time `json:"startedAt,omitempty"`
	// TakenAt is when the node took this attempt from its queue
	// (Temporal's start of the attempt).
	TakenAt *time.Time `json:"takenAt,omitempty"`
}

// ActivityID is the activity ID of a stage's try in an exam's run: the
// stage and the try ("layers-2"), so a history, a pending activity and
// a stage itself can tell which try it is.
func ActivityID(stage exam.Stage, try int32) string {
	return string(stage) + "-" + strconv.Itoa(int(try))
}

// ParseActivityID reads the stage and the try out of an activity ID made
// by ActivityID; false for an ID of another shape, as every activity
// that is not a stage's try has.
func ParseActivityID(activityID string) (exam.Stage, int32, bool) {
	i := strings.LastIndexByte(activityID, '-')
	if i < 1 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(activityID[i+1:], 10, 32)
	if err != nil || n < 1 {
		return "", 0, false
	}
	return exam.Stage(activityID[:i]), int32(n), true
}

// TryOf is the try an activity ID names (see ActivityID); 1 for an ID of
// another shape.
func TryOf(activityID string) int32 {
	if _, try, ok := ParseActivityID(activityID); ok {
		return try
	}
	return 1
}
