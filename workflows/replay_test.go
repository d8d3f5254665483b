package workflows

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"

	"octflow/codec"
)

// TestRecordedHistoriesReplay replays the histories of real runs of every
// workflow type against the current code, registered as the worker
// registers it, so a change that would break workflows in flight fails
// here rather than in production. testdata/README.md says how to record
// one.
func TestRecordedHistoriesReplay(t *testing.T) {
	files, err := filepath.Glob("testdata/*_*.json")
	if err != nil {
		t.Fatal(err)
	}
	dc, fc := corpusConverters(t)
	if len(files) == 0 {
		t.Fatal("no recorded histories in testdata/")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
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
