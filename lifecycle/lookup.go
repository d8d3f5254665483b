package lifecycle

import (
	"context"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"octflow/contract"
	"octflow/exam"
)

// Describe describes an exam's latest pipeline run. An exam Temporal does
// not hold is a *serviceerror.NotFound.
func (c Codec) Describe(ctx context.Context, tc client.Client, ref exam.Ref) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return tc.DescribeWorkflowExecution(ctx, contract.ExamWorkflowID(ref), "")
}

// MemoString reads a string memo field of a run's description.
func (c Codec) MemoString(desc *workflowservice.DescribeWorkflowExecutionResponse, field string) string {
	var v string
	if p := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()[field]; p == nil || c.Data.FromPayload(p, &v) != nil {
		return ""
	}
	return v
}
