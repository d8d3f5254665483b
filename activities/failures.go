package activities

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"octflow/contract"
)

// withNode is a stage's failure err with the node it failed on in its
// details (contract.FailureDetails), so the workflow's record of the
// attempt and the exam's timeline can name it. Its message, type,
// retryability and requested retry delay are err's; an error that
// already has details, or a cancellation, is returned as it is.
func withNode(err error, node string) error {
	if err == nil || node == "" || errors.Is(err, context.Canceled) {
		return err
	}
	msg, errType := err.Error(), contract.ErrTypeStageFailed
	var opts temporal.ApplicationErrorOptions
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		if app.HasDetails() {
			return err
		}
		msg, errType = app.Message(), app.Type()
		opts.NonRetryable, opts.NextRetryDelay = app.NonRetryable(), app.NextRetryDelay()
	}
	opts.Cause, opts.Details = err, []any{contract.FailureDetails{Node: node}}
	return temporal.NewApplicationErrorWithOptions(msg, errType, opts)
}
