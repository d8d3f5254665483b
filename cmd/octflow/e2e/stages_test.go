package e2e

import (
	"octflow/activities"
	"octflow/exam"
)

// shipped is the pipeline octflow ships, which the tests' systems run.
func shipped() exam.Pipeline { return activities.Pipeline().Specs() }

// activityOf is the activity type shipped's stage s runs as.
func activityOf(s exam.Stage) string {
	spec, _ := shipped().Spec(s)
	return spec.Activity
}

// stageOfActivity is the stage of shipped that runs as the activity type
// name ("" for another activity).
func stageOfActivity(name string) exam.Stage {
	spec, _ := shipped().OfActivity(name)
	return spec.Stage
}
