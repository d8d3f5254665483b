package gpuworker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"octflow/contract"
	"octflow/exam"
)

// handBacks records what HandBack asks of Temporal.
type handBacks struct {
	beats    map[string]contract.Heartbeat
	failures map[string]error
	refuse   error // answer to every call, if set
}

func (h *handBacks) RecordActivityHeartbeat(_ context.Context, token []byte, details ...any) error {
	if h.refuse != nil {
		return h.refuse
	}
	h.beats[string(token)] = details[0].(contract.Heartbeat)
	return nil
}

func (h *handBacks) CompleteActivity(_ context.Context, token []byte, _ any, err error) error {
	if h.refuse != nil {
		return h.refuse
	}
	h.failures[string(token)] = err
	return nil
}

func notes(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

func TestTakeNotesFollowTheStageUntilItReturns(t *testing.T) {
	dir := t.TempDir()
	takes, err := OpenTakes(dir, "gpu-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer takes.Close()
	taken := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	note, drop := takes.hold(takeNote{TaskToken: []byte("token-1"), Attempt: 2,
		Beat: contract.Heartbeat{Node: "gpu-a", Stage: exam.Layers, TakenAt: &taken}})
	if n := len(notes(t, dir)); n != 1 {
		t.Fatalf("%d notes after the take, want 1", n)
	}
	gpu := 1
	note(contract.Heartbeat{Node: "gpu-a", Stage: exam.Layers, TakenAt: &taken, StartedAt: &taken, GPU: &gpu})

	// A node killed here leaves the note with its last heartbeat, which
	// its next start hands back.
	rec := &handBacks{beats: map[string]contract.Heartbeat{}, failures: map[string]error{}}
	again, err := OpenTakes(dir, "gpu-a", nil)
	if err == nil {
		again.Close()
		t.Fatal("a second process opened notes another one holds")
	}
	takes.Close()
	again, err = OpenTakes(dir, "gpu-a", nil)
	if err != nil {
		t.Fatalf("notes of a node that is gone: %v", err)
	}
	defer again.Close()
	if n := again.HandBack(context.Background(), rec); n != 1 {
		t.Fatalf("handed back %d stages, want 1", n)
	}
	beat := rec.beats["token-1"]
	if beat.StartedAt == nil || beat.GPU == nil || *beat.GPU != 1 || !beat.TakenAt.Equal(taken) {
		t.Errorf("handed back with heartbeat %+v, want the last one noted", beat)
	}
	var app *temporal.ApplicationError
	if !errors.As(rec.failures["token-1"], &app) || app.Type() != contract.ErrTypeNodeLost || app.NonRetryable() ||
		app.NextRetryDelay() <= 0 || app.NextRetryDelay() > time.Second {
		t.Errorf("handed back with %v, want a retryable %s due at once", rec.failures["token-1"], contract.ErrTypeNodeLost)
	}
	if n := len(notes(t, dir)); n != 0 {
		t.Errorf("%d notes left after the hand-back", n)
	}

	// Once the stage has returned, nothing is left to hand back, and a
	// late heartbeat writes no note again.
	note2, drop2 := again.hold(takeNote{TaskToken: []byte("token-2"), Beat: contract.Heartbeat{Node: "gpu-a", Stage: exam.Denoise}})
	drop2()
	note2(contract.Heartbeat{Node: "gpu-a", Stage: exam.Denoise, StartedAt: &taken})
	drop() // the first attempt's, already handed back: no error
	if n := len(notes(t, dir)); n != 0 {
		t.Errorf("%d notes left after the stage returned", n)
	}
}

func TestHandBackClearsNotesItCannotUse(t *testing.T) {
	cases := []struct {
		name   string
		note   string
		refuse error
	}{
		{"unreadable note", `{"taskToken":`, nil},
		{"note without a token", `{"beat":{"stage":"denoise"}}`, nil},
		{"attempt that ended meanwhile", `{"taskToken":"dG9rZW4=","beat":{"stage":"denoise"}}`, errors.New("activity task not found")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "x.json"), []byte(c.note), 0o600); err != nil {
				t.Fatal(err)
			}
			takes, err := OpenTakes(dir, "gpu-a", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer takes.Close()
			rec := &handBacks{beats: map[string]contract.Heartbeat{}, failures: map[string]error{}, refuse: c.refuse}
			if n := takes.HandBack(context.Background(), rec); n != 0 {
				t.Errorf("handed back %d stages, want 0", n)
			}
			if len(rec.failures) != 0 {
				t.Errorf("failed attempts %v", rec.failures)
			}
			if n := len(notes(t, dir)); n != 0 {
				t.Errorf("%d notes left", n)
			}
		})
	}
}

func TestDefaultTakesDirIsOneDirectoryPerNode(t *testing.T) {
	a, b := DefaultTakesDir("gpu@host-1"), DefaultTakesDir("../gpu/2")
	if a == b || filepath.Dir(a) != filepath.Dir(b) || filepath.Base(b) != "node-.._gpu_2" {
		t.Errorf("dirs %q and %q", a, b)
	}
}
