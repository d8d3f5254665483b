// Package temporalauth is the authorization of the stack's own Temporal
// server build (cmd/octflow-temporal): who may call what, decided from
// the client certificate the frontend's mTLS already checked. Without it
// any certificate of the stack's CA is a Temporal admin: a GPU node could
// start, terminate or read any exam.
//
// A certificate names its role in its Organizational Unit (OU), which
// deploy/make-certs.sh and deploy/make-node.sh write:
//
//   - temporal-server: the server itself, calling its own frontend (admin)
//   - octflow-operator: the namespace job and people (admin)
//   - octflow-api: the gateway: starts, signals, updates and queries
//     workflows and reads them; never polls, terminates or resets
//   - octflow-worker: the workflow worker: polls and completes workflow
//     and activity tasks, signals-with-start its campuses' inboxes (its
//     workflows start reviews and exports as children, by command),
//     creates the scan sweep's schedule, reads; never starts, signals or
//     updates a workflow otherwise, terminates or resets
//   - octflow-gpu-node: a GPU node: polls the GPU queues (the shared one
//     and the nodes' own; never the CPU or workflow queues, whose tasks
//     are reports, exports and reviews) and completes the tasks it holds
//     (by task token, never by workflow ID), heartbeats, sends its report
//     to the fleet workflow and queries it; nothing else. A node bound to
//     a campus (a second OU, campus:<campus>, which deploy/sign-node.sh
//     writes) polls that campus's own queue and its own node queue there
//     (oct-gpu-campus-<campus>.node-<CN>) only; a node bound to none
//     never polls a campus's queues
//   - temporal-ui: the Web UI: reads
//
// A certificate with no such OU, or several, has no role and may call
// nothing but health checks. Roles other than admin act in octflow's
// namespace only. The package imports go.temporal.io/server's
// authorization types: it is part of the server build, never linked into
// the octflow binary.
package temporalauth

import (
	"context"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common"
	"go.temporal.io/server/common/api"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/tasktoken"
)

// Role is what a certificate may do.
type Role string

// The roles, as certificates name them in their OU.
const (
	Server   Role = "temporal-server"
	Operator Role = "octflow-operator"
	API      Role = "octflow-api"
	Worker   Role = "octflow-worker"
	GPUNode  Role = "octflow-gpu-node"
	UI       Role = "temporal-ui"
)

var roles = []Role{Server, Operator, API, Worker, GPUNode, UI}

// RoleOf is the role a certificate subject names: the one known role
// among its OUs, or "" (none, or more than one).
func RoleOf(subject *pkix.Name) Role {
	if subject == nil {
		return ""
	}
	var found Role
	for _, ou := range subject.OrganizationalUnit {
		if r := Role(ou); slices.Contains(roles, r) {
			if found != "" && found != r {
				return ""
			}
			found = r
		}
	}
	return found
}

// campusOU marks the OU that binds a GPU node's certificate to a campus.
const campusOU = "campus:"

// CampusOf is the campus a certificate subject binds a GPU node to: the
// one campus:<campus> OU among its OUs; "" for none; ok false for
// several, which bind it to nothing it could use.
func CampusOf(subject *pkix.Name) (campus string, ok bool) {
	if subject == nil {
		return "", true
	}
	for _, ou := range subject.OrganizationalUnit {
		if c, found := strings.CutPrefix(ou, campusOU); found {
			if campus != "" || c == "" {
				return "", false
			}
			campus = c
		}
	}
	return campus, true
}

// Principal is what the claims of a certificate carry
// (Claims.Extensions): its role and, for a GPU node, the campus it is
// bound to ("": every campus).
type Principal struct {
	Role   Role
	Campus string
}

// ClaimMapper maps a client certificate to claims: its CN as the subject
// and its Principal (Claims.Extensions). It needs the certificate: a call
// without one has no claims. A certificate whose serial number Revoked
// lists has no role: one node is revoked without replacing the CA.
type ClaimMapper struct {
	Revoked *Revoked
}

// GetClaims is authorization.ClaimMapper's.
func (m ClaimMapper) GetClaims(info *authorization.AuthInfo) (*authorization.Claims, error) {
	c := &authorization.Claims{AuthType: "mtls"}
	if info == nil || info.TLSSubject == nil {
		return c, nil
	}
	c.Subject = info.TLSSubject.CommonName
	if m.Revoked.Has(peerSerial(info)) {
		return c, nil
	}
	role := RoleOf(info.TLSSubject)
	campus, ok := CampusOf(info.TLSSubject)
	if !ok {
		return c, nil // bound to several campuses: no role
	}
	c.Extensions = Principal{Role: role, Campus: campus}
	if role == Server || role == Operator {
		c.System = authorization.RoleAdmin
	}
	return c, nil
}

// AuthInfoRequired is true: only a certificate gives claims.
func (ClaimMapper) AuthInfoRequired() bool { return true }

// Authorizer decides each call from the caller's role (see the package
// doc). The fleet workflow (FleetWorkflowID, of FleetWorkflowType on
// FleetQueue) is the one a GPU node may report to (FleetSignal) and
// ask what it holds for the node (FleetNodeQuery, no other query: the
// others name every node's stages); GPUQueue names the queues it may poll (GPUQueue, and the nodes'
// GPUQueue-node-<node>); WorkerSchedules are the schedules the worker
// may create; Namespace is the one namespace roles other than admin act
// in.
type Authorizer struct {
	Namespace         string
	FleetWorkflowID   string
	FleetWorkflowType string
	FleetSignal       string
	FleetNodeQuery    string
	FleetQueue        string
	GPUQueue          string
	WorkerSchedules   []string
}

// Authorize is authorization.Authorizer's.
func (a Authorizer) Authorize(_ context.Context, claims *authorization.Claims, target *authorization.CallTarget) (authorization.Result, error) {
	subject := ""
	if claims != nil {
		subject = claims.Subject
	}
	if allowed, why := a.decide(principalOf(claims), subject, target); !allowed {
		return authorization.Result{Decision: authorization.DecisionDeny, Reason: why}, nil
	}
	return authorization.Result{Decision: authorization.DecisionAllow}, nil
}

func principalOf(c *authorization.Claims) Principal {
	if c == nil {
		return Principal{}
	}
	p, _ := c.Extensions.(Principal)
	return p
}

// The calls of a worker that completes the activity tasks it holds, by
// their task tokens.
var activityWorker = []string{
	"RecordActivityTaskHeartbeat", "RespondActivityTaskCompleted", "RespondActivityTaskFailed",
	"RespondActivityTaskCanceled", "ShutdownWorker", "RecordWorkerHeartbeat", "DescribeNamespace",
	"GetSystemInfo", "GetClusterInfo",
}

// byID are the calls that complete an activity named by its workflow,
// without its task token: the worker's, never a node's.
var byID = []string{
	"RecordActivityTaskHeartbeatById", "RespondActivityTaskCompletedById", "RespondActivityTaskFailedById",
	"RespondActivityTaskCanceledById",
}

// The further calls of a worker that runs workflows.
var workflowWorker = []string{
	"PollWorkflowTaskQueue", "RespondWorkflowTaskCompleted", "RespondWorkflowTaskFailed",
	"RespondQueryTaskCompleted", "ResetStickyTaskQueue",
}

// The writes of a client that starts and talks to workflows.
var workflowClient = []string{
	"StartWorkflowExecution", "SignalWorkflowExecution", "SignalWithStartWorkflowExecution",
	"UpdateWorkflowExecution",
}

// Decide says whether role may make the call, and why not.
func (a Authorizer) Decide(role Role, target *authorization.CallTarget) (bool, string) {
	return a.decide(Principal{Role: role}, "", target)
}

// DecideFor says whether principal, of a certificate whose CN is
// subject, may make the call, and why not.
func (a Authorizer) DecideFor(p Principal, subject string, target *authorization.CallTarget) (bool, string) {
	return a.decide(p, subject, target)
}

func (a Authorizer) decide(p Principal, subject string, target *authorization.CallTarget) (bool, string) {
	role := p.Role
	if authorization.IsHealthCheckAPI(target.APIName) {
		return true, ""
	}
	switch role {
	case Server, Operator:
		return true, ""
	case "":
		return false, "the client certificate names no octflow role (OU)"
	}
	readOnly := api.GetMethodMetadata(target.APIName).Access == api.AccessReadOnly
	method, ok := strings.CutPrefix(target.APIName, api.WorkflowServicePrefix)
	if !ok {
		// Of the operator service, what reads (the search attributes,
		// for the UI and clients); the rest, and the admin service, are
		// the operators'.
		if strings.HasPrefix(target.APIName, api.OperatorServicePrefix) && readOnly && role != GPUNode {
			return true, ""
		}
		return false, fmt.Sprintf("%s may not call %s: operator and admin services are the operators'", role, target.APIName)
	}
	if target.Namespace != "" && target.Namespace != a.Namespace {
		return false, fmt.Sprintf("%s acts in namespace %s only", role, a.Namespace)
	}
	if terminates(target.Request) {
		return false, fmt.Sprintf("%s may not start a workflow over a running one (a terminating ID policy)", role)
	}
	var allowed bool
	switch role {
	case UI:
		allowed = readOnly
	case API:
		allowed = readOnly || slices.Contains(workflowClient, method)
	case Worker:
		if method == "CreateSchedule" {
			id := ""
			if r, ok := target.Request.(*workflowservice.CreateScheduleRequest); ok {
				id = r.GetScheduleId()
			}
			if !slices.Contains(a.WorkerSchedules, id) {
				return false, fmt.Sprintf("the worker may create the schedules %v only, not %q", a.WorkerSchedules, id)
			}
			return true, ""
		}
		// Of a client's writes, the worker makes one: the report-ready
		// event into its campus's inbox (signal-with-start). Its
		// workflows start their children and signal others by commands.
		allowed = readOnly || method == "PollActivityTaskQueue" || slices.Contains(activityWorker, method) ||
			slices.Contains(byID, method) || slices.Contains(workflowWorker, method) || method == "SignalWithStartWorkflowExecution"
	case GPUNode:
		return a.nodeMay(method, subject, p.Campus, target)
	}
	if !allowed {
		return false, fmt.Sprintf("%s may not call %s", role, method)
	}
	return true, ""
}

// nodeMay decides a GPU node's call (see the package doc).
func (a Authorizer) nodeMay(method, subject, campus string, target *authorization.CallTarget) (bool, string) {
	req := target.Request
	switch method {
	case "PollActivityTaskQueue":
		queue := ""
		if r, ok := req.(*workflowservice.PollActivityTaskQueueRequest); ok {
			queue = r.GetTaskQueue().GetName()
		}
		if campus != "" {
			// Bound to a campus: its campus's queue and its own there
			// (exam.NodeQueueOf: the campus's queue, ".node-", its CN).
			own := a.GPUQueue + "-campus-" + campus
			if queue == own || (subject != "" && queue == own+".node-"+subject) {
				return true, ""
			}
			return false, fmt.Sprintf("a GPU node of campus %s (%s) may poll its campus's queue and its own only, not %q", campus, subject, queue)
		}
		// The nodes' own queues are not told apart: any node serving
		// every campus may take any GPU stage from the shared queue
		// anyway. A campus's own queue is its bound nodes'.
		if queue == a.GPUQueue || strings.HasPrefix(queue, a.GPUQueue+"-node-") {
			return true, ""
		}
		return false, fmt.Sprintf("a GPU node (%s) may poll the shared GPU queues only, not %q", subject, queue)
	case "SignalWithStartWorkflowExecution":
		r, _ := req.(*workflowservice.SignalWithStartWorkflowExecutionRequest)
		if r.GetWorkflowId() != a.FleetWorkflowID || r.GetWorkflowType().GetName() != a.FleetWorkflowType ||
			r.GetTaskQueue().GetName() != a.FleetQueue || r.GetSignalName() != a.FleetSignal || r.GetCronSchedule() != "" {
			return false, "a GPU node may only send its report to the fleet workflow"
		}
		return true, ""
	case "SignalWorkflowExecution":
		r, _ := req.(*workflowservice.SignalWorkflowExecutionRequest)
		if r.GetWorkflowExecution().GetWorkflowId() != a.FleetWorkflowID || r.GetSignalName() != a.FleetSignal {
			return false, "a GPU node may only send its report to the fleet workflow"
		}
		return true, ""
	case "QueryWorkflow":
		r, _ := req.(*workflowservice.QueryWorkflowRequest)
		if r.GetExecution().GetWorkflowId() != a.FleetWorkflowID || r.GetQuery().GetQueryType() != a.FleetNodeQuery {
			return false, fmt.Sprintf("a GPU node may ask the fleet workflow %q only", a.FleetNodeQuery)
		}
		return true, ""
	}
	if slices.Contains(activityWorker, method) {
		return a.nodeHolds(subject, campus, target)
	}
	return false, fmt.Sprintf("%s may not call %s", GPUNode, method)
}

// nodeHolds decides a GPU node's heartbeat or completion by task token:
// in the namespace named, the token must be an activity task's (a token
// without its scheduled event is the server's completion by workflow and
// activity ID, which a node may not use), and, for a node bound to a
// campus, of an exam of that campus. Calls without a token pass. That
// the token was given to this node, TokenBinder decides.
func (a Authorizer) nodeHolds(subject, campus string, target *authorization.CallTarget) (bool, string) {
	r, ok := target.Request.(interface{ GetTaskToken() []byte })
	if !ok {
		return true, ""
	}
	// The server would take the token's namespace for a request that
	// names none.
	if target.Namespace != a.Namespace {
		return false, fmt.Sprintf("a GPU node completes tasks of namespace %s only", a.Namespace)
	}
	t, err := tasktoken.NewSerializer().Deserialize(r.GetTaskToken())
	if err != nil || t.GetScheduledEventId() == common.EmptyEventID {
		return false, fmt.Sprintf("a GPU node (%s) completes the tasks it holds, by the tokens they came with", subject)
	}
	if campus != "" && !strings.HasPrefix(t.GetWorkflowId(), "exam/"+campus+"/") {
		return false, fmt.Sprintf("a GPU node of campus %s (%s) completes that campus's stages only", campus, subject)
	}
	return true, ""
}

// terminates says whether a start would terminate a running workflow of
// its ID (a conflict or reuse policy that does): an admin's act only.
func terminates(req any) bool {
	var conflict enumspb.WorkflowIdConflictPolicy
	var reuse enumspb.WorkflowIdReusePolicy
	switch r := req.(type) {
	case *workflowservice.StartWorkflowExecutionRequest:
		conflict, reuse = r.GetWorkflowIdConflictPolicy(), r.GetWorkflowIdReusePolicy()
	case *workflowservice.SignalWithStartWorkflowExecutionRequest:
		conflict, reuse = r.GetWorkflowIdConflictPolicy(), r.GetWorkflowIdReusePolicy()
	default:
		return false
	}
	return conflict == enumspb.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING ||
		reuse == enumspb.WORKFLOW_ID_REUSE_POLICY_TERMINATE_IF_RUNNING
}

// peerSerial is the serial number of the client certificate a call came
// with, in hex ("" when there is none).
func peerSerial(info *authorization.AuthInfo) string {
	if info == nil || info.TLSConnection == nil || len(info.TLSConnection.State.PeerCertificates) == 0 {
		return ""
	}
	return strings.ToLower(info.TLSConnection.State.PeerCertificates[0].SerialNumber.Text(16))
}

// Revoked is the serial numbers of revoked client certificates, one hex
// number a line (# comments), read from a file and read again when it
// changes (deploy/revoke-node.sh writes it). A nil Revoked revokes
// nothing; a file that cannot be read revokes what it last listed.
type Revoked struct {
	path string

	mu      sync.Mutex
	checked time.Time
	mod     time.Time
	serials map[string]bool
}

// NewRevoked reads serial numbers from path as they change.
func NewRevoked(path string) *Revoked { return &Revoked{path: path} }

// Has says whether serial (hex) is revoked.
func (r *Revoked) Has(serial string) bool {
	if r == nil || serial == "" {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) > time.Second {
		r.checked = now
		if fi, err := os.Stat(r.path); err == nil && !fi.ModTime().Equal(r.mod) {
			if b, err := os.ReadFile(r.path); err == nil {
				r.serials, r.mod = parseSerials(string(b)), fi.ModTime()
			}
		}
	}
	return r.serials[strings.ToLower(serial)]
}

// parseSerials reads hex serial numbers, one a line, with # comments and
// colons (as openssl prints them) allowed.
func parseSerials(text string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		line, _, _ = strings.Cut(line, "#")
		line = strings.ToLower(strings.ReplaceAll(strings.TrimSpace(line), ":", ""))
		line = strings.TrimPrefix(line, "serial=")
		line = strings.TrimLeft(line, "0")
		if line != "" {
			out[line] = true
		}
	}
	return out
}
