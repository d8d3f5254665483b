package contract

import (
	"go.temporal.io/sdk/temporal"

	"octflow/exam"
)

// SystemFairnessKey is the fairness key of octflow's own workflows (the
// fleet view, the campus inboxes, the scan sweep): they share the
// workflow queue with exams and must answer while a burst waits there.
const SystemFairnessKey = "system"

// systemWeight is the fairness weight of SystemFairnessKey: their tasks
// are few and short, so a large share never crowds exams out.
const systemWeight = 100

// TaskPriority is the Temporal priority of an exam's tasks in bucket: its
// fairness key is the bucket and its weight the bucket's share under the
// policy (60/35/5 by default). The exam's workflow tasks, its CPU stages
// and its GPU stages all carry it, so an urgent exam's next step takes
// the urgent share of every queue, and a low one still gets its share.
func TaskPriority(pol exam.Policy, bucket exam.Priority) temporal.Priority {
	return temporal.Priority{FairnessKey: string(bucket), FairnessWeight: pol.Weight(bucket)}
}

// SystemPriority is the Temporal priority of octflow's own workflows.
func SystemPriority() temporal.Priority {
	return temporal.Priority{FairnessKey: SystemFairnessKey, FairnessWeight: systemWeight}
}

// SubmissionAttributes are the search attributes an exam's workflows
// carry from its submission (the pipeline's and the review's): the Web
// UI and `temporal workflow list --query` filter them by these.
func SubmissionAttributes(sub exam.Submission) []temporal.SearchAttributeUpdate {
	return []temporal.SearchAttributeUpdate{
		temporal.NewSearchAttributeKeyKeyword(exam.AttrPriority).ValueSet(string(sub.Priority)),
		temporal.NewSearchAttributeKeyKeyword(exam.AttrDeviceID).ValueSet(sub.DeviceID),
		temporal.NewSearchAttributeKeyKeyword(exam.AttrCampus).ValueSet(sub.Campus),
	}
}
