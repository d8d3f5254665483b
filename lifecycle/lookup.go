package lifecycle

import (
	"go.temporal.io/api/workflowservice/v1"
)

// MemoString reads a string memo field of a run's description.
func (c Converters) MemoString(desc *workflowservice.DescribeWorkflowExecutionResponse, field string) string {
	var v string
	if p := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()[field]; p == nil || c.Data.FromPayload(p, &v) != nil {
		return ""
	}
	return v
}
