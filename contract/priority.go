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

// systemWeight is the fairness weight of SystemFairnessKey, ten times
// the most an exam's can be (weightScale): their tasks are few and
// short, so a large share never crowds exams out.
const systemWeight = 1000

// weightScale turns a share (at most 1) into a fairness weight: 60, 35
// and 5 under the default policy for a campus alone in its buckets.
// Temporal gives a key a stride of 1000 ÷ weight in whole numbers
// and counts no weight below 0.001: a low key's part reaches that floor
// only under 1/5,000 of the bucket.
const weightScale = 100

// maxFairnessKey is the longest fairness key Temporal takes.
const maxFairnessKey = 64

// TaskPriority is the Temporal priority of the tasks of an exam of
// campus in bucket: its fairness key (FairnessKey) and a weight of the
// bucket's share under the policy times weightScale (60/35/5 by
// default), times, in the normal and low buckets, the campus's part of it
// (Policy.CampusShare). Temporal dispatches each key in proportion to its
// weight. So the buckets keep their shares while every campus waits in
// them; inside the normal and the low bucket each campus gets its part,
// and a campus's burst does not hold back the others; urgent stages, one
// key for all campuses, go in their order of arrival. The exam's workflow
// tasks, its CPU stages and its GPU stages all carry it (decisions 0014
// and 0023, which says where the shares bend).
func TaskPriority(pol exam.Policy, bucket exam.Priority, campus string) temporal.Priority {
	weight := pol.Share(bucket) * weightScale
	if bucket != exam.Urgent {
		weight *= pol.CampusShare
	}
	return temporal.Priority{FairnessKey: FairnessKey(bucket, campus), FairnessWeight: weight}
}

// FairnessKey is the fairness key of an exam's tasks: "urgent" for every
// urgent one, "<bucket>/<campus>" for the others ("normal/north"). A
// campus name too long for Temporal's 64 bytes is cut and given a digest
// of the whole name, so two campuses never share a key.
func FairnessKey(bucket exam.Priority, campus string) string {
	if bucket == exam.Urgent {
		return string(bucket)
	}
	key := string(bucket) + "/" + campus
	if len(key) <= maxFairnessKey {
		return key
	}
	sum := sha256.Sum256([]byte(campus))
	digest := "~" + hex.EncodeToString(sum[:6])
	return key[:maxFairnessKey-len(digest)] + digest
}

// BucketOfKey is the bucket of a task whose fairness key is key (see
// FairnessKey; "" for a task of no exam: octflow's own workflows). A key
// that is the bucket alone (urgent's, and every key recorded before
// campuses shared the buckets) reads as that bucket.
func BucketOfKey(key string) exam.Priority {
	bucket, _, _ := strings.Cut(key, "/")
	if b := exam.Priority(bucket); b.Known() {
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
