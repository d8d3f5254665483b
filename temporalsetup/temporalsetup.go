// Package temporalsetup prepares a Temporal cluster for octflow through
// its public API: it registers the namespace and octflow's search
// attributes when they are missing. It is what `octflow setup` runs
// against a production cluster and what the dev stack runs when it keeps
// Temporal on PostgreSQL. Every step is idempotent, so it may run on each
// deploy.
package temporalsetup

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Namespace is what octflow needs of its Temporal namespace.
type Namespace struct {
	Name      string
	Retention time.Duration
	// SearchAttributes are the custom search attributes and their types
	// (exam.SearchAttributeTypes).
	SearchAttributes map[string]enumspb.IndexedValueType
}

// Services are the two Temporal gRPC services setup calls; a
// client.Client from the SDK provides both.
type Services interface {
	WorkflowService() workflowservice.WorkflowServiceClient
	OperatorService() operatorservice.OperatorServiceClient
}

// ErrTypeMismatch means a search attribute exists with another type.
// Temporal cannot change a search attribute's type, so an operator must
// decide what to do; setup never removes one.
var ErrTypeMismatch = errors.New("search attribute registered with another type")

// Ensure registers the namespace if it does not exist and adds the search
// attributes it lacks. A freshly registered namespace takes a few seconds
// to reach every frontend's cache, so calls that fail with "not found"
// are retried until ctx ends.
func Ensure(ctx context.Context, s Services, ns Namespace) error {
	if err := ensureNamespace(ctx, s.WorkflowService(), ns); err != nil {
		return err
	}
	return retryNotFound(ctx, func() error { return ensureSearchAttributes(ctx, s.OperatorService(), ns) })
}

func ensureNamespace(ctx context.Context, ws workflowservice.WorkflowServiceClient, ns Namespace) error {
	_, err := ws.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns.Name})
	var notFound *serviceerror.NamespaceNotFound
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &notFound):
		return fmt.Errorf("describe namespace %q: %w", ns.Name, err)
	}
	_, err = ws.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        ns.Name,
		Description:                      "octflow exams",
		WorkflowExecutionRetentionPeriod: durationpb.New(ns.Retention),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register namespace %q: %w", ns.Name, err)
	}
	return nil
}

func ensureSearchAttributes(ctx context.Context, ops operatorservice.OperatorServiceClient, ns Namespace) error {
	have, err := ops.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns.Name})
	if err != nil {
		return fmt.Errorf("list search attributes of %q: %w", ns.Name, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for _, name := range slices.Sorted(maps.Keys(ns.SearchAttributes)) {
		want := ns.SearchAttributes[name]
		got, ok := have.GetCustomAttributes()[name]
		switch {
		case !ok:
			missing[name] = want
		case got != want:
			return fmt.Errorf("%s is %s, octflow needs %s: %w", name, got, want, ErrTypeMismatch)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = ops.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: ns.Name, SearchAttributes: missing,
	})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("add search attributes to %q: %w", ns.Name, err)
	}
	return nil
}

// retryNotFound retries fn while it fails because the namespace has not
// reached the server's cache yet.
func retryNotFound(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		var nsNotFound *serviceerror.NamespaceNotFound
		var notFound *serviceerror.NotFound
		if err == nil || (!errors.As(err, &nsNotFound) && !errors.As(err, &notFound)) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
