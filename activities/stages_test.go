package activities

import (
	"strings"
	"testing"

	"octflow/exam"
)

// Every declared stage finds its implementation by its activity type; a
// declaration naming a method that is missing, or one that is no stage,
// is an error the workers report at start instead of a stage that never
// runs.
func TestEveryDeclaredStageHasItsImplementation(t *testing.T) {
	a := &Activities{}
	for _, s := range exam.Stages() {
		if _, err := a.StageFunc(s); err != nil {
			t.Errorf("%s: %v", s.Stage, err)
		}
	}
	for _, tc := range []struct {
		name string
		spec exam.StageSpec
		want string
	}{
		{"missing method", exam.StageSpec{Stage: "vessels", Activity: "MapVessels", GPU: true}, "no method MapVessels"},
		{"not a stage", exam.StageSpec{Stage: "sweep", Activity: "SweepScans"}, "not a stage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.StageFunc(tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("StageFunc(%+v) = %v, want an error saying %q", tc.spec, err, tc.want)
			}
		})
	}
}
