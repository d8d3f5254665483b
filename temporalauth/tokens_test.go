package temporalauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/tasktoken"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// as is a call's context from a client certificate of cn with ous.
func as(cn string, ous ...string) context.Context {
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: cn, OrganizationalUnit: ous}}
	return peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{
		State: tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}}})
}

// A GPU node completes, fails and heartbeats only with the tokens the
// frontend gave it: a token written by hand (one that names a real
// running activity included), or one given to another node, is refused
// before it reaches the server, which sees the token as it issued it.
func TestANodeUsesOnlyTheTaskTokensItWasGiven(t *testing.T) {
	b := TokenBinder{Key: []byte("0123456789abcdef0123456789abcdef")}
	issued, err := tasktoken.NewSerializer().Serialize(tasktoken.NewActivityTaskToken("ns-id", "exam/north/ex-1", "run-1", 5,
		"layers-1", "layers", 1, nil, 0, 0, nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	poll := &grpc.UnaryServerInfo{FullMethod: "/temporal.api.workflowservice.v1.WorkflowService/PollActivityTaskQueue"}
	complete := &grpc.UnaryServerInfo{FullMethod: "/temporal.api.workflowservice.v1.WorkflowService/RespondActivityTaskCompleted"}
	heartbeat := &grpc.UnaryServerInfo{FullMethod: "/temporal.api.workflowservice.v1.WorkflowService/RecordActivityTaskHeartbeat"}
	// The node polls: the token it gets is bound to it, and still parses.
	resp, err := b.Intercept(as("gpu-1", "octflow-gpu-node"), &workflowservice.PollActivityTaskQueueRequest{}, poll,
		func(context.Context, any) (any, error) {
			return &workflowservice.PollActivityTaskQueueResponse{TaskToken: issued}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	given := resp.(*workflowservice.PollActivityTaskQueueResponse).TaskToken
	if parsed, err := tasktoken.NewSerializer().Deserialize(given); err != nil || parsed.GetWorkflowId() != "exam/north/ex-1" {
		t.Fatalf("the bound token does not parse as the server's: %v %v", parsed, err)
	}
	var reached []byte
	server := func(_ context.Context, req any) (any, error) {
		reached = req.(interface{ GetTaskToken() []byte }).GetTaskToken()
		return &workflowservice.RespondActivityTaskCompletedResponse{}, nil
	}
	denied := func(err error) bool {
		var pd *serviceerror.PermissionDenied
		return errors.As(err, &pd)
	}
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		info  *grpc.UnaryServerInfo
		token []byte
		want  []byte // what reaches the server; nil: refused
	}{
		{"the node, with the token it was given", as("gpu-1", "octflow-gpu-node"), complete, given, issued},
		{"the node's heartbeat", as("gpu-1", "octflow-gpu-node"), heartbeat, given, issued},
		{"the node, with a token written by hand", as("gpu-1", "octflow-gpu-node"), complete, issued, nil},
		{"another node, with the first one's token", as("gpu-2", "octflow-gpu-node"), complete, given, nil},
		{"the node, with a binding cut short", as("gpu-1", "octflow-gpu-node"), complete, given[:len(given)-1], nil},
		{"the worker, with a token as issued", as("octflow-worker", "octflow-worker"), complete, issued, issued},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reached = nil
			var req any = &workflowservice.RespondActivityTaskCompletedRequest{TaskToken: tc.token}
			if tc.info == heartbeat {
				req = &workflowservice.RecordActivityTaskHeartbeatRequest{TaskToken: tc.token}
			}
			_, err := b.Intercept(tc.ctx, req, tc.info, server)
			if tc.want == nil {
				if !denied(err) || reached != nil {
					t.Errorf("%v, reached the server with %x; want permission denied", err, reached)
				}
				return
			}
			if err != nil || string(reached) != string(tc.want) {
				t.Errorf("%v; the server got %x, want the token as issued", err, reached)
			}
		})
	}
}
