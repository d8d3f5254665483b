package activities

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"octflow/contract"
	"octflow/exam"
)

func TestAStageBeatsOnlyOnceItsQuietStartIsOver(t *testing.T) {
	cases := []struct {
		name      string
		quiet     time.Duration
		runs      time.Duration
		wantBeats bool
		// wantStarted: the first heartbeat says the stage started on its
		// GPU (else it says the take; the SDK holds back what follows
		// within its throttle interval).
		wantStarted bool
	}{
		{"shorter than its quiet start: no heartbeat", 5 * time.Second, 10 * time.Millisecond, false, false},
		{"longer: a heartbeat that says it started", 100 * time.Millisecond, 400 * time.Millisecond, true, true},
		{"no quiet start: the take at once", -1, 10 * time.Millisecond, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var beats []contract.Heartbeat
			var notes []contract.Heartbeat
			log := takeNotes{mu: &mu, notes: &notes}
			a := &Activities{Node: "gpu-q", Common: Common{QuietStart: c.quiet, HeartbeatEvery: time.Minute}, GPUNode: &GPUNode{Takes: log}}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			onBeat(t, env, func(hb contract.Heartbeat) {
				mu.Lock()
				beats = append(beats, hb)
				mu.Unlock()
			})
			gate := GPUGate(func(context.Context, exam.Stage) (int, func(), error) { return 1, func() {}, nil })
			env.RegisterActivityWithOptions(func(ctx context.Context) (contract.StageOutput, error) {
				ctx = WithGPUGate(ctx, gate)
				var out contract.StageOutput
				return out, a.run(ctx, layersSpec(), &out, func(ctx context.Context) error {
					announceTake(ctx)
					return a.onGPU(ctx, func(context.Context) error {
						time.Sleep(c.runs)
						return nil
					})
				})
			}, activity.RegisterOptions{Name: "Stage"})
			if _, err := env.ExecuteActivity("Stage"); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if got := len(beats) > 0; got != c.wantBeats {
				t.Fatalf("heartbeats %+v, want some: %v", beats, c.wantBeats)
			}
			if c.wantBeats {
				first := beats[0]
				if started := first.StartedAt != nil && first.GPU != nil && *first.GPU == 1; started != c.wantStarted ||
					first.Node != "gpu-q" || first.TakenAt == nil {
					t.Errorf("first heartbeat %+v, want the start on GPU 1: %v", first, c.wantStarted)
				}
			}
			// The take log hears everything the stage would say, quiet or not.
			if len(notes) < 2 || notes[len(notes)-1].StartedAt == nil {
				t.Errorf("take log notes %+v, want the take and the start", notes)
			}
		})
	}
}

// takeNotes is a take log that keeps the notes it is given.
type takeNotes struct {
	mu    *sync.Mutex
	notes *[]contract.Heartbeat
}

func (l takeNotes) Hold(_ context.Context, beat contract.Heartbeat) (func(contract.Heartbeat), func()) {
	return func(b contract.Heartbeat) {
		l.mu.Lock()
		*l.notes = append(*l.notes, b)
		l.mu.Unlock()
	}, func() {}
}
