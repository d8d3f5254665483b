package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"

	"octflow/exam"
	"octflow/temporalsetup"
)

func TestSetupRegistersANamespaceOnceAndRefusesAnAttributeOfAnotherType(t *testing.T) {
	h := newHarness(t, 0)
	c := h.sys.App.Client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := temporalsetup.Namespace{Name: "setup-test", Retention: 48 * time.Hour, SearchAttributes: exam.SearchAttributeTypes()}
	for range 2 { // the second run finds everything in place
		if err := temporalsetup.Ensure(ctx, c, ns); err != nil {
			t.Fatal(err)
		}
	}
	desc, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns.Name})
	if err != nil {
		t.Fatal(err)
	}
	if got := desc.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(); got != ns.Retention {
		t.Errorf("retention %s, want %s", got, ns.Retention)
	}
	attrs, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns.Name})
	if err != nil {
		t.Fatal(err)
	}
	for name, typ := range ns.SearchAttributes {
		if got := attrs.GetCustomAttributes()[name]; got != typ {
			t.Errorf("%s registered as %s, want %s", name, got, typ)
		}
	}

	other := ns
	other.SearchAttributes = map[string]enumspb.IndexedValueType{exam.AttrState: enumspb.INDEXED_VALUE_TYPE_INT}
	if err := temporalsetup.Ensure(ctx, c, other); !errors.Is(err, temporalsetup.ErrTypeMismatch) {
		t.Errorf("an attribute registered as Keyword and wanted as Int: %v, want ErrTypeMismatch", err)
	}
}
