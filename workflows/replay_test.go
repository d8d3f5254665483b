package workflows

import (
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"

	"octflow/codec"
)

// TestRecordedHistoriesReplay replays the histories of real runs of every
// workflow type against the current code, registered as the worker
// registers it, so a change that would break workflows in flight fails
// here rather than in production: the live corpus (testdata/*.json) and
// release 1.0.0's, kept as it was recorded (testdata/1.0.0; decision 28:
// a later change keeps them replaying, guarded by workflow.GetVersion).
// testdata/README.md says how to record one.
func TestRecordedHistoriesReplay(t *testing.T) {
	var files []string
	for _, pattern := range []string{"testdata/*_*.json", "testdata/1.0.0/*_*.json"} {
		f, err := filepath.Glob(pattern)
		if err != nil || len(f) == 0 {
			t.Fatalf("no recorded histories in %s (%v)", pattern, err)
		}
		files = append(files, f...)
	}
	dc, fc := corpusConverters(t)
	for _, f := range files {
		t.Run(strings.TrimPrefix(f, "testdata/"), func(t *testing.T) {
			r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: dc, FailureConverter: fc})
			if err != nil {
				t.Fatal(err)
			}
			if err := Register(r, shipped()); err != nil {
				t.Fatal(err)
			}
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replaying %s: %v", f, err)
			}
		})
	}
}

// corpusConverters open the corpus's payloads: the histories were
// recorded as production records them, sealed, with a key kept for the
// tests (testdata/codec-keys.json; it guards nothing else).
func corpusConverters(t *testing.T) (converter.DataConverter, converter.FailureConverter) {
	t.Helper()
	c, err := codec.Open("testdata/codec-keys.json")
	if err != nil {
		t.Fatal(err)
	}
	dc, fc := codec.Converters(c)
	return dc, fc
}
