package workflows

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestRecordedHistoriesReplay replays the histories of real exam runs
// against the current workflow code, so a change that would break exams
// in flight fails here rather than in production.
func TestRecordedHistoriesReplay(t *testing.T) {
	files, err := filepath.Glob("testdata/exam_workflow_*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories in testdata/")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(ExamWorkflow, workflow.RegisterOptions{Name: ExamWorkflowName})
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replaying %s: %v", f, err)
			}
		})
	}
}
