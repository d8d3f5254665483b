package contract

import (
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"octflow/exam"
)

// An exam's own workflows are started alike by the pipeline (a child it
// abandons) and through the client: the same ID, queue, reuse policy,
// priority and search attributes either way.
func TestAnExamsOwnWorkflowsStartAlikeAsAChildAndThroughTheClient(t *testing.T) {
	sub := exam.Submission{ExamID: "E1", Campus: "north", Priority: exam.Normal, DeviceID: "oct-3"}
	pol := exam.DefaultPolicy()
	for _, c := range []struct {
		name   string
		opts   StartOptions
		id     string
		reused enumspb.WorkflowIdReusePolicy
	}{
		{"export", ExportStartOptions(sub, pol), "export/north/E1", enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY},
		{"review", ReviewStartOptions(sub, pol), "review/north/E1", enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE},
	} {
		t.Run(c.name, func(t *testing.T) {
			child, cl := c.opts.Child(), c.opts.Client()
			if child.WorkflowID != c.id || cl.ID != c.id {
				t.Errorf("IDs %q (child), %q (client), want %q", child.WorkflowID, cl.ID, c.id)
			}
			if child.TaskQueue != exam.WorkflowQueue || cl.TaskQueue != exam.WorkflowQueue {
				t.Errorf("queues %q, %q, want %q", child.TaskQueue, cl.TaskQueue, exam.WorkflowQueue)
			}
			if child.WorkflowIDReusePolicy != c.reused || cl.WorkflowIDReusePolicy != c.reused {
				t.Errorf("reuse %v, %v, want %v", child.WorkflowIDReusePolicy, cl.WorkflowIDReusePolicy, c.reused)
			}
			if child.ParentClosePolicy != enumspb.PARENT_CLOSE_POLICY_ABANDON {
				t.Errorf("a child closes with its parent (%v): it must outlive the pipeline", child.ParentClosePolicy)
			}
			if cl.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL {
				t.Errorf("a client start on a running workflow is %v, want it to fail", cl.WorkflowIDConflictPolicy)
			}
			want := TaskPriority(pol, sub.Priority, sub.Campus)
			if child.Priority != want || cl.Priority != want {
				t.Errorf("priorities %+v, %+v, want the exam's %+v", child.Priority, cl.Priority, want)
			}
			for _, sa := range []temporal.SearchAttributes{child.TypedSearchAttributes, cl.TypedSearchAttributes} {
				if v, _ := sa.GetKeyword(temporal.NewSearchAttributeKeyKeyword(exam.AttrCampus)); v != "north" {
					t.Errorf("search attributes name campus %q, want the exam's", v)
				}
				if v, _ := sa.GetKeyword(temporal.NewSearchAttributeKeyKeyword(exam.AttrDeviceID)); v != "oct-3" {
					t.Errorf("search attributes name device %q, want the exam's", v)
				}
			}
		})
	}
}
