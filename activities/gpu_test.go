package activities

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
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
		{"no GPU gate", false, false, []string{"started", "store read", "load", "simulated GPU time", "compute", "write"}},
		// A gated stage reports its take before it reads from the store.
		{"gated, input in the store", true, false, []string{"taken", "store read", "load", "bind", "simulated GPU time", "compute", "release", "write"}},
		{"gated, input in the node's cache", true, true, []string{"load", "bind", "started", "simulated GPU time", "compute", "release", "write"}},
	}
	for _, c := range cases {
		gated := c.gated
		var mu sync.Mutex
		var steps []string
		step := func(s string) { mu.Lock(); steps = append(steps, s); mu.Unlock() }
		a := &Activities{Node: "gpu-test", Common: Common{QuietStart: -1, Store: storeReads{read: func() { step("store read") }}},
			GPUNode: &GPUNode{SimulatedCompute: func(ctx context.Context, _ string, _ exam.Stage) error {
				// The SDK holds back a heartbeat that follows another
				// within its throttle interval (the GPU nodes shorten
				// it): what the stage's next one will say is checked.
				if b, ok := ctx.Value(stageBeatKey{}).(*stageBeat); gated && (!ok || b.get().StartedAt == nil || b.get().GPU == nil) {
					t.Errorf("the simulated GPU time runs before the stage's heartbeat says it started")
				}
				step("simulated GPU time")
				return nil
			}}}
		if c.cached {
			a.GPUNode.Cache = NewLocalCache(1 << 20)
			a.GPUNode.Cache.Put("exams/E1/denoised.dcm", []byte("input"))
		}
		gate := GPUGate(func(context.Context, exam.Stage) (int, func(), error) {
			step("bind")
			return 3, func() { step("release") }, nil
		})
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestActivityEnvironment()
		var beats []contract.Heartbeat
		onBeat(t, env, func(hb contract.Heartbeat) {
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
			return out, a.run(ctx, layersSpec(), &out, func(ctx context.Context) error {
				if _, err := a.get(ctx, "exams/E1/denoised.dcm"); err != nil {
					return err
				}
				step("load")
				if err := a.onGPU(ctx, func(ctx context.Context) error {
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
		if out.Node != "gpu-test" || (out.GPU != nil) != gated || gated && *out.GPU != 3 {
			t.Errorf("%s: output says node %q, GPU %v; want this node and GPU 3 iff gated", c.name, out.Node, out.GPU)
		}
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

func TestAFailedStageNamesItsNodeAndKeepsWhatItSaid(t *testing.T) {
	cases := []struct {
		name        string
		fail        error
		wantType    string
		wantFinal   bool
		wantDelay   time.Duration
		wantMessage string
		wantOwnNode string // "": details the error brought are kept
	}{
		{"a plain error is a stage failure", errors.New("CUDA out of memory"), contract.ErrTypeStageFailed, false, 0, "CUDA out of memory", "gpu-c"},
		{"a final error stays final", temporal.NewNonRetryableApplicationError("not an OCT volume", contract.ErrTypeInvalidVolume, nil),
			contract.ErrTypeInvalidVolume, true, 0, "not an OCT volume", "gpu-c"},
		{"a requested delay is kept", temporal.NewApplicationErrorWithOptions("busy", "Busy", temporal.ApplicationErrorOptions{NextRetryDelay: 3 * time.Second}),
			"Busy", false, 3 * time.Second, "busy", "gpu-c"},
		{"details it has are its own", temporal.NewApplicationErrorWithOptions("lost", contract.ErrTypeNodeLost,
			temporal.ApplicationErrorOptions{Details: []any{contract.FailureDetails{Node: "gpu-z"}}}), contract.ErrTypeNodeLost, false, 0, "lost", "gpu-z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := &Activities{Node: "gpu-c"}
			env, _ := attemptEnv(t, nil)
			env.RegisterActivityWithOptions(func(ctx context.Context) (contract.StageOutput, error) {
				var out contract.StageOutput
				return out, a.run(ctx, layersSpec(), &out, func(context.Context) error { return c.fail })
			}, activity.RegisterOptions{Name: "Stage"})
			_, err := env.ExecuteActivity("Stage")
			var app *temporal.ApplicationError
			if !errors.As(err, &app) {
				t.Fatalf("stage returned %v, want an application error", err)
			}
			var d contract.FailureDetails
			if app.Type() != c.wantType || app.NonRetryable() != c.wantFinal || app.NextRetryDelay() != c.wantDelay ||
				app.Message() != c.wantMessage || app.Details(&d) != nil || d.Node != c.wantOwnNode {
				t.Errorf("failure %q type %s final %v delay %s node %q; want %q %s %v %s %q", app.Message(), app.Type(), app.NonRetryable(),
					app.NextRetryDelay(), d.Node, c.wantMessage, c.wantType, c.wantFinal, c.wantDelay, c.wantOwnNode)
			}
		})
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
	onBeat(t, env, func(hb contract.Heartbeat) { *beat = hb })
	return env, beat
}

// onBeat calls f with each heartbeat the activity in env sends.
func onBeat(t *testing.T, env *testsuite.TestActivityEnvironment, f func(contract.Heartbeat)) {
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var hb contract.Heartbeat
		if err := details.Get(&hb); err != nil {
			t.Errorf("heartbeat: %v", err)
		}
		f(hb)
	})
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
		name string
		fail error
		want []string
	}{
		{"completes", nil, []string{"hold", "note", "store read", "note started", "drop"}},
		{"fails", fmt.Errorf("bad GPU"), []string{"hold", "note", "store read", "note started", "drop"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var steps []string
			var last contract.Heartbeat
			log := takeSteps{mu: &mu, steps: &steps, last: &last}
			a := &Activities{Node: "gpu-n", GPUNode: &GPUNode{Takes: log},
				Common: Common{Store: storeReads{read: func() { mu.Lock(); steps = append(steps, "store read"); mu.Unlock() }}}}
			env, _ := attemptEnv(t, nil)
			gate := GPUGate(func(context.Context, exam.Stage) (int, func(), error) { return 0, func() {}, nil })
			env.RegisterActivityWithOptions(func(ctx context.Context) (contract.StageOutput, error) {
				ctx = WithGPUGate(ctx, gate)
				var out contract.StageOutput
				return out, a.run(ctx, lesionsSpec(), &out, func(ctx context.Context) error {
					if _, err := a.get(ctx, "exams/E1/layers.json"); err != nil {
						return err
					}
					return a.onGPU(ctx, func(context.Context) error { return c.fail })
				})
			}, activity.RegisterOptions{Name: "Stage"})
			_, err := env.ExecuteActivity("Stage")
			if (err != nil) != (c.fail != nil) {
				t.Fatalf("stage returned %v", err)
			}
			if !slices.Equal(steps, c.want) {
				t.Errorf("take log told %v, want %v", steps, c.want)
			}
			if last.Node != "gpu-n" || last.TakenAt == nil {
				t.Errorf("last note %+v, want this node's take", last)
			}
		})
	}
}
