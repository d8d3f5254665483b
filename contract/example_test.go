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
// carries its bucket and campus as Temporal's fairness key, weighted by
// the bucket's share and the campus's weight: a bucket that waits always
// gets its share, and inside it each waiting campus gets its own.
// octflow's own workflows share the workflow queue under a key of their
// own.
func ExampleTaskPriority() {
	pol := exam.DefaultPolicy()
	pol.CampusWeights = map[string]float32{"north": 2}
	for _, campus := range []string{"north", "south"} {
		for _, b := range []exam.Priority{exam.Urgent, exam.Normal, exam.Low} {
			p := contract.TaskPriority(pol, b, campus)
			fmt.Printf("%s: key %q, weight %.2f\n", b, p.FairnessKey, p.FairnessWeight)
		}
	}
	sys := contract.SystemPriority()
	fmt.Printf("octflow's own workflows: key %q, weight %v\n", sys.FairnessKey, sys.FairnessWeight)
	// Output:
	// urgent: key "urgent/north", weight 1.20
	// normal: key "normal/north", weight 0.70
	// low: key "low/north", weight 0.10
	// urgent: key "urgent/south", weight 0.60
	// normal: key "normal/south", weight 0.35
	// low: key "low/south", weight 0.05
	// octflow's own workflows: key "system", weight 1000
}
