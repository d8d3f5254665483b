package exam

import (
	"errors"
	"testing"
	"time"
)

func TestDeriveStateCoversTheSevenStates(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		obs  Observation
		want State
	}{
		{"started, nothing scheduled", Observation{Status: Running}, Created},
		{"stage waiting on its queue", Observation{Status: Running, Pending: &PendingStage{Stage: Denoise, Attempt: 1}}, Queued},
		{"picked up, no progress yet", Observation{Status: Running, Pending: &PendingStage{Stage: Layers, Started: true, Attempt: 1}}, Claimed},
		{"running and heartbeating", Observation{Status: Running, Pending: &PendingStage{Stage: Layers, Started: true, Heartbeated: true, Attempt: 1}}, Executing},
		{"waiting out a retry backoff", Observation{Status: Running, Now: now, Pending: &PendingStage{Stage: Layers, Attempt: 2, NextAttemptAt: now.Add(time.Minute)}}, RetryWait},
		{"retry due, back on the queue", Observation{Status: Running, Now: now, Pending: &PendingStage{Stage: Layers, Attempt: 2, NextAttemptAt: now.Add(-time.Second)}}, Queued},
		{"between two stages", Observation{Status: Running, Recorded: Queued}, Queued},
		{"workflow completed", Observation{Status: Succeeded}, Completed},
		{"report done, awaiting review", Observation{Status: Running, Recorded: Completed}, Completed},
		{"workflow failed", Observation{Status: Failed, Recorded: Executing}, Dead},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := DeriveState(c.obs); got != c.want {
				t.Errorf("DeriveState = %s, want %s", got, c.want)
			}
		})
	}
}

func TestTransitionTable(t *testing.T) {
	cases := []struct {
		from, to State
		legal    bool
	}{
		{Created, Queued, true},
		{Queued, Claimed, true},
		{Claimed, Executing, true},
		{Executing, RetryWait, true},
		{RetryWait, Queued, true},
		{Executing, Completed, true},
		{Queued, Dead, true},
		{Completed, Queued, false},
		{Dead, Executing, false},
		{Created, Completed, false},
		{RetryWait, Completed, false},
	}
	for _, c := range cases {
		err := CheckMove(c.from, c.to)
		if c.legal && err != nil {
			t.Errorf("%s → %s rejected: %v", c.from, c.to, err)
		}
		var illegal ErrIllegalTransition
		if !c.legal && !errors.As(err, &illegal) {
			t.Errorf("%s → %s accepted, want ErrIllegalTransition", c.from, c.to)
		}
	}
}

func TestValidateIDRefusesWhatCannotBeAKey(t *testing.T) {
	for _, id := range []string{"E-2026-0001", "a", "exam_1.b"} {
		if err := ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q) = %v", id, err)
		}
	}
	for _, id := range []string{"", "../etc", "a/b", "-x", "with space", string(make([]byte, 200))} {
		if ValidateID(id) == nil {
			t.Errorf("ValidateID(%q) accepted", id)
		}
	}
}

func TestScanKeyDependsOnDigestAndNeverOnPatient(t *testing.T) {
	a, b := ScanKey("E1", "aaaaaaaaaaaaaaaaaaaa"), ScanKey("E1", "bbbbbbbbbbbbbbbbbbbb")
	if a == b {
		t.Fatalf("different scans share key %s", a)
	}
	if a != "exams/E1/scan-aaaaaaaaaaaaaaaa.dcm" {
		t.Errorf("ScanKey = %s", a)
	}
}
