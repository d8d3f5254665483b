package workflows

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"octflow/activities"
	"octflow/contract"
	"octflow/exam"
)

// Each stage is given the input its activity takes, as it states it
// (activities.StageOf), wherever it stands: a stage taking a
// notification's input among the image stages is given one, where a
// pipeline choosing by the stage's name would give it the exam alone,
// which would decode into its input without a word.
func TestEachStageIsGivenTheInputItsActivityTakes(t *testing.T) {
	toy := func(in any) activities.Stage {
		spec := exam.StageSpec{Stage: "toy", Activity: "WriteToyNote"}
		switch in.(type) {
		case contract.NotifyInput:
			return activities.StageOf(spec, func(*activities.Activities, context.Context, contract.NotifyInput) (contract.StageOutput, error) {
				return contract.StageOutput{}, nil
			})
		case contract.ReportInput:
			return activities.StageOf(spec, func(*activities.Activities, context.Context, contract.ReportInput) (contract.StageOutput, error) {
				return contract.StageOutput{}, nil
			})
		}
		return activities.StageOf(spec, func(*activities.Activities, context.Context, contract.StageInput) (contract.StageOutput, error) {
			return contract.StageOutput{}, nil
		})
	}
	// after is the shipped pipeline with s after stage.
	after := func(stage exam.Stage, s activities.Stage) activities.Stages {
		var out activities.Stages
		for _, st := range activities.Pipeline() {
			out = append(out, st)
			if st.Spec.Stage == stage {
				out = append(out, s)
			}
		}
		return out
	}
	// takes is what each shipped stage's activity takes.
	takes := map[exam.Stage]any{exam.Denoise: contract.StageInput{}, exam.Layers: contract.StageInput{},
		exam.Lesions: contract.StageInput{}, exam.Measure: contract.StageInput{},
		exam.Render: contract.ReportInput{}, exam.Notify: contract.NotifyInput{}}
	cases := []struct {
		name   string
		stages activities.Stages
		toy    any // what the toy stage takes (nil: none in the pipeline)
	}{
		{"the shipped pipeline", activities.Pipeline(), nil},
		{"a stage taking a notification's input among the image stages", after(exam.Denoise, toy(contract.NotifyInput{})), contract.NotifyInput{}},
		{"a stage taking a report's input before the report", after(exam.Measure, toy(contract.ReportInput{})), contract.ReportInput{}},
		{"a stage taking the exam alone after the report", after(exam.Render, toy(contract.StageInput{})), contract.StageInput{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pipeline := c.stages.Specs()
			if err := runnable(pipeline); err != nil {
				t.Fatal(err)
			}
			env, rec := newEnvOver(t, nil, pipeline)
			env.ExecuteWorkflow(contract.ExamWorkflow, testInput())
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			for _, spec := range pipeline {
				want := takes[spec.Stage]
				if spec.Stage == "toy" {
					want = c.toy
				}
				if got, fields := fieldsOf(t, rec.inputs[spec.Stage]), fieldsOf(t, want); !slices.Equal(got, fields) {
					t.Errorf("stage %s is given %v, want %v, the fields of the %T it takes", spec.Stage, got, fields, want)
				}
			}
		})
	}
}

// fieldsOf is the fields of v in JSON (v: a json.RawMessage or a value
// to marshal), sorted.
func fieldsOf(t *testing.T, v any) []string {
	t.Helper()
	raw, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return slices.Sorted(maps.Keys(fields))
}
