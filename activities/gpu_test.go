package activities

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"octflow/contract"
	"octflow/exam"
)

// storeReads is an object store that holds one object and notes each
// read: the test is about what a stage says before it reads, not about
// the store (the e2e tests run the real one).
type storeReads struct {
	ObjectStore
	read func()
}

func (s storeReads) Get(context.Context, string) (io.ReadCloser, int64, error) {
	s.read()
	return io.NopCloser(strings.NewReader("input")), 5, nil
}

func TestAGatedStageHoldsItsGPUOnlyWhileItComputes(t *testing.T) {
	cases := []struct {
		name          string
		gated, cached bool
		want          []string
	}{
		// The simulated GPU time is part of the computation: it comes
		// once the GPU is held and the stage's start is reported.
		{"no GPU gate", false, false, []string{"fault", "started", "store read", "load", "simulated GPU time", "compute", "write"}},
		// A gated stage reports its take before it reads from the store.
		{"gated, input in the store", true, false, []string{"taken", "store read", "load", "bind", "fault", "simulated GPU time", "compute", "release", "write"}},
		{"gated, input in the node's cache", true, true, []string{"load", "bind", "fault", "started", "simulated GPU time", "compute", "release", "write"}},
	}
	for _, c := range cases {
		gated := c.gated
		var mu sync.Mutex
		var steps []string
		step := func(s string) { mu.Lock(); steps = append(steps, s); mu.Unlock() }
		a := &Activities{Node: "gpu-test", Store: storeReads{read: func() { step("store read") }},
			Faults: func(context.Context, string, exam.Stage) error { step("fault"); return nil },
			SimulatedCompute: func(ctx context.Context, _ string, _ exam.Stage) error {
				// The SDK holds back a heartbeat that follows another
				// within its throttle interval (the GPU nodes shorten
				// it): what the stage's next one will say is checked.
				if b, ok := ctx.Value(stageBeatKey{}).(*stageBeat); gated && (!ok || b.get().StartedAt == nil || b.get().GPU == nil) {
					t.Errorf("the simulated GPU time runs before the stage's heartbeat says it started")
				}
				step("simulated GPU time")
				return nil
			}}
		if c.cached {
			a.Cache = NewLocalCache(1 << 20)
			a.Cache.Put("exams/E1/denoised.dcm", []byte("input"))
		}
		gate := GPUGate(func(context.Context, exam.Stage) (int, func(), error) {
			step("bind")
			return 3, func() { step("release") }, nil
		})
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestActivityEnvironment()
		var beats []contract.Heartbeat
		env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
			var hb contract.Heartbeat
			if err := details.Get(&hb); err != nil {
				t.Errorf("heartbeat: %v", err)
			}
			mu.Lock()
			beats = append(beats, hb)
			mu.Unlock()
			if len(beats) == 1 {
				step(map[bool]string{false: "taken", true: "started"}[hb.StartedAt != nil])
			}
		})
		env.RegisterActivityWithOptions(func(ctx context.Context) (contract.StageOutput, error) {
			if gated {
				ctx = WithGPUGate(ctx, gate)
			}
			var out contract.StageOutput
			return out, a.run(ctx, exam.Layers, 0, &out, func(ctx context.Context) error {
				if _, err := a.get(ctx, "exams/E1/denoised.dcm"); err != nil {
					return err
				}
				step("load")
				if err := a.onGPU(ctx, exam.Layers, func(ctx context.Context) error {
					if gpu, ok := exam.GPUFrom(ctx); gated && (!ok || gpu != 3) {
						t.Errorf("compute sees GPU %d (%v), want 3", gpu, ok)
					}
					step("compute")
					return nil
				}); err != nil {
					return err
				}
				step("write")
				return nil
			})
		}, activity.RegisterOptions{Name: "Stage"})
		val, err := env.ExecuteActivity("Stage")
		if err != nil {
			t.Fatal(err)
		}
		var out contract.StageOutput
		if err := val.Get(&out); err != nil {
			t.Fatal(err)
		}
		// How long it held the GPU: from its start to the release.
		if h := out.GPUHeld; (h != nil) != gated || h != nil && (h.From.IsZero() || h.To.Before(h.From)) {
			t.Errorf("%s: GPU held %+v, want a span iff the stage had a GPU", c.name, h)
		}
		if !slices.Equal(steps, c.want) {
			t.Errorf("%s: steps %v, want %v", c.name, steps, c.want)
		}
		for _, hb := range beats {
			if hb.TakenAt == nil || hb.TakenAt.IsZero() {
				t.Errorf("%s: heartbeat %+v does not say when the node took the attempt", c.name, hb)
			}
		}
	}
}

func TestARetryCarriesTheFirstTakeOfItsStage(t *testing.T) {
	first := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	second := first.Add(7 * time.Second)
	cases := []struct {
		name string
		prev *contract.Heartbeat // the last heartbeat before this attempt
		want *time.Time          // nil: this attempt's own take
	}{
		{"first attempt", nil, nil},
		{"after an attempt that told its take", &contract.Heartbeat{Node: "gpu-a", Stage: exam.Layers, TakenAt: &first}, &first},
		{"after two: the first one's take", &contract.Heartbeat{Node: "gpu-b", Stage: exam.Layers, TakenAt: &second, FirstTakenAt: &first}, &first},
	}
	// Gated, the stage's first heartbeat is the one a GPU node sends
	// while the stage waits for its GPU (gpuworker); it says the same.
	waitingGate := GPUGate(func(ctx context.Context, stage exam.Stage) (int, func(), error) {
		activity.RecordHeartbeat(ctx, WaitingBeat(ctx, "gpu-c", stage))
		return 0, func() {}, nil
	})
	for _, c := range cases {
		for _, gated := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, gated %v", c.name, gated), func(t *testing.T) {
				a := &Activities{Node: "gpu-c"}
				env, beat := attemptEnv(t, c.prev)
				env.RegisterActivityWithOptions(func(ctx context.Context) (contract.StageOutput, error) {
					if gated {
						ctx = WithGPUGate(ctx, waitingGate)
					}
					var out contract.StageOutput
					return out, a.run(ctx, exam.Layers, 0, &out, func(ctx context.Context) error {
						return a.onGPU(ctx, exam.Layers, func(context.Context) error { return nil })
					})
				}, activity.RegisterOptions{Name: "Stage"})
				if _, err := env.ExecuteActivity("Stage"); err != nil {
					t.Fatal(err)
				}
				want := c.want
				if want == nil {
					want = beat.TakenAt
				}
				if beat.FirstTakenAt == nil || want == nil || !beat.FirstTakenAt.Equal(*want) {
					t.Errorf("first take %v, want %v (this attempt's take %v)", beat.FirstTakenAt, want, beat.TakenAt)
				}
			})
		}
	}
}

// attemptEnv is an activity environment for an attempt of a stage whose
// last heartbeat before it was prev (nil: a first attempt); beat is what
// the attempt's heartbeats said last.
func attemptEnv(t *testing.T, prev *contract.Heartbeat) (env *testsuite.TestActivityEnvironment, beat *contract.Heartbeat) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env = suite.NewTestActivityEnvironment()
	if prev != nil {
		env.SetHeartbeatDetails(*prev)
	}
	beat = new(contract.Heartbeat)
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		if err := details.Get(beat); err != nil {
			t.Errorf("heartbeat: %v", err)
		}
	})
	return env, beat
}

// takeSteps is a take log that notes what it is told, in order.
type takeSteps struct {
	mu    *sync.Mutex
	steps *[]string
	last  *contract.Heartbeat
}

func (l takeSteps) Hold(_ context.Context, beat contract.Heartbeat) (func(contract.Heartbeat), func()) {
	l.step("hold", beat)
	return func(b contract.Heartbeat) { l.step("note", b) }, func() { l.step("drop", contract.Heartbeat{}) }
}

func (l takeSteps) step(s string, b contract.Heartbeat) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s != "drop" {
		*l.last = b
		if b.StartedAt != nil {
			s += " started"
		}
	}
	*l.steps = append(*l.steps, s)
}

func TestANodeNotesTheStageItHoldsFromItsTakeUntilItReturns(t *testing.T) {
	cases := []struct {
		name         string
		fail         error
		want         []string
		wantFailures int32
	}{
		{"completes", nil, []string{"hold", "note", "store read", "note started", "drop"}, 1},
		// The failure's count is noted before the note goes: a node
		// killed before it reports the failure hands back the count.
		{"fails", fmt.Errorf("bad GPU"), []string{"hold", "note", "store read", "note started", "note started", "drop"}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var steps []string
			var last contract.Heartbeat
			log := takeSteps{mu: &mu, steps: &steps, last: &last}
			a := &Activities{Node: "gpu-n", Takes: log,
				Store: storeReads{read: func() { mu.Lock(); steps = append(steps, "store read"); mu.Unlock() }}}
			prev := contract.Heartbeat{Node: "gpu-m", Stage: exam.Lesions, Failures: 1}
			env, _ := attemptEnv(t, &prev)
			gate := GPUGate(func(context.Context, exam.Stage) (int, func(), error) { return 0, func() {}, nil })
			env.RegisterActivityWithOptions(func(ctx context.Context) (contract.StageOutput, error) {
				ctx = WithGPUGate(ctx, gate)
				var out contract.StageOutput
				return out, a.run(ctx, exam.Lesions, 3, &out, func(ctx context.Context) error {
					if _, err := a.get(ctx, "exams/E1/layers.json"); err != nil {
						return err
					}
					return a.onGPU(ctx, exam.Lesions, func(context.Context) error { return c.fail })
				})
			}, activity.RegisterOptions{Name: "Stage"})
			_, err := env.ExecuteActivity("Stage")
			if (err != nil) != (c.fail != nil) {
				t.Fatalf("stage returned %v", err)
			}
			if !slices.Equal(steps, c.want) {
				t.Errorf("take log told %v, want %v", steps, c.want)
			}
			if last.Node != "gpu-n" || last.TakenAt == nil || last.Failures != c.wantFailures {
				t.Errorf("last note %+v, want this node's take with %d failures", last, c.wantFailures)
			}
		})
	}
}
