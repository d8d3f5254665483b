package activities

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"octflow/contract"
	"octflow/imaging"
	"octflow/storage"
)

func TestAStagePanicBecomesANonRetryableErrorNamingTheStage(t *testing.T) {
	cases := []struct {
		name string
		body func(context.Context) error
		want string
	}{
		{"panic in the stage goroutine", func(context.Context) error { var v []int; _ = v[3]; return nil }, "layers panicked: runtime error: index out of range"},
		{"panic handed back by a frame worker", func(context.Context) error {
			panic(&imaging.FramePanic{Value: "nil volume in frame 12", Stack: []byte("frame worker stack")})
		}, "layers panicked: nil volume in frame 12"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := &Activities{Node: "gpu-test"}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivityWithOptions(func(ctx context.Context) (contract.StageOutput, error) {
				var out contract.StageOutput
				return out, a.run(ctx, layersSpec(), &out, c.body)
			}, activity.RegisterOptions{Name: "Stage"})
			_, err := env.ExecuteActivity("Stage")
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != contract.ErrTypeStagePanic || !app.NonRetryable() ||
				!strings.HasPrefix(app.Message(), c.want) {
				t.Fatalf("error = %v, want a non-retryable %s starting %q", err, contract.ErrTypeStagePanic, c.want)
			}
		})
	}
}

func TestOnlyAnUnreachableStoreIsAnInfrastructureFailure(t *testing.T) {
	live, cancelled := context.Background(), func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}()
	refused := errors.New("dial tcp 127.0.0.1:9000: connect: connection refused")
	cases := []struct {
		name  string
		ctx   context.Context
		err   error
		infra bool
	}{
		{"connection refused", live, refused, true},
		{"missing object: the store answered", live, errors.Join(errors.New("get exams/E1/layers.json"), storage.ErrNotFound), false},
		{"stage cancelled", cancelled, refused, false},
		{"no error", live, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := unavailable(c.ctx, c.err)
			var app *temporal.ApplicationError
			if got := errors.As(err, &app) && app.Type() == contract.ErrTypeInfrastructure; got != c.infra {
				t.Errorf("unavailable(%v) = %v, infrastructure %v, want %v", c.err, err, got, c.infra)
			}
			if c.err != nil && !errors.Is(err, c.err) && !c.infra {
				t.Errorf("the cause was lost: %v", err)
			}
		})
	}
}
