package lifecycle

import (
	"context"
	"errors"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"octflow/contract"
	"octflow/exam"
)

// Describe describes an exam's latest pipeline run: under today's
// workflow ID or, for an exam from before campuses were tenants, under
// the ID it had then, if it belongs to the same campus. An exam that
// exists under neither is a *serviceerror.NotFound.
func (c Codec) Describe(ctx context.Context, tc client.Client, ref exam.Ref) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	desc, err := tc.DescribeWorkflowExecution(ctx, contract.ExamWorkflowID(ref), "")
	var nf *serviceerror.NotFound
	if !errors.As(err, &nf) {
		return desc, err
	}
	legacy, lerr := tc.DescribeWorkflowExecution(ctx, contract.LegacyExamWorkflowID(ref.ID), "")
	if lerr != nil {
		if errors.As(lerr, &nf) {
			return nil, err
		}
		return nil, lerr
	}
	var campus string
	if p := legacy.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[exam.AttrCampus]; p == nil ||
		c.Data.FromPayload(p, &campus) != nil || campus != ref.Campus {
		return nil, err
	}
	return legacy, nil
}

// MemoString reads a string memo field of a run's description.
func (c Codec) MemoString(desc *workflowservice.DescribeWorkflowExecutionResponse, field string) string {
	var v string
	if p := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()[field]; p == nil || c.Data.FromPayload(p, &v) != nil {
		return ""
	}
	return v
}
