package temporalauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"os"
	"path/filepath"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	querypb "go.temporal.io/api/query/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/api"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/tasktoken"
	"google.golang.org/grpc/credentials"
)

const ns = "octflow"

func call(method string, req any) *authorization.CallTarget {
	t := &authorization.CallTarget{APIName: api.WorkflowServicePrefix + method, Namespace: ns, Request: req}
	if n, ok := req.(interface{ GetNamespace() string }); ok {
		t.Namespace = n.GetNamespace()
	}
	return t
}

func TestEachRoleMayMakeOnlyItsOwnCalls(t *testing.T) {
	a := Authorizer{Namespace: ns, FleetWorkflowID: "fleet", FleetWorkflowType: "FleetWorkflow", FleetSignal: "node-report",
		FleetNodeQuery: "node-state", FleetQueue: "oct-workflows", GPUQueue: "oct-gpu", WorkerSchedules: []string{"sweep"}}
	exam := &commonpb.WorkflowExecution{WorkflowId: "exam/north/ex-1"}
	fleet := &commonpb.WorkflowExecution{WorkflowId: "fleet"}
	start := &workflowservice.StartWorkflowExecutionRequest{Namespace: ns, WorkflowId: "exam/north/ex-1"}
	terminate := &workflowservice.TerminateWorkflowExecutionRequest{Namespace: ns, WorkflowExecution: exam}
	reset := &workflowservice.ResetWorkflowExecutionRequest{Namespace: ns, WorkflowExecution: exam}
	signalExam := &workflowservice.SignalWorkflowExecutionRequest{Namespace: ns, WorkflowExecution: exam}
	signalFleet := &workflowservice.SignalWorkflowExecutionRequest{Namespace: ns, WorkflowExecution: fleet, SignalName: "node-report"}
	otherSignalToFleet := &workflowservice.SignalWorkflowExecutionRequest{Namespace: ns, WorkflowExecution: fleet, SignalName: "reset-breaker"}
	report := func(edit func(*workflowservice.SignalWithStartWorkflowExecutionRequest)) *workflowservice.SignalWithStartWorkflowExecutionRequest {
		r := &workflowservice.SignalWithStartWorkflowExecutionRequest{Namespace: ns, WorkflowId: "fleet", SignalName: "node-report",
			WorkflowType: &commonpb.WorkflowType{Name: "FleetWorkflow"}, TaskQueue: &taskqueuepb.TaskQueue{Name: "oct-workflows"}}
		if edit != nil {
			edit(r)
		}
		return r
	}
	reportToFleet := report(nil)
	replaceFleet := report(func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) {
		r.WorkflowIdConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING
	})
	fleetOfAnotherType := report(func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) { r.WorkflowType.Name = "ExamWorkflow" })
	fleetOnTheCPUQueue := report(func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) { r.TaskQueue.Name = "oct-cpu" })
	startOverRunning := &workflowservice.StartWorkflowExecutionRequest{Namespace: ns, WorkflowId: "exam/north/ex-1",
		WorkflowIdReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_TERMINATE_IF_RUNNING}
	startBySignal := &workflowservice.SignalWithStartWorkflowExecutionRequest{Namespace: ns, WorkflowId: "exam/north/ex-1"}
	queryFleet := &workflowservice.QueryWorkflowRequest{Namespace: ns, Execution: fleet, Query: &querypb.WorkflowQuery{QueryType: "nodes"}}
	queryNodeState := &workflowservice.QueryWorkflowRequest{Namespace: ns, Execution: fleet, Query: &querypb.WorkflowQuery{QueryType: "node-state"}}
	queryExam := &workflowservice.QueryWorkflowRequest{Namespace: ns, Execution: exam}
	history := &workflowservice.GetWorkflowExecutionHistoryRequest{Namespace: ns, Execution: exam}
	pollGPU := &workflowservice.PollActivityTaskQueueRequest{Namespace: ns, TaskQueue: &taskqueuepb.TaskQueue{Name: "oct-gpu"}}
	pollNode := &workflowservice.PollActivityTaskQueueRequest{Namespace: ns, TaskQueue: &taskqueuepb.TaskQueue{Name: "oct-gpu-node-gpu-remote-1"}}
	pollCPU := &workflowservice.PollActivityTaskQueueRequest{Namespace: ns, TaskQueue: &taskqueuepb.TaskQueue{Name: "oct-cpu"}}
	completeByID := &workflowservice.RespondActivityTaskCompletedByIdRequest{Namespace: ns, WorkflowId: "exam/north/ex-1"}
	completeActivity := &workflowservice.RespondActivityTaskCompletedRequest{Namespace: ns, TaskToken: taskToken(t, "exam/north/ex-1", 5)}
	pollWorkflow := &workflowservice.PollWorkflowTaskQueueRequest{Namespace: ns}
	update := &workflowservice.UpdateWorkflowExecutionRequest{Namespace: ns}
	list := &workflowservice.ListWorkflowExecutionsRequest{Namespace: ns}
	registerNS := &workflowservice.RegisterNamespaceRequest{Namespace: "other"}
	otherNS := &workflowservice.StartWorkflowExecutionRequest{Namespace: "other", WorkflowId: "x"}

	type want map[Role]bool
	for _, tc := range []struct {
		name   string
		target *authorization.CallTarget
		want   want // the roles allowed; every other role is refused
	}{
		{"start an exam", call("StartWorkflowExecution", start), want{API: true}},
		{"terminate an exam", call("TerminateWorkflowExecution", terminate), want{}},
		{"reset an exam", call("ResetWorkflowExecution", reset), want{}},
		{"signal an exam", call("SignalWorkflowExecution", signalExam), want{API: true}},
		{"signal the fleet a node's report", call("SignalWorkflowExecution", signalFleet), want{API: true, GPUNode: true}},
		{"signal the fleet anything else", call("SignalWorkflowExecution", otherSignalToFleet), want{API: true}},
		{"report to the fleet", call("SignalWithStartWorkflowExecution", reportToFleet), want{API: true, Worker: true, GPUNode: true}},
		{"replace the fleet by a report", call("SignalWithStartWorkflowExecution", replaceFleet), want{}},
		{"start the fleet's ID as another workflow", call("SignalWithStartWorkflowExecution", fleetOfAnotherType), want{API: true, Worker: true}},
		{"start the fleet on another queue", call("SignalWithStartWorkflowExecution", fleetOnTheCPUQueue), want{API: true, Worker: true}},
		{"start an exam over a running one", call("StartWorkflowExecution", startOverRunning), want{}},
		{"start an exam by signal", call("SignalWithStartWorkflowExecution", startBySignal), want{API: true, Worker: true}},
		{"query the fleet's every node and stage", call("QueryWorkflow", queryFleet), want{API: true, Worker: true, UI: true}},
		{"ask the fleet for a node's state", call("QueryWorkflow", queryNodeState), want{API: true, Worker: true, GPUNode: true, UI: true}},
		{"query an exam", call("QueryWorkflow", queryExam), want{API: true, Worker: true, UI: true}},
		{"read an exam's history", call("GetWorkflowExecutionHistory", history), want{API: true, Worker: true, UI: true}},
		{"list exams", call("ListWorkflowExecutions", list), want{API: true, Worker: true, UI: true}},
		{"poll the GPU queue", call("PollActivityTaskQueue", pollGPU), want{Worker: true, GPUNode: true}},
		{"poll a node's queue", call("PollActivityTaskQueue", pollNode), want{Worker: true, GPUNode: true}},
		{"poll the CPU queue (reports, exports)", call("PollActivityTaskQueue", pollCPU), want{Worker: true}},
		{"complete an activity by its workflow", call("RespondActivityTaskCompletedById", completeByID), want{Worker: true}},
		{"complete an activity", call("RespondActivityTaskCompleted", completeActivity), want{Worker: true, GPUNode: true}},
		{"poll workflow tasks", call("PollWorkflowTaskQueue", pollWorkflow), want{Worker: true}},
		{"update an exam (a review)", call("UpdateWorkflowExecution", update), want{API: true}},
		{"register a namespace", call("RegisterNamespace", registerNS), want{}},
		{"schedule the sweep", call("CreateSchedule", &workflowservice.CreateScheduleRequest{Namespace: ns, ScheduleId: "sweep"}), want{Worker: true}},
		{"schedule anything else", call("CreateSchedule", &workflowservice.CreateScheduleRequest{Namespace: ns, ScheduleId: "exam-every-minute"}), want{}},
		{"delete a schedule", call("DeleteSchedule", &workflowservice.DeleteScheduleRequest{Namespace: ns, ScheduleId: "sweep"}), want{}},
		{"act in another namespace", call("StartWorkflowExecution", otherNS), want{}},
		{"an operator service call", &authorization.CallTarget{APIName: api.OperatorServicePrefix + "AddSearchAttributes", Namespace: ns}, want{}},
		{"an operator service read", &authorization.CallTarget{APIName: api.OperatorServicePrefix + "ListSearchAttributes", Namespace: ns}, want{API: true, Worker: true, UI: true}},
		{"an admin service call", &authorization.CallTarget{APIName: api.AdminServicePrefix + "DescribeCluster"}, want{}},
		{"the system's information", call("GetSystemInfo", &workflowservice.GetSystemInfoRequest{}), want{API: true, Worker: true, GPUNode: true, UI: true, "": true}},
	} {
		for _, role := range append(roles, "") {
			allowed := tc.want[role] || role == Server || role == Operator
			got, why := a.Decide(role, tc.target)
			if got != allowed {
				name := string(role)
				if name == "" {
					name = "a certificate with no role"
				}
				t.Errorf("%s: %s allowed %v (%s), want %v", tc.name, name, got, why, allowed)
			}
		}
	}
}

func TestTheRoleIsTheCertificatesOwnOU(t *testing.T) {
	for _, tc := range []struct {
		name    string
		subject *pkix.Name
		want    Role
		admin   bool
	}{
		{"a GPU node", &pkix.Name{CommonName: "gpu-remote-1", OrganizationalUnit: []string{"octflow-gpu-node"}}, GPUNode, false},
		{"the server", &pkix.Name{CommonName: "temporal", OrganizationalUnit: []string{"temporal-server"}}, Server, true},
		{"an operator", &pkix.Name{CommonName: "ops", OrganizationalUnit: []string{"octflow-operator"}}, Operator, true},
		{"a CN that looks like a role", &pkix.Name{CommonName: "octflow-operator"}, "", false},
		{"an OU of no role", &pkix.Name{CommonName: "x", OrganizationalUnit: []string{"radiology"}}, "", false},
		{"two roles", &pkix.Name{CommonName: "x", OrganizationalUnit: []string{"octflow-gpu-node", "octflow-operator"}}, "", false},
		{"a role and another OU", &pkix.Name{CommonName: "x", OrganizationalUnit: []string{"radiology", "octflow-api"}}, API, false},
		{"no certificate", nil, "", false},
	} {
		c, err := ClaimMapper{}.GetClaims(&authorization.AuthInfo{TLSSubject: tc.subject})
		if err != nil {
			t.Fatal(err)
		}
		if got := principalOf(c).Role; got != tc.want || (c.System == authorization.RoleAdmin) != tc.admin {
			t.Errorf("%s: role %q, system admin %v; want %q, %v", tc.name, got, c.System == authorization.RoleAdmin, tc.want, tc.admin)
		}
	}
	res, err := Authorizer{Namespace: ns, FleetWorkflowID: "fleet"}.Authorize(context.Background(), nil,
		call("StartWorkflowExecution", &workflowservice.StartWorkflowExecutionRequest{Namespace: ns}))
	if err != nil || res.Decision != authorization.DecisionDeny {
		t.Errorf("a call with no claims: %+v %v, want denied", res, err)
	}
}

func TestARevokedCertificateHasNoRole(t *testing.T) {
	revoked := filepath.Join(t.TempDir(), "revoked")
	if err := os.WriteFile(revoked, []byte("# revoked GPU nodes\nserial=0A:1F # gpu-remote-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := ClaimMapper{Revoked: NewRevoked(revoked)}
	node := func(serial int64) *authorization.AuthInfo {
		subject := pkix.Name{CommonName: "gpu-remote", OrganizationalUnit: []string{"octflow-gpu-node"}}
		cert := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: subject}
		return &authorization.AuthInfo{TLSSubject: &subject,
			TLSConnection: &credentials.TLSInfo{State: tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}}}
	}
	for _, tc := range []struct {
		serial int64
		want   Role
	}{{0x0a1f, ""}, {0x0a20, GPUNode}} {
		c, err := m.GetClaims(node(tc.serial))
		if err != nil {
			t.Fatal(err)
		}
		if got := principalOf(c).Role; got != tc.want {
			t.Errorf("certificate %x: role %q, want %q (revoked: none)", tc.serial, got, tc.want)
		}
	}
	if (ClaimMapper{}).Revoked.Has("a1f") {
		t.Error("no revocation list revokes something")
	}
}

// taskToken is a token as the server issues it for an activity task of
// workflowID scheduled at event scheduled (0: the server's completion by
// workflow and activity ID).
func taskToken(t *testing.T, workflowID string, scheduled int64) []byte {
	t.Helper()
	b, err := tasktoken.NewSerializer().Serialize(tasktoken.NewActivityTaskToken("ns-id", workflowID, "run-1", scheduled,
		"layers-1", "layers", 1, nil, 0, 0, nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A GPU node completes and heartbeats only the tasks it holds, by the
// tokens the server gave them: a token without its scheduled event (the
// server's completion by workflow and activity ID, which a node can make
// up for any exam) or one that does not parse is refused, and a node
// bound to a campus completes that campus's exams' stages only.
func TestANodeCompletesOnlyTheTasksItHolds(t *testing.T) {
	a := Authorizer{Namespace: ns, FleetWorkflowID: "fleet", GPUQueue: "oct-gpu"}
	north, every := Principal{Role: GPUNode, Campus: "north"}, Principal{Role: GPUNode}
	for _, tc := range []struct {
		name        string
		token       []byte
		north, each bool
	}{
		{"a north exam's task", taskToken(t, "exam/north/ex-1", 5), true, true},
		{"a south exam's task", taskToken(t, "exam/south/ex-1", 5), false, true},
		{"a campus whose name starts with north", taskToken(t, "exam/north-2/ex-1", 5), false, true},
		{"by workflow and activity ID", taskToken(t, "exam/north/ex-1", 0), false, false},
		{"not a token", []byte("forged"), false, false},
		{"no token", nil, false, false},
	} {
		for _, call := range []*authorization.CallTarget{
			call("RespondActivityTaskCompleted", &workflowservice.RespondActivityTaskCompletedRequest{Namespace: ns, TaskToken: tc.token}),
			call("RespondActivityTaskFailed", &workflowservice.RespondActivityTaskFailedRequest{Namespace: ns, TaskToken: tc.token}),
			call("RecordActivityTaskHeartbeat", &workflowservice.RecordActivityTaskHeartbeatRequest{Namespace: ns, TaskToken: tc.token}),
		} {
			if got, why := a.DecideFor(north, "gpu-north-1", call); got != tc.north {
				t.Errorf("%s, %s by north's node: %v (%s), want %v", tc.name, call.APIName, got, why, tc.north)
			}
			if got, why := a.DecideFor(every, "gpu-0", call); got != tc.each {
				t.Errorf("%s, %s by a node of every campus: %v (%s), want %v", tc.name, call.APIName, got, why, tc.each)
			}
		}
	}
}

// A GPU node bound to a campus polls its campus's own queue and its own
// node queue, nothing else; a node of every campus never polls a
// campus's own queue.
func TestANodeBoundToACampusPollsItsCampusesQueueOnly(t *testing.T) {
	a := Authorizer{Namespace: ns, FleetWorkflowID: "fleet", GPUQueue: "oct-gpu"}
	mapped := func(ous ...string) Principal {
		c, err := ClaimMapper{}.GetClaims(&authorization.AuthInfo{TLSSubject: &pkix.Name{CommonName: "gpu-north-1", OrganizationalUnit: ous}})
		if err != nil {
			t.Fatal(err)
		}
		return principalOf(c)
	}
	north := mapped("octflow-gpu-node", "campus:north")
	every := mapped("octflow-gpu-node")
	if north != (Principal{Role: GPUNode, Campus: "north"}) || every != (Principal{Role: GPUNode}) {
		t.Fatalf("mapped %+v and %+v", north, every)
	}
	for _, ous := range [][]string{{"octflow-gpu-node", "campus:north", "campus:south"}, {"octflow-gpu-node", "campus:"}} {
		if p := mapped(ous...); p.Role != "" {
			t.Errorf("a certificate with OUs %v has role %q, want none", ous, p.Role)
		}
	}
	poll := func(queue string) *authorization.CallTarget {
		return call("PollActivityTaskQueue", &workflowservice.PollActivityTaskQueueRequest{Namespace: ns, TaskQueue: &taskqueuepb.TaskQueue{Name: queue}})
	}
	for _, tc := range []struct {
		queue       string
		north, each bool
	}{
		{"oct-gpu-campus-north", true, false},
		{"oct-gpu-campus-north.node-gpu-north-1", true, false},
		{"oct-gpu-node-gpu-north-1", false, true},
		{"oct-gpu", false, true},
		{"oct-gpu-campus-south", false, false},
		{"oct-gpu-campus-north-2", false, false},
		{"oct-gpu-campus-north.node-gpu-north-2", false, false},
		{"oct-gpu-campus-north-2.node-gpu-north-1", false, false},
		{"oct-gpu-node-gpu-0", false, true},
		{"oct-cpu", false, false},
	} {
		if got, why := a.DecideFor(north, "gpu-north-1", poll(tc.queue)); got != tc.north {
			t.Errorf("north's node polls %s: %v (%s), want %v", tc.queue, got, why, tc.north)
		}
		if got, why := a.DecideFor(every, "gpu-north-1", poll(tc.queue)); got != tc.each {
			t.Errorf("a node of every campus polls %s: %v (%s), want %v", tc.queue, got, why, tc.each)
		}
	}
}

// A node's completion that names no namespace is refused: the server
// would take the token's.
func TestANodesCompletionNamesItsNamespace(t *testing.T) {
	a := Authorizer{Namespace: ns, GPUQueue: "oct-gpu"}
	target := &authorization.CallTarget{APIName: api.WorkflowServicePrefix + "RespondActivityTaskCompleted",
		Request: &workflowservice.RespondActivityTaskCompletedRequest{TaskToken: taskToken(t, "exam/north/ex-1", 5)}}
	if ok, _ := a.DecideFor(Principal{Role: GPUNode}, "gpu-0", target); ok {
		t.Error("a node's completion naming no namespace was allowed")
	}
	target.Namespace = ns
	if ok, why := a.DecideFor(Principal{Role: GPUNode}, "gpu-0", target); !ok {
		t.Errorf("a node's completion in its namespace was refused: %s", why)
	}
}
