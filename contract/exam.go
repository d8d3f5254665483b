package contract

import (
	"time"

	"octflow/exam"
)

// ExamInput starts an exam's pipeline: the submission and the policy it
// runs under, both resolved and validated by the gateway. The workflow
// trusts them as given; nothing is re-defaulted on replay.
type ExamInput struct {
	Submission exam.Submission `json:"submission"`
	Policy     exam.Policy     `json:"policy"`
	// Rerun is set on an operator's new run of a DEAD exam.
	Rerun *Rerun `json:"rerun,omitempty"`
}

// Rerun says which run a new run of the exam follows, and who asked.
type Rerun struct {
	PreviousRunID string    `json:"previousRunId"`
	By            string    `json:"by"`
	At            time.Time `json:"at"`
}

// ExamResult is what the pipeline returns once the report exists.
type ExamResult struct {
	ExamID  string       `json:"examId"`
	Report  ReportKeys   `json:"report"`
	Summary exam.Summary `json:"summary"`
	// Review and Reviews are set only by runs from before the review
	// moved to its own workflow; newer runs leave them empty.
	Review  exam.ReviewStatus `json:"review,omitempty"`
	Reviews []exam.Review     `json:"reviews,omitempty"`
}

// ReportKeys point at an exam's report objects.
type ReportKeys struct {
	JSONKey string `json:"jsonKey"`
	PDFKey  string `json:"pdfKey"`
}

// Progress is what a pipeline says of itself through ProgressQuery.
type Progress struct {
	State             string        `json:"state"`
	Stage             exam.Stage    `json:"stage,omitempty"`
	EffectivePriority exam.Priority `json:"effectivePriority"`
	StagesDone        []exam.Stage  `json:"stagesDone"`
	Promotions        []Promotion   `json:"promotions,omitempty"`
	Notified          bool          `json:"notified"`
	NotifyError       string        `json:"notifyError,omitempty"`
	SLABreached       bool          `json:"slaBreached,omitempty"`
	Summary           exam.Summary  `json:"summary"`
	// Review and Reviews are kept by runs from before the split.
	Review       exam.ReviewStatus `json:"review,omitempty"`
	Reviews      []exam.Review     `json:"reviews,omitempty"`
	IllegalMoves int               `json:"illegalMoves"`
	Transitions  []Transition      `json:"transitions,omitempty"`
}

// Transition is one state change the workflow made itself.
type Transition struct {
	At    time.Time  `json:"at"`
	From  string     `json:"from"`
	To    string     `json:"to"`
	Stage exam.Stage `json:"stage,omitempty"`
}

// Promotion records a stage moved one bucket up after waiting too long.
type Promotion struct {
	At     time.Time     `json:"at"`
	Stage  exam.Stage    `json:"stage"`
	From   exam.Priority `json:"from"`
	To     exam.Priority `json:"to"`
	Waited time.Duration `json:"waited"`
}
