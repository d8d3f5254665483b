package activities

import (
	"context"
	"fmt"
	"reflect"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"octflow/contract"
	"octflow/exam"
)

// StageFn is what implements a stage: it runs one try of it for an exam.
type StageFn = func(ctx context.Context, in contract.StageInput) (contract.StageOutput, error)

// StageFunc returns the implementation of the declared stage s: the
// method of a named after its activity type (exam.StageSpec.Activity).
// A stage declared without such a method is an error, which the workers
// report when they start.
func (a *Activities) StageFunc(s exam.StageSpec) (StageFn, error) {
	m := reflect.ValueOf(a).MethodByName(s.Activity)
	if !m.IsValid() {
		return nil, fmt.Errorf("stage %s: activities.Activities has no method %s", s.Stage, s.Activity)
	}
	fn, ok := m.Interface().(StageFn)
	if !ok {
		return nil, fmt.Errorf("stage %s: %s is a %s, not a stage (%T)", s.Stage, s.Activity, m.Type(), StageFn(nil))
	}
	return fn, nil
}

// RegisterStages registers on r the implementation of every declared
// stage that runs on a GPU node (gpu) or on the CPU workers (!gpu), each
// under its activity type.
func RegisterStages(r worker.ActivityRegistry, a *Activities, gpu bool) error {
	for _, s := range exam.Stages() {
		if s.GPU != gpu {
			continue
		}
		fn, err := a.StageFunc(s)
		if err != nil {
			return err
		}
		r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: s.Activity})
	}
	return nil
}
