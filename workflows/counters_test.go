package workflows

import (
	"slices"
	"testing"

	"octflow/contract"
	"octflow/exam"
)

// mustBeMade fails t, once it ends, for every series c counted that
// Counters(stages) does not list: a series no worker of the workflow
// queue would have made at 0. The test environment's handler carries no
// workflow_type (app's tests check that label): a series is matched by
// its name and the tags the workflow sets.
func (c *counters) mustBeMade(t *testing.T, stages exam.Pipeline) {
	t.Helper()
	made := map[string]bool{}
	for _, s := range Counters(stages) {
		made[seriesKey(s.Name, s.Tags)] = true
	}
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for key := range c.n {
			if !made[key] {
				t.Errorf("a workflow counts %s, which Counters does not list: no worker makes it at 0", key)
			}
		}
	})
}

// Every series is listed once, under a name the workflows count.
func TestCountersListsEachSeriesOnce(t *testing.T) {
	names := []string{IllegalTransitionsCounter, StageHedgesCounter, PromotionsCounter,
		UrgentSLABreachesCounter, ExportsCounter, NodeHealthChangesCounter}
	seen := map[string]bool{}
	listed := map[string]bool{}
	for _, c := range Counters(shipped()) {
		key := c.Workflow + " " + seriesKey(c.Name, c.Tags)
		if seen[key] {
			t.Errorf("%s listed twice", key)
		}
		seen[key] = true
		listed[c.Name] = true
		if !slices.Contains(names, c.Name) {
			t.Errorf("%s listed, no workflow counts it", c.Name)
		}
		if c.Workflow == "" {
			t.Errorf("%s listed with no workflow type", key)
		}
	}
	for _, n := range names {
		if !listed[n] {
			t.Errorf("%s is not listed", n)
		}
	}
}

// The hedges counted are those of the GPU stages of the pipeline the
// workflows run, whichever it is.
func TestTheHedgesCountedAreThoseOfThePipelineRun(t *testing.T) {
	gpu := func(stage exam.Stage) exam.StageSpec {
		return exam.StageSpec{Stage: stage, Activity: string(stage), GPU: true}
	}
	cpu := func(stage exam.Stage) exam.StageSpec { return exam.StageSpec{Stage: stage, Activity: string(stage)} }
	cases := []struct {
		name   string
		stages exam.Pipeline
		want   []exam.Stage
	}{
		{"the shipped pipeline", shipped(), []exam.Stage{exam.Denoise, exam.Layers, exam.Lesions, exam.Measure}},
		{"a stage added on a GPU", exam.Pipeline{gpu(exam.Denoise), gpu("vessels"), cpu(exam.Render), cpu(exam.Notify)},
			[]exam.Stage{exam.Denoise, "vessels"}},
		{"no GPU stage", exam.Pipeline{cpu(exam.Render), cpu(exam.Notify)}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []exam.Stage
			for _, s := range Counters(c.stages) {
				if s.Name != StageHedgesCounter {
					continue
				}
				if s.Workflow != contract.ExamWorkflow {
					t.Errorf("a hedge counted for %s", s.Workflow)
				}
				if st := exam.Stage(s.Tags["stage"]); !slices.Contains(got, st) {
					got = append(got, st)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("hedges counted for %v, want %v", got, c.want)
			}
		})
	}
}
