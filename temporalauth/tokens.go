package temporalauth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/encoding/protowire"
)

// TokenBinder binds the activity task tokens the frontend hands a GPU
// node to that node's certificate, and takes from a GPU node only tokens
// bound to it: a task token is an unsigned record (namespace, workflow,
// run, event, attempt) that anyone can write, and the server completes
// whatever running activity a well-formed one names. A node therefore
// completes, fails and heartbeats only the tasks it was given.
//
// The binding is a MAC of the node's CN and the token under Key, added
// to the token as a protobuf field the server does not know (so the
// token still parses where the server reads it before this interceptor:
// its namespace check and the authorizer), checked and taken off before
// the call reaches the server. Key must be the same across restarts and
// replicas (cmd/octflow-temporal derives it from the frontend's TLS key),
// or a restart refuses the tokens of the tasks nodes hold: they then
// run again after their heartbeat timeout.
type TokenBinder struct {
	Key []byte
}

// bindingField is the protobuf field number of the binding: far above
// the token record's own fields.
const bindingField = 4001

const macSize = 16

// Intercept is a grpc.UnaryServerInterceptor for the frontend, inside
// its authorization.
func (b TokenBinder) Intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	cn, node := gpuNodeOf(ctx)
	if !node {
		return handler(ctx, req)
	}
	method := info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]
	if method == "PollActivityTaskQueue" {
		resp, err := handler(ctx, req)
		if r, ok := resp.(*workflowservice.PollActivityTaskQueueResponse); ok && err == nil && len(r.GetTaskToken()) > 0 {
			r.TaskToken = b.bind(cn, r.TaskToken)
		}
		return resp, err
	}
	r, ok := req.(interface{ GetTaskToken() []byte })
	if !ok {
		return handler(ctx, req)
	}
	token, ok := b.unbind(cn, r.GetTaskToken())
	if !ok {
		return nil, serviceerror.NewPermissionDenied("a GPU node completes and heartbeats only the tasks it was given, by their tokens", "")
	}
	switch r := req.(type) {
	case *workflowservice.RespondActivityTaskCompletedRequest:
		r.TaskToken = token
	case *workflowservice.RespondActivityTaskFailedRequest:
		r.TaskToken = token
	case *workflowservice.RespondActivityTaskCanceledRequest:
		r.TaskToken = token
	case *workflowservice.RecordActivityTaskHeartbeatRequest:
		r.TaskToken = token
	default:
		return nil, serviceerror.NewPermissionDenied("a GPU node may not call "+method+" with a task token", "")
	}
	return handler(ctx, req)
}

func (b TokenBinder) mac(cn string, token []byte) []byte {
	m := hmac.New(sha256.New, b.Key)
	m.Write([]byte(cn))
	m.Write([]byte{0})
	m.Write(token)
	return m.Sum(nil)[:macSize]
}

// bind is token with its binding to cn.
func (b TokenBinder) bind(cn string, token []byte) []byte {
	out := append([]byte(nil), token...)
	out = protowire.AppendTag(out, bindingField, protowire.BytesType)
	return protowire.AppendBytes(out, b.mac(cn, token))
}

// unbind is the token bound to cn, without its binding; ok false when
// it is not bound to cn.
func (b TokenBinder) unbind(cn string, bound []byte) (token []byte, ok bool) {
	suffix := len(protowire.AppendBytes(protowire.AppendTag(nil, bindingField, protowire.BytesType), make([]byte, macSize)))
	if len(bound) <= suffix {
		return nil, false
	}
	token, tail := bound[:len(bound)-suffix], bound[len(bound)-suffix:]
	num, typ, n := protowire.ConsumeTag(tail)
	if n < 0 || num != bindingField || typ != protowire.BytesType {
		return nil, false
	}
	mac, m := protowire.ConsumeBytes(tail[n:])
	if m < 0 || !hmac.Equal(mac, b.mac(cn, token)) {
		return nil, false
	}
	return token, true
}

// gpuNodeOf is the CN of the call's client certificate and whether it
// is a GPU node's.
func gpuNodeOf(ctx context.Context) (string, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return "", false
	}
	subject := info.State.PeerCertificates[0].Subject
	return subject.CommonName, RoleOf(&subject) == GPUNode
}
