package contract_test

import (
	"fmt"

	"octflow/contract"
	"octflow/exam"
)

// Every workflow an exam has is named by its campus and its reference,
// so Temporal's one-open-workflow-per-ID is the lock that makes a resend
// the same exam, and a campus's workflows never collide with another's.
// A campus's report-ready events live in one inbox workflow.
func ExampleExamWorkflowID() {
	r := exam.Ref{Campus: "north-campus", ID: "ex-3f9c0a1b2c3d4e5f60718293"}
	fmt.Println(contract.ExamWorkflowID(r))
	fmt.Println(contract.ReviewWorkflowID(r))
	fmt.Println(contract.InboxWorkflowID(r.Campus))
	fmt.Println(contract.FleetWorkflowID)
	// Output:
	// exam/north-campus/ex-3f9c0a1b2c3d4e5f60718293
	// review/north-campus/ex-3f9c0a1b2c3d4e5f60718293
	// inbox-north-campus
	// octflow-fleet
}

// Every task of an exam (its workflow tasks, its CPU and GPU stages)
// carries Temporal's fairness key and weight: urgent stages one key for
// all campuses, normal and low ones a key per campus weighted by the
// campus's part of the bucket. A bucket that waits always gets its
// share, and inside normal and low each waiting campus gets its part.
// octflow's own workflows share the workflow queue under a key of their
// own.
func ExampleTaskPriority() {
	pol := exam.DefaultPolicy()
	pol.CampusWeights = map[string]float32{"north": 3}
	campuses := []string{"north", "south"} // both sent exams lately; south weighs 1
	for _, campus := range campuses {
		exams := pol.ForCampus(campus, campuses)
		for _, b := range []exam.Priority{exam.Urgent, exam.Normal, exam.Low} {
			p := contract.TaskPriority(exams, b, campus)
			fmt.Printf("%s: key %q, weight %.4g\n", b, p.FairnessKey, p.FairnessWeight)
		}
	}
	sys := contract.SystemPriority()
	fmt.Printf("octflow's own workflows: key %q, weight %v\n", sys.FairnessKey, sys.FairnessWeight)
	// Output:
	// urgent: key "urgent", weight 60
	// normal: key "normal/north", weight 26.25
	// low: key "low/north", weight 3.75
	// urgent: key "urgent", weight 60
	// normal: key "normal/south", weight 8.75
	// low: key "low/south", weight 1.25
	// octflow's own workflows: key "system", weight 1000
}
