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

// A device's submission and an admin's rerun start an exam's pipeline
// alike but for the reuse of its ID and the eager start of an urgent
// first run.
func TestAnExamsRunsStartAlikeButForReuseAndEagerness(t *testing.T) {
	pol := exam.DefaultPolicy()
	memo := ExamMemo{ScanDigest: "d1", SubmissionID: "s1", DeviceID: "oct-3", Submitter: "dev-north"}
	for _, c := range []struct {
		name     string
		priority exam.Priority
		rerun    bool
		reused   enumspb.WorkflowIdReusePolicy
		eager    bool
		// supersede: the rerun replaces a completed run's report.
		supersede bool
	}{
		{"a submission", exam.Normal, false, enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE, false, false},
		{"an urgent submission", exam.Urgent, false, enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE, true, false},
		{"a rerun", exam.Normal, true, enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY, false, false},
		{"an urgent rerun", exam.Urgent, true, enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY, false, false},
		{"a superseding rerun", exam.Urgent, true, enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sub := exam.Submission{ExamID: "E1", Campus: "north", Priority: c.priority, DeviceID: "oct-3"}
			o := ExamStartOptions(sub, pol, ExamStart{Memo: memo, State: "CREATED", Rerun: c.rerun, Supersede: c.supersede})
			if o.ID != "exam/north/E1" || o.TaskQueue != exam.WorkflowQueue {
				t.Errorf("started as %q on %q", o.ID, o.TaskQueue)
			}
			if o.WorkflowIDReusePolicy != c.reused || o.EnableEagerStart != c.eager {
				t.Errorf("reuse %v, eager %t; want %v, %t", o.WorkflowIDReusePolicy, o.EnableEagerStart, c.reused, c.eager)
			}
			if o.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL || !o.WorkflowExecutionErrorWhenAlreadyStarted {
				t.Errorf("a start on a running run: %v, error %t; want it to fail", o.WorkflowIDConflictPolicy, o.WorkflowExecutionErrorWhenAlreadyStarted)
			}
			if want := TaskPriority(pol, sub.Priority, sub.Campus); o.Priority != want {
				t.Errorf("priority %+v, want the exam's %+v", o.Priority, want)
			}
			want := map[string]any{MemoScanDigest: "d1", MemoSubmissionID: "s1", MemoDeviceID: "oct-3", MemoSubmitter: "dev-north"}
			if len(o.Memo) != len(want) {
				t.Errorf("memo %v, want %v", o.Memo, want)
			}
			for k, v := range want {
				if o.Memo[k] != v {
					t.Errorf("memo %s = %v, want %v", k, o.Memo[k], v)
				}
			}
			sa := o.TypedSearchAttributes
			if v, _ := sa.GetKeyword(temporal.NewSearchAttributeKeyKeyword(exam.AttrState)); v != "CREATED" {
				t.Errorf("starts in state %q, want CREATED", v)
			}
			if v, _ := sa.GetKeyword(temporal.NewSearchAttributeKeyKeyword(exam.AttrCampus)); v != "north" {
				t.Errorf("search attributes name campus %q, want the exam's", v)
			}
		})
	}
}

func TestTheExamsPathEscapesItsIDAndCampus(t *testing.T) {
	for _, c := range []struct {
		ref  exam.Ref
		sub  string
		want string
	}{
		{exam.Ref{Campus: "north", ID: "E1"}, "", "/v1/exams/E1?campus=north"},
		{exam.Ref{Campus: "north", ID: "E1"}, "/report", "/v1/exams/E1/report?campus=north"},
		{exam.Ref{Campus: "st mary", ID: "E/1 a"}, "", "/v1/exams/E%2F1%20a?campus=st+mary"},
	} {
		if got := ExamPath(c.ref, c.sub); got != c.want {
			t.Errorf("ExamPath(%v, %q) = %q, want %q", c.ref, c.sub, got, c.want)
		}
	}
}

// A superseding run's review and export start again under their IDs
// whatever the earlier ones ended as; everything else of their start
// stays the exam's.
func TestASupersedingRunsOwnWorkflowsMayReuseTheirIDs(t *testing.T) {
	sub := exam.Submission{ExamID: "E1", Campus: "north", Priority: exam.Normal}
	pol := exam.DefaultPolicy()
	for _, o := range []StartOptions{ReviewStartOptions(sub, pol), ExportStartOptions(sub, pol)} {
		s := o.Superseding()
		if s.ReusePolicy != enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE {
			t.Errorf("%s: reuse %v, want ALLOW_DUPLICATE", o.ID, s.ReusePolicy)
		}
		if s.ID != o.ID || s.TaskQueue != o.TaskQueue || s.Priority != o.Priority {
			t.Errorf("%s: superseding changed more than the reuse: %+v", o.ID, s)
		}
		if o.ReusePolicy == enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE {
			t.Errorf("%s: the plain start reuses its ID after a completed run", o.ID)
		}
		if s.Client().WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL {
			t.Errorf("%s: a superseding start on a running workflow does not fail", o.ID)
		}
	}
}
