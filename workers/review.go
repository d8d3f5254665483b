package workers

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"octflow/contract"
	"octflow/exam"
)

// ReviewOpener starts an exam's ReviewWorkflow for the report stage,
// under the exam's review ID: at most one review per exam, whichever
// attempt of the stage gets there first.
type ReviewOpener struct{ Client client.Client }

// Open starts the review; one that exists already (a retried report
// stage, or the pipeline of an older exam) is left as it is.
func (o ReviewOpener) Open(ctx context.Context, start contract.ReviewStart) error {
	sub := start.Submission
	_, err := o.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                    contract.ReviewWorkflowID(sub.Ref()),
		TaskQueue:             exam.WorkflowQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		Priority:              contract.TaskPriority(start.Policy, sub.Priority, sub.Campus),
		TypedSearchAttributes: temporal.NewSearchAttributes(contract.SubmissionAttributes(sub)...),
	}, contract.ReviewWorkflow, start)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("start review of %s: %w", sub.ExamID, err)
	}
	return nil
}
