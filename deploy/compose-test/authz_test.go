package composetest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// TestTheStacksTemporalDecidesByRole runs inside make compose-test
// (run.sh sets OCTFLOW_COMPOSE_TEMPORAL, the frontend's published
// address, and OCTFLOW_COMPOSE_SECRETS, the run's secrets): against the
// stack's own Temporal server, each certificate may do what its role
// may, and is refused the rest. Elsewhere it skips: there is no stack.
func TestTheStacksTemporalDecidesByRole(t *testing.T) {
	addr, secrets := os.Getenv("OCTFLOW_COMPOSE_TEMPORAL"), os.Getenv("OCTFLOW_COMPOSE_SECRETS")
	if addr == "" || secrets == "" {
		t.Skip("no compose stack (run by make compose-test)")
	}
	node := os.Getenv("OCTFLOW_COMPOSE_NODE")
	dial := func(cert, key string) client.Client {
		t.Helper()
		pair, err := tls.LoadX509KeyPair(filepath.Join(secrets, cert), filepath.Join(secrets, key))
		if err != nil {
			t.Fatal(err)
		}
		ca, err := os.ReadFile(filepath.Join(secrets, "ca.pem"))
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		c, err := client.Dial(client.Options{HostPort: addr, Namespace: "octflow", ConnectionOptions: client.ConnectionOptions{
			TLS: &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, ServerName: "temporal", MinVersion: tls.VersionTLS12}}})
		if err != nil {
			t.Fatalf("dial Temporal as %s: %v", cert, err)
		}
		t.Cleanup(c.Close)
		return c
	}
	denied := func(err error) bool {
		var pd *serviceerror.PermissionDenied
		return errors.As(err, &pd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := func(c client.Client, id string) error {
		_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "authz-probe"}, "ExamWorkflow")
		return err
	}

	gpu := dial(filepath.Join("nodes", node, "node.pem"), filepath.Join("nodes", node, "node-key.pem"))
	if err := start(gpu, "exam/authz/probe-node"); !denied(err) {
		t.Errorf("a GPU node's certificate started a workflow: %v, want permission denied", err)
	}
	if err := gpu.TerminateWorkflow(ctx, "octflow-fleet", "", "probe"); !denied(err) {
		t.Errorf("a GPU node's certificate terminated the fleet: %v, want permission denied", err)
	}
	if _, err := gpu.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{}); err == nil {
		t.Error("a GPU node's certificate listed the namespace's workflows")
	}
	api := dial("temporal-api.pem", "temporal-api-key.pem")
	if err := api.TerminateWorkflow(ctx, "octflow-fleet", "", "probe"); !denied(err) {
		t.Errorf("the api's certificate terminated the fleet: %v, want permission denied", err)
	}
	ui := dial("temporal-ui.pem", "temporal-ui-key.pem")
	if err := start(ui, "exam/authz/probe-ui"); !denied(err) {
		t.Errorf("the Web UI's certificate started a workflow: %v, want permission denied", err)
	}
	operator := dial("temporal-operator.pem", "temporal-operator-key.pem")
	if _, err := operator.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{}); err != nil {
		t.Errorf("the operator's certificate cannot list workflows: %v", err)
	}
	// A node's own call, by a node in good standing and by a revoked one.
	describe := func(c client.Client) error {
		_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "octflow"})
		return err
	}
	if err := describe(gpu); err != nil {
		t.Errorf("a GPU node's certificate cannot describe its namespace: %v", err)
	}
	// A node reads what the fleet holds for it, never every node's stages.
	if _, err := gpu.QueryWorkflow(ctx, "octflow-fleet", "", "nodes"); !denied(err) {
		t.Errorf("a GPU node's certificate read every node's stages from the fleet: %v, want permission denied", err)
	}
	if _, err := gpu.QueryWorkflow(ctx, "octflow-fleet", "", "node-state", node); err != nil {
		t.Errorf("a GPU node's certificate cannot read its own state from the fleet: %v", err)
	}
	// Polls, each given a few seconds: an allowed poll waits for a task
	// and ends at its deadline; a refused one is answered at once.
	poll := func(c client.Client, queue string) error {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err := c.WorkflowService().PollActivityTaskQueue(pctx, &workflowservice.PollActivityTaskQueueRequest{
			Namespace: "octflow", TaskQueue: &taskqueuepb.TaskQueue{Name: queue}, Identity: "authz-probe"})
		return err
	}
	if campusNode, campus := os.Getenv("OCTFLOW_COMPOSE_CAMPUS_NODE"), os.Getenv("OCTFLOW_COMPOSE_NODE_CAMPUS"); campusNode != "" {
		bound := dial(filepath.Join("nodes", campusNode, "node.pem"), filepath.Join("nodes", campusNode, "node-key.pem"))
		for _, tc := range []struct {
			who     string
			c       client.Client
			queue   string
			allowed bool
		}{
			{"campus " + campus + "'s node", bound, "oct-gpu-campus-" + campus, true},
			{"campus " + campus + "'s node", bound, "oct-gpu-campus-" + campus + ".node-" + campusNode, true},
			{"campus " + campus + "'s node", bound, "oct-gpu-node-" + campusNode, false},
			{"campus " + campus + "'s node", bound, "oct-gpu", false},
			{"campus " + campus + "'s node", bound, "oct-gpu-campus-demo-campus", false},
			{"campus " + campus + "'s node", bound, "oct-gpu-node-" + node, false},
			{"a node of every campus", gpu, "oct-gpu-campus-" + campus, false},
			{"a node of every campus", gpu, "oct-gpu-campus-" + campus + ".node-" + campusNode, false},
		} {
			if err := poll(tc.c, tc.queue); denied(err) == tc.allowed {
				t.Errorf("%s polls %s: %v, want allowed %v", tc.who, tc.queue, err, tc.allowed)
			}
		}
	}
	if revoked := os.Getenv("OCTFLOW_COMPOSE_REVOKED_NODE"); revoked != "" {
		r := dial(filepath.Join("nodes", revoked, "node.pem"), filepath.Join("nodes", revoked, "node-key.pem"))
		if err := describe(r); !denied(err) {
			t.Errorf("a revoked node's certificate described the namespace: %v, want permission denied", err)
		}
	}
}
