package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"go.temporal.io/sdk/temporal"

	"octflow/exam"
)

// SystemFairnessKey is the fairness key of octflow's own workflows (the
// fleet view, the campus inboxes, the scan sweep): they share the
// workflow queue with exams and must answer while a burst waits there.
const SystemFairnessKey = "system"

// systemWeight is the fairness weight of SystemFairnessKey, a hundred
// times an exam's largest (MaxCampusWeight times a bucket's share, at
// most 1): their tasks are few and short, so a large share never
// crowds exams out.
const systemWeight = 100 * exam.MaxCampusWeight

// maxFairnessKey is the longest fairness key Temporal takes.
const maxFairnessKey = 64

// TaskPriority is the Temporal priority of the tasks of an exam of
// campus in bucket. Its fairness key is the bucket and the campus
// (FairnessKey), and its weight the bucket's share under the policy
// (0.60/0.35/0.05 by default) times the campus's weight (1 by default):
// Temporal dispatches each key in proportion to its weight, so the
// buckets keep their shares and, inside a bucket, the campuses share
// alike. The exam's workflow tasks, its CPU stages and its GPU stages all
// carry it, so an urgent exam's next step takes the urgent share of every
// queue, and a low one still gets its share (decision 0014, and decision
// 0023 for the campuses).
func TaskPriority(pol exam.Policy, bucket exam.Priority, campus string) temporal.Priority {
	return temporal.Priority{FairnessKey: FairnessKey(bucket, campus), FairnessWeight: pol.Share(bucket) * pol.CampusWeight(campus)}
}

// FairnessKey is the fairness key of an exam's tasks: "<bucket>/<campus>"
// ("normal/north"). A campus name too long for Temporal's 64 bytes is
// cut and given a digest of the whole name, so two campuses never share
// a key.
func FairnessKey(bucket exam.Priority, campus string) string {
	key := string(bucket) + "/" + campus
	if len(key) <= maxFairnessKey {
		return key
	}
	sum := sha256.Sum256([]byte(campus))
	digest := "~" + hex.EncodeToString(sum[:6])
	return key[:maxFairnessKey-len(digest)] + digest
}

// BucketOfKey is the bucket of a task whose fairness key is key (see
// FairnessKey; "" for a task of no exam: octflow's own workflows). Keys of
// the first form, the bucket alone, read as that bucket.
func BucketOfKey(key string) exam.Priority {
	bucket, _, _ := strings.Cut(key, "/")
	switch b := exam.Priority(bucket); b {
	case exam.Urgent, exam.Normal, exam.Low:
		return b
	}
	return ""
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
