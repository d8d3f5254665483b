package workers

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"octflow/activities"
	"octflow/exam"
)

// shipped is the pipeline octflow ships.
var shipped = activities.Pipeline().Specs()

func TestEveryCounterTheWorkflowsKeepIsMadeAtZero(t *testing.T) {
	files, err := filepath.Glob("../workflows/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no workflow sources: %v", err)
	}
	kept := WorkflowCounters(shipped)
	re := regexp.MustCompile(`Counter\("([a-z_]+)"\)`)
	found := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			found++
			if _, ok := kept[m[1]]; !ok {
				t.Errorf("%s keeps %s, which no workflow worker makes at 0 (WorkflowCounters)", filepath.Base(f), m[1])
			}
		}
	}
	if found == 0 {
		t.Error("found no counter in the workflows: the pattern no longer matches their code")
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
		{"the shipped pipeline", shipped, []exam.Stage{exam.Denoise, exam.Layers, exam.Lesions, exam.Measure}},
		{"a stage added on a GPU", exam.Pipeline{gpu(exam.Denoise), gpu("vessels"), cpu(exam.Render), cpu(exam.Notify)},
			[]exam.Stage{exam.Denoise, "vessels"}},
		{"no GPU stage", exam.Pipeline{cpu(exam.Render), cpu(exam.Notify)}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []exam.Stage
			for _, tags := range WorkflowCounters(c.stages)["octflow_stage_hedges_total"] {
				if s := exam.Stage(tags["stage"]); !slices.Contains(got, s) {
					got = append(got, s)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("hedges counted for %v, want %v", got, c.want)
			}
		})
	}
}
