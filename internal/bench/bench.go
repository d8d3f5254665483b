package bench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"octflow/activities"
	"octflow/api"
	"octflow/api/intake"
	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
	"octflow/internal/cost"
	"octflow/lifecycle"
	"octflow/octdicom"
	"octflow/workers"
)

// Uploaders is how many devices send the burst at once; the gateway
// under test must admit that many uploads from the benchmark's token.
const Uploaders = 8

// Config is the scenario `octflow bench` runs: a burst
// of exams through the real HTTP API of an embedded system whose GPU
// nodes are separate processes in simulated GPU mode (each stage sleeps a
// drawn GPU time), with abrupt node kills, transient faults and resends.
type Config struct {
	Exams       int            `json:"exams"`
	Nodes       int            `json:"nodes"`
	GPUsPerNode int            `json:"gpusPerNode"`
	Mix         map[string]int `json:"mix"` // percent per bucket
	StageTime   time.Duration  `json:"stageTime"`
	FailRate    float64        `json:"failRate"`
	Kills       int            `json:"kills"`
	ResendRate  float64        `json:"resendRate"`
	Seed        uint64         `json:"seed"`
	// Campuses is how many campuses send the burst, each from its own
	// device (0 or 1: one), and CampusMix the percent of the exams each
	// sends (none: alike).
	Campuses  int   `json:"campuses,omitempty"`
	CampusMix []int `json:"campusMix,omitempty"`
	// FullVolumes sends full-size phantom cubes and runs the real
	// stages on the nodes' CPUs (no simulated GPU time): to measure data
	// locality, not scheduling.
	FullVolumes bool `json:"fullVolumes,omitempty"`
	// NodeReportEvery is how often each node reports to the fleet view
	// (0: the node's default, as in production).
	NodeReportEvery time.Duration `json:"nodeReportEvery,omitempty"`
	// GrayNode makes the first node a gray one: alive, reporting and
	// never failing, but its simulated GPU time and its probe take this
	// many times as long as the others' (0: none).
	GrayNode float64 `json:"grayNode,omitempty"`
	// GPUFaults is how many GPU faults to inject in simulated GPUs during
	// the burst (an Xid, thermal throttling, an ECC error in turn), each
	// on a random node's random GPU for GPUFaultFor (default 15 s).
	GPUFaults   int           `json:"gpuFaults,omitempty"`
	GPUFaultFor time.Duration `json:"gpuFaultFor,omitempty"`
	// Policy is the scheduling policy the gateway gives the exams.
	Policy exam.Policy `json:"policy"`
	// Node makes the command of a GPU node process: octflow gpuworker
	// with args, and env added to the environment.
	Node func(args, env []string) *exec.Cmd `json:"-"`
	// CPUProfile, when set, receives a CPU profile of this process (the
	// embedded engine, gateway and workers) over the burst: from the
	// first upload to the last exam finished.
	CPUProfile io.Writer `json:"-"`
	// HeapProfile, when set, receives a heap profile of this process
	// taken once the burst has finished, before anything is cleaned up.
	HeapProfile io.Writer `json:"-"`
}

// waitStats summarises waits in seconds.
type waitStats struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func newWaitStats(seconds []float64) waitStats {
	if len(seconds) == 0 {
		return waitStats{}
	}
	slices.Sort(seconds)
	at := func(q float64) float64 { return seconds[min(len(seconds)-1, int(q*float64(len(seconds))))] }
	return waitStats{N: len(seconds), P50: at(0.5), P99: at(0.99), Max: seconds[len(seconds)-1]}
}

// Result is what a run measured; two runs' JSON can be compared.
type Result struct {
	Config Config `json:"config"`
	// Build is the commit and machine that ran it.
	Build     Build     `json:"build"`
	StartedAt time.Time `json:"startedAt"`
	Completed int       `json:"completed"`
	Dead      int       `json:"dead"`
	// DeadExams say why each DEAD exam died: its ID, stage and failure.
	DeadExams []string `json:"deadExams,omitempty"`
	// CompletionRate is completed ÷ exams.
	CompletionRate float64 `json:"completionRate"`
	// DuplicateExecutions counts exam IDs with more than one workflow run;
	// DuplicateReports, exams whose report stage completed more than once.
	DuplicateExecutions int `json:"duplicateExecutions"`
	DuplicateReports    int `json:"duplicateReports"`
	Resends             int `json:"resends"`
	ResendsAnsweredOK   int `json:"resendsAnsweredOK"`
	NodeKills           int `json:"nodeKills"`
	StageRetries        int `json:"stageRetries"`
	// HandedBack counts the retries of attempts that a killed node handed
	// back when it started again (gpuworker.Takes).
	HandedBack int `json:"handedBack"`
	// Kills says which node was killed when.
	Kills []NodeKill `json:"kills"`
	// SubmitS is how long the devices took to upload the burst, and
	// SubmitPerS the gateway's intake: exams accepted per second.
	SubmitS    float64 `json:"submitS"`
	SubmitPerS float64 `json:"submitPerS"`
	// QueueWaitS is, per bucket, the wait from submission to a node
	// taking the exam's first GPU stage.
	QueueWaitS map[string]waitStats `json:"queueWaitS"`
	// CampusQueueWaitS is the same per campus and bucket, when several
	// campuses send the burst.
	CampusQueueWaitS map[string]map[string]waitStats `json:"campusQueueWaitS,omitempty"`
	// SlowestUrgent is the urgent exam that waited longest for its first
	// GPU stage, with its timeline: where its wait went.
	SlowestUrgent slowest `json:"slowestUrgent"`
	// FirstStageRetried counts, per bucket, the exams whose first GPU
	// stage ran again because the attempt a node took failed or was lost
	// with the node; their queue wait ends when that attempt was taken
	// (every try is in the timeline with its own EXECUTING).
	FirstStageRetried map[string]int `json:"firstStageRetried"`
	// StageWaitS is, per bucket and stage, the wait from the stage being
	// queued to it starting on a node (aging and a fallback from a busy
	// node included).
	StageWaitS map[string]map[string]waitStats `json:"stageWaitS"`
	// AgingBoundS is the longest a low exam can wait in its queues
	// before it is urgent (low's aging plus normal's; 0: no aging).
	AgingBoundS float64 `json:"agingBoundS"`
	// ObjectBytesPerExam is what an exam's stages read from the object
	// store, on average (a node's cache hits not counted).
	ObjectBytesPerExam float64 `json:"objectBytesPerExam"`
	// EventsPerExam and WorkflowTasksPerExam are the length of an exam's
	// pipeline history and the workflow tasks it ran, on average (its
	// review workflow not counted); LostWorkflowTasks, how many workflow
	// tasks of all exams timed out or failed and had to run again.
	EventsPerExam        float64 `json:"eventsPerExam"`
	WorkflowTasksPerExam float64 `json:"workflowTasksPerExam"`
	LostWorkflowTasks    int     `json:"lostWorkflowTasks"`
	// Cost is what the burst's exams cost the engine by source (package
	// cost): pipeline and review runs of every exam, the campus inbox,
	// the fleet over the run; CostPerExam divides each source, and the
	// total, by the exams.
	Cost        cost.Breakdown               `json:"cost"`
	CostPerExam map[cost.Source]cost.PerExam `json:"costPerExam"`
	// DispatchLatencyIdleMs is the time from QUEUED to EXECUTING of an
	// exam submitted alone to an idle fleet.
	DispatchLatencyIdleMs waitStats `json:"dispatchLatencyIdleMs"`
	MakespanS             float64   `json:"makespanS"`
	// GPUTimeLimitS is the simulated GPU time of all stages ÷ GPUs: no
	// scheduler can finish sooner.
	GPUTimeLimitS float64 `json:"gpuTimeLimitS"`
	ExamsPerS     float64 `json:"examsPerS"`
	// BareEngineS is how long the same engine took, right after, for as
	// many bare workflows of as many no-op activities as an exam has
	// stages, started the same way; MakespanVsBare is the makespan over
	// it.
	BareEngineS    float64 `json:"bareEngineS"`
	MakespanVsBare float64 `json:"makespanVsBare"`
	// MakespanVsBound is the makespan over the larger of the GPU-time
	// limit and the bare engine's time: what no scheduler on this
	// machine could beat.
	MakespanVsBound float64 `json:"makespanVsBound"`
	// GPUStageLoad is the GPUs' load over the burst, per 10 s from its
	// start; HeldGPUS, how long completed stages held their GPUs in all
	// (the simulated time, and the real work on the phantom).
	GPUStageLoad []StageLoad `json:"gpuStageLoad"`
	HeldGPUS     float64     `json:"heldGpuS"`
	// CPU is the CPU time the burst and the bare run took, per exam.
	CPU CPUUse `json:"cpu"`
	// Requests is what the burst asked of the object store and the
	// engine, per exam.
	Requests Requests `json:"requests"`
	// Nodes is each GPU node over the burst as the fleet judged it, with
	// its stage times; Hedges counts the hedged stage tries by which run
	// won (hedge, original, neither).
	Nodes  []NodeResult       `json:"nodes"`
	Hedges map[string]float64 `json:"hedges,omitempty"`
	// GPUFaults are the faults injected (Config.GPUFaults).
	GPUFaults []GPUFault `json:"gpuFaults,omitempty"`
}

// slowest is one exam's wait and timeline.
type slowest struct {
	ExamID    string            `json:"examId"`
	WaitS     float64           `json:"waitS"`
	CreatedAt time.Time         `json:"createdAt"`
	Timeline  []lifecycle.Entry `json:"timeline"`
}

// ParseMix reads "urgent/normal/low" percentages such as "10/60/30".
func ParseMix(s string) (map[string]int, error) {
	var u, n, l int
	if _, err := fmt.Sscanf(s, "%d/%d/%d", &u, &n, &l); err != nil || u < 0 || n < 0 || l < 0 || u+n+l != 100 {
		return nil, fmt.Errorf("mix %q: want urgent/normal/low percentages adding up to 100", s)
	}
	return map[string]int{string(exam.Urgent): u, string(exam.Normal): n, string(exam.Low): l}, nil
}

// ParseCampusMix reads the percent of the exams each of n campuses sends,
// such as "80/15/5" for three; "" is alike for all.
func ParseCampusMix(s string, n int) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, "/")
	mix, total := make([]int, len(parts)), 0
	for i, p := range parts {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v < 0 {
			return nil, fmt.Errorf("campus mix %q: want whole percentages, one per campus", s)
		}
		mix[i], total = v, total+v
	}
	if len(mix) != n || total != 100 {
		return nil, fmt.Errorf("campus mix %q: want %d percentages adding up to 100, one per campus", s, n)
	}
	return mix, nil
}

// CampusTokens are one campus's device and clinician tokens.
type CampusTokens struct {
	Campus, Device, Clinician string
}

// System is the running octflow the benchmark measures.
type System interface {
	// APIURL is the gateway's base URL.
	APIURL() string
	// Campuses are the campuses the benchmark may send from, each with a
	// device's and a clinician's token; the first is the one of a
	// one-campus run.
	Campuses() []CampusTokens
	// AdminToken is an admin's token.
	AdminToken() string
	// Temporal is a client of the system's Temporal, to count runs.
	Temporal() client.Client
	// NodeEnv is the OCTFLOW_* environment a GPU node needs to join.
	NodeEnv() []string
	// Codec reads the payloads of the system's Temporal histories.
	Converters() lifecycle.Converters
	// MetricsURL is the system process's /metrics.
	MetricsURL() string
}

// Policy is the scheduling policy the benchmark runs exams under: the
// production policy with retries and lost-node detection in seconds.
func Policy() exam.Policy {
	p := exam.DefaultPolicy()
	p.RetryBase, p.RetryCap, p.HeartbeatTimeout, p.StageTimeout = time.Second, 5*time.Second, 5*time.Second, 2*time.Minute
	p.NodeAffinityWait = 5 * time.Second
	return p
}

// Run runs the scenario against sys, starting its GPU nodes in logDir,
// and measures it.
func Run(ctx context.Context, sys System, c Config, logDir string, w io.Writer) (*Result, error) {
	rng := rand.New(rand.NewPCG(c.Seed, 42))
	base := sys.APIURL()
	// The devices keep their connections to the gateway between uploads,
	// one per uploader, as a device's HTTP client does.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = Uploaders
	hc := &http.Client{Timeout: time.Minute, Transport: transport}
	defer transport.CloseIdleConnections()
	all, n := sys.Campuses(), max(1, c.Campuses)
	if n > len(all) {
		return nil, fmt.Errorf("bench: %d campuses asked for, the system has %d", n, len(all))
	}
	all = all[:n]
	// A campus's exams are sent by its device and read by its clinician.
	campuses := make([]string, len(all))
	devices, clinicians := make([]*api.Client, len(all)), make([]*api.Client, len(all))
	for i, ct := range all {
		campuses[i] = ct.Campus
		devices[i] = &api.Client{Base: base, Token: ct.Device, HTTP: hc}
		clinicians[i] = &api.Client{Base: base, Token: ct.Clinician, HTTP: hc}
	}
	device, clinician := devices[0], clinicians[0]
	admin := &api.Client{Base: base, Token: sys.AdminToken(), HTTP: hc}

	fleet := newFleet(c, sys.NodeEnv(), logDir)
	defer fleet.stopAll()
	for i := range c.Nodes {
		if err := fleet.start(i); err != nil {
			return nil, err
		}
	}
	if err := waitNodesUp(ctx, admin, c.Nodes); err != nil {
		return nil, err
	}
	mode := fmt.Sprintf("stage time %v (simulated GPU mode)", c.StageTime)
	if c.FullVolumes {
		mode = "full-size cubes through the real stages on the nodes' CPUs"
	}
	fmt.Fprintf(w, "octflow bench: %d exams (%d/%d/%d %% urgent/normal/low), %d nodes × %d simulated GPUs, %s, fail rate %.2f, %d kills, node affinity wait %v\n",
		c.Exams, c.Mix[string(exam.Urgent)], c.Mix[string(exam.Normal)], c.Mix[string(exam.Low)],
		c.Nodes, c.GPUsPerNode, mode, c.FailRate, c.Kills, c.Policy.NodeAffinityWait)
	if len(campuses) > 1 {
		fmt.Fprintf(w, "campuses %s, sending %s %% of the exams\n", strings.Join(campuses, ", "), mixString(c.CampusMix, len(campuses)))
	}
	if c.GrayNode > 0 {
		fmt.Fprintf(w, "gray node %s: its simulated GPU time and probe take %.1f × the others'\n", nodeID(grayNode), c.GrayNode)
	}

	res := &Result{Config: c, Build: readBuild(), QueueWaitS: map[string]waitStats{}, StageWaitS: map[string]map[string]waitStats{},
		FirstStageRetried: map[string]int{}}
	// Dispatch latency: exams sent one at a time to an idle fleet.
	var idle []float64
	for i := range probes {
		id := fmt.Sprintf("probe-%d", i)
		scan, err := benchScan(c.Seed*1_000_000+900_000+uint64(i), c.FullVolumes)
		if err != nil {
			return nil, err
		}
		if _, _, err := device.Submit(ctx, intake.Meta{ExamID: id, Priority: string(exam.Normal)}, scan); err != nil {
			return nil, err
		}
		if err := waitExams(ctx, sys.Temporal(), campuses[:1], i+1, 10*time.Minute); err != nil {
			return nil, err
		}
		var tl []lifecycle.Entry
		if err := clinician.Get(ctx, "/v1/exams/"+id+"/events", &tl); err != nil {
			return nil, err
		}
		if q, e := firstTransition(tl, lifecycle.Queued), firstTransition(tl, lifecycle.Executing); q != nil && e != nil {
			idle = append(idle, float64(e.At.Sub(q.At).Milliseconds()))
		}
	}
	res.DispatchLatencyIdleMs = newWaitStats(idle)

	// The burst.
	type sent struct {
		id       string
		priority exam.Priority
		scan     []byte
		resend   bool
		campus   int // index in campuses
	}
	// The campuses are drawn from a stream of their own, so that a
	// one-campus run draws what it always did.
	campusRNG := rand.New(rand.NewPCG(c.Seed, 43))
	exams := make([]sent, c.Exams)
	for i := range exams {
		p := exam.Low
		switch x := rng.IntN(100); {
		case x < c.Mix[string(exam.Urgent)]:
			p = exam.Urgent
		case x < c.Mix[string(exam.Urgent)]+c.Mix[string(exam.Normal)]:
			p = exam.Normal
		}
		scan, err := benchScan(c.Seed*1_000_000+uint64(i), c.FullVolumes)
		if err != nil {
			return nil, err
		}
		exams[i] = sent{id: fmt.Sprintf("bench-%05d", i), priority: p, scan: scan, resend: rng.Float64() < c.ResendRate}
		if len(campuses) > 1 {
			exams[i].campus = drawCampus(campusRNG, c.CampusMix, len(campuses))
		}
	}
	if c.CPUProfile != nil {
		if err := pprof.StartCPUProfile(c.CPUProfile); err != nil {
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
	}
	profiling := c.CPUProfile != nil
	defer func() {
		if profiling {
			pprof.StopCPUProfile()
		}
	}()
	res.StartedAt = time.Now()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watched := watchNodes(watchCtx, admin, res.StartedAt)
	systemCPU0, nodesCPU0 := selfCPU(), fleet.cpu()
	counted := func() counterSet { return scrapeAll(ctx, append([]string{sys.MetricsURL()}, fleet.metricsURLs()...)) }
	counts0 := counted()
	estimate := time.Duration(float64(c.Exams*4) * float64(c.StageTime) / float64(c.Nodes*c.GPUsPerNode))
	if c.FullVolumes {
		estimate = 0 // no simulated GPU time: no such limit
	}
	killsDone := make(chan []NodeKill, 1)
	go func() { killsDone <- fleet.killSome(ctx, rng.Uint64(), c.Kills, estimate) }()
	faultsDone := make(chan []GPUFault, 1)
	// Its own draw, so a run without faults draws what it always did.
	go func() {
		faultsDone <- fleet.injectFaults(ctx, c.Seed, c.GPUFaults, cmp.Or(c.GPUFaultFor, 15*time.Second), estimate)
	}()

	var mu sync.Mutex
	var submitErr error
	// refs are the exams' references, as the gateway answered them.
	refs := make(map[string]exam.Ref, len(exams))
	jobs := make(chan sent)
	var wg sync.WaitGroup
	for range Uploaders {
		wg.Go(func() {
			for e := range jobs {
				meta := intake.Meta{ExamID: e.id, Priority: string(e.priority), Eye: "OD"}
				st, _, err := devices[e.campus].Submit(ctx, meta, e.scan)
				okResend := false
				if err == nil && e.resend {
					_, code, rerr := devices[e.campus].Submit(ctx, meta, e.scan)
					err, okResend = rerr, code == http.StatusOK
				}
				mu.Lock()
				if err == nil {
					refs[e.id] = exam.Ref{Campus: campuses[e.campus], ID: st.ExamID}
				}
				if err != nil && submitErr == nil {
					submitErr = fmt.Errorf("submit %s: %w", e.id, err)
				}
				if e.resend {
					res.Resends++
					if okResend {
						res.ResendsAnsweredOK++
					}
				}
				mu.Unlock()
			}
		})
	}
	for _, e := range exams {
		jobs <- e
	}
	close(jobs)
	wg.Wait()
	if submitErr != nil {
		return nil, submitErr
	}
	res.SubmitS = time.Since(res.StartedAt).Seconds()
	res.SubmitPerS = float64(c.Exams) / res.SubmitS
	fmt.Fprintf(w, "submitted %d exams in %.1f s (%.1f exams/s through the gateway); waiting for them (GPU-time limit %.0f s)\n",
		c.Exams, res.SubmitS, res.SubmitPerS, estimate.Seconds())
	// How long the burst may go without an exam finishing.
	wait := max(10*time.Minute, 5*estimate)
	if c.FullVolumes {
		wait = max(wait, time.Duration(c.Exams)*2*time.Minute)
	}
	if err := waitExams(ctx, sys.Temporal(), campuses, probes+c.Exams, wait); err != nil {
		return nil, err
	}
	res.CPU.SystemMsPerExam = float64((selfCPU() - systemCPU0).Milliseconds()) / float64(c.Exams)
	res.CPU.NodesMsPerExam = float64((fleet.cpu() - nodesCPU0).Milliseconds()) / float64(c.Exams)
	counts1 := counted()
	res.Requests = requestsPerExam(counts0, counts1, c.Exams)
	res.Hedges = hedgesOf(counts0, counts1)
	stopWatch()
	res.Nodes = <-watched
	if c.GrayNode > 0 {
		for i := range res.Nodes {
			res.Nodes[i].Gray = res.Nodes[i].Node == nodeID(grayNode)
		}
	}
	if profiling {
		pprof.StopCPUProfile()
		profiling = false
	}
	if c.HeapProfile != nil {
		runtime.GC() // the profile shows what is live, not what awaits collection
		if err := pprof.Lookup("heap").WriteTo(c.HeapProfile, 0); err != nil {
			return nil, fmt.Errorf("heap profile: %w", err)
		}
	}
	res.Kills = <-killsDone
	res.NodeKills = len(res.Kills)
	res.GPUFaults = <-faultsDone

	// Measure from each exam's status, timeline and history.
	waits := map[exam.Priority][]float64{}
	campusWaits := map[string]map[exam.Priority][]float64{}
	stageWaits := map[exam.Priority]map[exam.Stage][]float64{}
	var bytesRead int64
	var events, workflowTasks int
	var last time.Time
	for _, e := range exams {
		st, err := clinicians[e.campus].Status(ctx, e.id)
		if err != nil {
			return nil, err
		}
		var tl []lifecycle.Entry
		if err := clinicians[e.campus].Get(ctx, "/v1/exams/"+e.id+"/events", &tl); err != nil {
			return nil, err
		}
		switch st.State {
		case lifecycle.Completed:
			res.Completed++
		case lifecycle.Dead:
			res.Dead++
			why := "no failure recorded"
			if f := st.LastFailure; f != nil {
				why = fmt.Sprintf("%s attempt %d: %s (%s)", f.Stage, f.Attempt, f.Message, f.Type)
				// How the attempts before it ended: their own failures or
				// lost with a node.
				for _, t := range tl {
					if t.To == lifecycle.RetryWait && t.Stage == f.Stage {
						why += fmt.Sprintf("; attempt %v: %v on %s", t.Info["failedAttempt"], t.Info["failureType"], t.Actor)
					}
				}
			}
			res.DeadExams = append(res.DeadExams, e.id+": "+why)
		}
		facts, err := historyFacts(ctx, sys, refs[e.id])
		if err != nil {
			return nil, err
		}
		bytesRead += facts.bytesRead
		events += facts.events
		workflowTasks += facts.workflowTasks
		res.LostWorkflowTasks += facts.lostWorkflowTasks
		if x := firstTransition(tl, lifecycle.Executing); x != nil {
			if retried(tl, x.Stage) {
				res.FirstStageRetried[string(e.priority)]++
			}
			wait := x.At.Sub(st.CreatedAt).Seconds()
			waits[e.priority] = append(waits[e.priority], wait)
			if len(campuses) > 1 {
				campus := campuses[e.campus]
				if campusWaits[campus] == nil {
					campusWaits[campus] = map[exam.Priority][]float64{}
				}
				campusWaits[campus][e.priority] = append(campusWaits[campus][e.priority], wait)
			}
			if e.priority == exam.Urgent && wait > res.SlowestUrgent.WaitS {
				res.SlowestUrgent = slowest{ExamID: e.id, WaitS: wait, CreatedAt: st.CreatedAt, Timeline: tl}
			}
		}
		if stageWaits[e.priority] == nil {
			stageWaits[e.priority] = map[exam.Stage][]float64{}
		}
		res.GPUStageLoad = gpuLoad(res.GPUStageLoad, res.StartedAt, facts.gpuHeld, tl)
		for stage, wait := range waitsPerStage(tl) {
			stageWaits[e.priority][stage] = append(stageWaits[e.priority][stage], wait)
		}
		reports := 0
		for _, t := range tl {
			if t.To == lifecycle.RetryWait {
				res.StageRetries++
				if t.Info["failureType"] == contract.ErrTypeNodeLost {
					res.HandedBack++
				}
			}
			if t.Stage == exam.Render && t.From == lifecycle.Executing && t.To != lifecycle.RetryWait {
				reports++
			}
		}
		if reports > 1 {
			res.DuplicateReports++
		}
		if x := firstTransition(tl, lifecycle.Completed); x != nil && x.At.After(last) {
			last = x.At
		}
	}
	for p, ws := range waits {
		res.QueueWaitS[string(p)] = newWaitStats(ws)
	}
	for campus, per := range campusWaits {
		if res.CampusQueueWaitS == nil {
			res.CampusQueueWaitS = map[string]map[string]waitStats{}
		}
		res.CampusQueueWaitS[campus] = map[string]waitStats{}
		for p, ws := range per {
			res.CampusQueueWaitS[campus][string(p)] = newWaitStats(ws)
		}
	}
	for p, per := range stageWaits {
		res.StageWaitS[string(p)] = map[string]waitStats{}
		for stage, ws := range per {
			res.StageWaitS[string(p)][string(stage)] = newWaitStats(ws)
		}
	}
	res.HeldGPUS = heldGPUSeconds(res.GPUStageLoad)
	res.ObjectBytesPerExam = float64(bytesRead) / float64(c.Exams)
	res.EventsPerExam = float64(events) / float64(c.Exams)
	examRefs := make([]exam.Ref, 0, len(exams))
	for _, e := range exams {
		examRefs = append(examRefs, refs[e.id])
	}
	breakdown, err := examCost(ctx, sys, examRefs, campuses)
	if err != nil {
		return nil, err
	}
	res.Cost = breakdown
	res.CostPerExam = map[cost.Source]cost.PerExam{"total": res.Cost.Total().Per(c.Exams)}
	for src, counts := range res.Cost.Sources {
		res.CostPerExam[src] = counts.Per(c.Exams)
	}
	res.WorkflowTasksPerExam = float64(workflowTasks) / float64(c.Exams)
	if c.Policy.AgingAfter(exam.Low) > 0 && c.Policy.AgingAfter(exam.Normal) > 0 {
		res.AgingBoundS = (c.Policy.AgingAfter(exam.Low) + c.Policy.AgingAfter(exam.Normal)).Seconds()
	}
	for _, campus := range campuses {
		dups, err := duplicateRuns(ctx, sys.Temporal(), contract.ExamWorkflowID(exam.Ref{Campus: campus}))
		if err != nil {
			return nil, err
		}
		res.DuplicateExecutions += dups
	}
	res.CompletionRate = float64(res.Completed) / float64(c.Exams)
	res.MakespanS = last.Sub(res.StartedAt).Seconds()
	res.GPUTimeLimitS = estimate.Seconds()
	if res.MakespanS > 0 {
		res.ExamsPerS = float64(res.Completed) / res.MakespanS
	}
	// The same engine with nothing of octflow on it: the bound that
	// settings and hardware set.
	fmt.Fprintf(w, "running %d bare workflows of %d no-op activities on the same engine\n", c.Exams, len(shipped()))
	bareCPU0 := selfCPU()
	bare, err := runBare(ctx, sys.Temporal(), workers.WorkflowWorkerOptions("bench-bare", 0), c.Exams, len(shipped()),
		res.StartedAt.Format("150405"))
	if err != nil {
		return nil, err
	}
	res.BareEngineS = bare.Seconds()
	res.CPU.BareMsPerWorkflow = float64((selfCPU() - bareCPU0).Milliseconds()) / float64(c.Exams)
	res.MakespanVsBare = res.MakespanS / res.BareEngineS
	res.MakespanVsBound = res.MakespanS / max(res.BareEngineS, res.GPUTimeLimitS)
	printBench(w, res)
	return res, nil
}

// drawCampus draws the campus of an exam: by mix's percentages, or
// alike among n without one.
func drawCampus(rng *rand.Rand, mix []int, n int) int {
	if len(mix) != n {
		return rng.IntN(n)
	}
	x := rng.IntN(100)
	for i, pct := range mix {
		if x < pct {
			return i
		}
		x -= pct
	}
	return n - 1
}

// mixString is the campus mix as the command line writes it.
func mixString(mix []int, n int) string {
	if len(mix) != n {
		return fmt.Sprintf("alike (%d each)", 100/n)
	}
	parts := make([]string, n)
	for i, pct := range mix {
		parts[i] = strconv.Itoa(pct)
	}
	return strings.Join(parts, "/")
}

// benchScan is a phantom exam. The benchmark measures scheduling, not
// imaging, so scans are tiny and their GPU time is simulated; with
// full, they are full-size cubes for the real stages.
func benchScan(seed uint64, full bool) ([]byte, error) {
	opts := imaging.PhantomOptions{Seed: seed, Frames: 3, Rows: 96, Cols: 64}
	if full {
		opts = imaging.PhantomOptions{Seed: seed}
	}
	p := imaging.NewPhantom(opts)
	var buf bytes.Buffer
	uid := fmt.Sprintf("2.25.%d", 1_000_000+seed)
	if err := octdicom.WriteDICOM(&buf, p.Volume, octdicom.Header{SOPInstanceUID: uid + ".3", StudyInstanceUID: uid + ".1",
		SeriesInstanceUID: uid + ".2", PatientID: fmt.Sprintf("BENCH-%d", seed)}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// waitsPerStage is, for each stage in a timeline, the seconds from its
// first QUEUED to its first EXECUTING.
func waitsPerStage(tl []lifecycle.Entry) map[exam.Stage]float64 {
	queued := map[exam.Stage]time.Time{}
	out := map[exam.Stage]float64{}
	for _, e := range tl {
		switch _, seen := out[e.Stage]; {
		case e.Stage == "" || seen:
		case e.To == lifecycle.Queued:
			if _, ok := queued[e.Stage]; !ok {
				queued[e.Stage] = e.At
			}
		case e.To == lifecycle.Executing:
			if q, ok := queued[e.Stage]; ok {
				out[e.Stage] = e.At.Sub(q).Seconds()
			}
		}
	}
	return out
}

// examFacts is what the benchmark reads from an exam's history.
type examFacts struct {
	// bytesRead sums what the stages read from the object store.
	bytesRead int64
	// events and workflowTasks count the history's events and the
	// workflow tasks it ran; lostWorkflowTasks, those that timed out or
	// failed and ran again.
	events, workflowTasks, lostWorkflowTasks int
	// gpuHeld are the spans its completed stages held a GPU.
	gpuHeld []contract.Span
}

// retried reports whether a try of stage failed or was lost with its
// node and was retried (an outage's wait is not such a try).
func retried(tl []lifecycle.Entry, stage exam.Stage) bool {
	for _, e := range tl {
		if e.To == lifecycle.RetryWait && e.Stage == stage && e.Info["outcome"] != string(contract.Unreachable) {
			return true
		}
	}
	return false
}

func historyFacts(ctx context.Context, sys System, ref exam.Ref) (examFacts, error) {
	iter := sys.Temporal().GetWorkflowHistory(ctx, contract.ExamWorkflowID(ref), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var f examFacts
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			return f, fmt.Errorf("history of %s: %w", ref.ID, err)
		}
		f.events++
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			f.workflowTasks++
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			f.lostWorkflowTasks++
		}
		a := ev.GetActivityTaskCompletedEventAttributes()
		if a == nil {
			continue
		}
		var out contract.StageOutput
		if sys.Converters().Data.FromPayloads(a.GetResult(), &out) != nil {
			continue
		}
		f.bytesRead += out.ObjectBytesRead
		if out.GPUHeld != nil {
			f.gpuHeld = append(f.gpuHeld, *out.GPUHeld)
		}
	}
	return f, nil
}

// examCost reads what the burst's exams cost the engine from the
// histories: every exam's pipeline and review runs, the campuses'
// inboxes, and the fleet.
func examCost(ctx context.Context, sys System, exams []exam.Ref, campuses []string) (cost.Breakdown, error) {
	b := cost.Breakdown{Exams: len(exams), Sources: map[cost.Source]cost.Counts{}}
	add := func(src cost.Source, workflowID string) error {
		c, err := cost.Workflow(ctx, sys.Temporal(), workflowID)
		if err != nil {
			return err
		}
		sum := b.Sources[src]
		sum.Add(c)
		b.Sources[src] = sum
		return nil
	}
	for _, ref := range exams {
		if err := add(cost.Pipeline, contract.ExamWorkflowID(ref)); err != nil {
			return b, err
		}
		if err := add(cost.Review, contract.ReviewWorkflowID(ref)); err != nil {
			return b, err
		}
	}
	for _, campus := range campuses {
		if err := add(cost.Inbox, contract.InboxWorkflowID(campus)); err != nil {
			return b, err
		}
	}
	return b, add(cost.Fleet, contract.FleetWorkflowID)
}

func firstTransition(tl []lifecycle.Entry, to lifecycle.State) *lifecycle.Entry {
	for i := range tl {
		if tl[i].To == to {
			return &tl[i]
		}
	}
	return nil
}

// waitNodesUp waits until the fleet view shows n nodes up.
func waitNodesUp(ctx context.Context, admin *api.Client, n int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var nodes []api.NodeView
		if admin.Get(ctx, "/v1/nodes", &nodes) == nil {
			up := 0
			for _, v := range nodes {
				if v.Status == "up" {
					up++
				}
			}
			if up >= n {
				return nil
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return errors.New("bench: GPU nodes did not come up within 2 minutes")
}

// probes is how many exams the bench sends one at a time to an idle fleet
// before the burst.
const probes = 3

// waitExams waits until n exams of the campuses (the bench's own) are
// COMPLETED or DEAD, as Temporal's visibility counts them. It gives up
// only when none has finished for stall: a burst of any size is waited
// for as long as it moves.
func waitExams(ctx context.Context, tc client.Client, campuses []string, n int, stall time.Duration) error {
	ids := make([]string, len(campuses))
	for i, campus := range campuses {
		ids[i] = fmt.Sprintf("WorkflowId STARTS_WITH '%s'", contract.ExamWorkflowID(exam.Ref{Campus: campus}))
	}
	query := fmt.Sprintf("(%s) AND %s IN ('%s', '%s')", strings.Join(ids, " OR "), exam.AttrState, lifecycle.Completed, lifecycle.Dead)
	deadline, finished := time.Now().Add(stall), int64(-1)
	for {
		resp, err := tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
		if err == nil {
			if resp.GetCount() >= int64(n) {
				return nil
			}
			if resp.GetCount() > finished {
				finished, deadline = resp.GetCount(), time.Now().Add(stall)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: %d of %d exams of %s finished, none in the last %v (last error: %v)", max(finished, 0), n, strings.Join(campuses, ", "), stall, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// duplicateRuns counts workflow IDs with the prefix that ran more than once.
func duplicateRuns(ctx context.Context, tc client.Client, prefix string) (int, error) {
	runs := map[string]int{}
	var token []byte
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowId STARTS_WITH '%s'", prefix), PageSize: 1000, NextPageToken: token})
		if err != nil {
			return 0, err
		}
		for _, e := range resp.GetExecutions() {
			runs[e.GetExecution().GetWorkflowId()]++
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	dup := 0
	for _, n := range runs {
		if n > 1 {
			dup++
		}
	}
	return dup, nil
}

func printBench(w io.Writer, r *Result) {
	dirty := ""
	if r.Build.Modified {
		dirty = " with local changes"
	}
	fmt.Fprintf(w, "\nbuild %s%s, %s, %d CPUs\n", r.Build.ShortRevision(), dirty, r.Build.GoVersion, r.Build.CPUs)
	fmt.Fprintf(w, "\ncompleted %d/%d (%.1f %%), dead %d, duplicate executions %d, duplicate reports %d\n",
		r.Completed, r.Config.Exams, 100*r.CompletionRate, r.Dead, r.DuplicateExecutions, r.DuplicateReports)
	for _, d := range r.DeadExams {
		fmt.Fprintf(w, "  DEAD %s\n", d)
	}
	fmt.Fprintf(w, "resends %d (answered 200: %d), node kills %d, stage retries %d (handed back by a restarted node: %d)\n",
		r.Resends, r.ResendsAnsweredOK, r.NodeKills, r.StageRetries, r.HandedBack)
	for _, g := range r.GPUFaults {
		fmt.Fprintf(w, "  GPU %d of %s: %s at +%.2f s for %s\n", g.GPU, g.Node, g.Fault, g.At.Sub(r.StartedAt).Seconds(), g.For)
	}
	for _, k := range r.Kills {
		fmt.Fprintf(w, "  killed %s at +%.2f s\n", k.Node, k.At.Sub(r.StartedAt).Seconds())
	}
	fmt.Fprintf(w, "queue wait to the first GPU stage, seconds:\n")
	for _, b := range exam.Buckets() {
		s := r.QueueWaitS[string(b)]
		fmt.Fprintf(w, "  %-7s n=%-4d p50 %7.1f  p99 %7.1f  max %7.1f  (first attempt failed or lost with its node: %d)\n",
			b, s.N, s.P50, s.P99, s.Max, r.FirstStageRetried[string(b)])
	}
	if len(r.CampusQueueWaitS) > 0 {
		fmt.Fprintf(w, "queue wait to the first GPU stage per campus, p50 / p99 seconds (urgent, normal, low):\n")
		for _, campus := range slices.Sorted(maps.Keys(r.CampusQueueWaitS)) {
			fmt.Fprintf(w, "  %-14s", campus)
			for _, b := range exam.Buckets() {
				s := r.CampusQueueWaitS[campus][string(b)]
				fmt.Fprintf(w, "  n=%-4d %6.1f / %6.1f", s.N, s.P50, s.P99)
			}
			fmt.Fprintln(w)
		}
	}
	if s := r.SlowestUrgent; s.ExamID != "" {
		fmt.Fprintf(w, "slowest urgent exam %s, submitted at +%.2f s, %.1f s to its first GPU stage:",
			s.ExamID, s.CreatedAt.Sub(r.StartedAt).Seconds(), s.WaitS)
		for _, e := range s.Timeline {
			if e.Stage == "" || e.Stage == shipped()[0].Stage {
				fmt.Fprintf(w, " +%.2fs %s %s %s;", e.At.Sub(s.CreatedAt).Seconds(), e.To, e.Stage, e.Actor)
			}
		}
		fmt.Fprintln(w)
	}
	if r.AgingBoundS > 0 {
		fmt.Fprintf(w, "low max wait %.1f s; aging bound %.0f s\n", r.QueueWaitS[string(exam.Low)].Max, r.AgingBoundS)
	}
	fmt.Fprintf(w, "wait of each stage, p99 seconds (urgent / normal / low):\n")
	for _, stage := range shipped().Stages() {
		fmt.Fprintf(w, "  %-8s", stage)
		for _, b := range exam.Buckets() {
			fmt.Fprintf(w, " %7.1f", r.StageWaitS[string(b)][string(stage)].P99)
		}
		fmt.Fprintln(w)
	}
	gpus := r.Config.Nodes * r.Config.GPUsPerNode
	fmt.Fprintf(w, "GPUs held / GPU stages waiting, mean per %s of the burst (%d GPUs):\n ", loadWindow, gpus)
	for _, l := range r.GPUStageLoad {
		fmt.Fprintf(w, " %.1f/%.0f", l.GPUsBusy, l.Waiting)
	}
	fmt.Fprintf(w, "\n  held %.0f GPU-s (%.1f s of the %d GPUs), %.0f %% of them over the makespan\n",
		r.HeldGPUS, r.HeldGPUS/float64(max(gpus, 1)), gpus, 100*r.HeldGPUS/max(float64(gpus)*r.MakespanS, 1e-9))
	fmt.Fprintf(w, "dispatch latency to an idle GPU: p50 %.0f ms, max %.0f ms\n", r.DispatchLatencyIdleMs.P50, r.DispatchLatencyIdleMs.Max)
	fmt.Fprintf(w, "GPU nodes, median compute per stage in ms (%s), and the fleet's judgement:\n", stageNames(shipped()))
	for _, n := range r.Nodes {
		mark := " "
		if n.Gray {
			mark = "*"
		}
		fmt.Fprintf(w, " %s%-12s probe %5.0f ms, stages", mark, n.Node, n.ProbeMs)
		for _, spec := range shipped() {
			if spec.GPU {
				fmt.Fprintf(w, " %6.0f", n.StageMs[spec.Stage])
			}
		}
		if n.UnhealthyGPUS > 0 {
			fmt.Fprintf(w, "; a GPU unhealthy for %.0f s", n.UnhealthyGPUS)
		}
		if n.DegradedAtS != nil {
			fmt.Fprintf(w, "; degraded at +%.1f s for %.0f s (%s)", *n.DegradedAtS, n.DegradedS, n.Reason)
		}
		fmt.Fprintln(w)
	}
	if len(r.Hedges) > 0 {
		fmt.Fprintf(w, "hedged stage tries, by the run that won: hedge %.0f, original %.0f, neither %.0f\n",
			r.Hedges["hedge"], r.Hedges["original"], r.Hedges["neither"])
	}
	fmt.Fprintf(w, "submission: %.1f s, %.1f exams/s through the gateway\n", r.SubmitS, r.SubmitPerS)
	fmt.Fprintf(w, "object store reads: %.2f MB per exam\n", r.ObjectBytesPerExam/1e6)
	fmt.Fprintf(w, "per exam: %.1f history events, %.2f workflow tasks; workflow tasks lost and run again: %d\n",
		r.EventsPerExam, r.WorkflowTasksPerExam, r.LostWorkflowTasks)
	fmt.Fprintf(w, "engine cost per exam (from the histories; actions as Temporal Cloud bills them, heartbeats and queries not included):\n")
	fmt.Fprintf(w, "  %-9s %8s %8s %9s %7s %8s %8s\n", "source", "events", "wf tasks", "attempts", "timers", "upserts", "actions")
	for _, src := range append(slices.Clone(cost.Sources), "total") {
		p := r.CostPerExam[src]
		fmt.Fprintf(w, "  %-9s %8.1f %8.2f %9.2f %7.2f %8.2f %8.2f\n", src, p.Events, p.WorkflowTasks, p.ActivityAttempts, p.Timers, p.Upserts, p.Actions)
	}
	fmt.Fprintf(w, "makespan %.1f s vs GPU-time limit %.1f s (×%.2f); %.2f exams/s\n",
		r.MakespanS, r.GPUTimeLimitS, r.MakespanS/max(r.GPUTimeLimitS, 1e-9), r.ExamsPerS)
	fmt.Fprintf(w, "bare engine, same burst of %d-activity workflows: %.1f s; makespan ×%.2f of it, ×%.2f of max(GPU-time limit, bare engine)\n",
		len(shipped()), r.BareEngineS, r.MakespanVsBare, r.MakespanVsBound)
	fmt.Fprintln(w, r.CPU)
	fmt.Fprintln(w, r.Requests)
}

// fleet is the benchmark's GPU nodes, each its own process.
type fleet struct {
	c       Config
	env     []string
	logDir  string
	mu      sync.Mutex
	running map[int]*exec.Cmd
	wg      sync.WaitGroup
	// exitedCPU is the CPU time of the node processes that have ended.
	exitedCPU time.Duration
	// metrics is each node's /metrics, as its latest process serves it.
	metrics map[int]string
}

// metricsURLs are the /metrics of the nodes' latest processes.
func (f *fleet) metricsURLs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var urls []string
	for _, u := range f.metrics {
		urls = append(urls, u)
	}
	return urls
}

// cpu is the CPU time every node process started so far has used.
func (f *fleet) cpu() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	total := f.exitedCPU
	for _, cmd := range f.running {
		total += processCPU(cmd.Process.Pid)
	}
	return total
}

func newFleet(c Config, env []string, logDir string) *fleet {
	return &fleet{c: c, logDir: logDir, running: map[int]*exec.Cmd{}, env: env, metrics: map[int]string{}}
}

// shipped is the pipeline octflow ships (activities.Pipeline), which the
// benchmark's system runs.
func shipped() exam.Pipeline { return activities.Pipeline().Specs() }

// stageNames are the GPU stages of stages, comma-separated.
func stageNames(stages exam.Pipeline) string {
	var names []string
	for _, s := range stages {
		if s.GPU {
			names = append(names, string(s.Stage))
		}
	}
	return strings.Join(names, ", ")
}

// grayNode is the node a run with Config.GrayNode makes slow.
const grayNode = 0

// nodeID names node i.
func nodeID(i int) string { return fmt.Sprintf("bench-gpu-%d", i+1) }

// start starts node i.
func (f *fleet) start(i int) error {
	id := nodeID(i)
	logFile, err := os.OpenFile(filepath.Join(f.logDir, id+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	stageTime := f.c.StageTime
	if f.c.FullVolumes {
		stageTime = 0 // the real stages, on the CPU
	}
	args := []string{"--node-id", id, "--gpus", fmt.Sprint(f.c.GPUsPerNode),
		"--sim-stage-time", stageTime.String(), "--sim-failure-rate", fmt.Sprint(f.c.FailRate), "--drain-timeout", "5s",
		// A killed node, restarted, hands back what it held from here.
		"--takes-dir", filepath.Join(f.logDir, id+".takes")}
	if f.c.NodeReportEvery > 0 {
		args = append(args, "--report-every", f.c.NodeReportEvery.String())
	}
	if i == grayNode && f.c.GrayNode > 0 {
		args = append(args, "--sim-slowdown", fmt.Sprint(f.c.GrayNode))
	}
	if !f.c.FullVolumes {
		args = append(args, "--sim-faults-file", f.faultsFile(i))
	}
	maddr, err := freeAddr()
	if err != nil {
		logFile.Close()
		return err
	}
	args = append(args, "--metrics-addr", maddr)
	cmd := f.c.Node(args, f.env)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", id, err)
	}
	f.mu.Lock()
	f.running[i] = cmd
	f.metrics[i] = "http://" + maddr + "/metrics"
	f.mu.Unlock()
	f.wg.Go(func() {
		cmd.Wait()
		logFile.Close()
		f.mu.Lock()
		f.exitedCPU += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		f.mu.Unlock()
	})
	return nil
}

// faultsFile is where node i's simulated GPUs read their faults.
func (f *fleet) faultsFile(i int) string { return filepath.Join(f.logDir, nodeID(i)+".faults") }

// GPUFault is one fault injected into a simulated GPU.
type GPUFault struct {
	Node  string        `json:"node"`
	GPU   int           `json:"gpu"`
	Fault exam.GPUFault `json:"fault"`
	At    time.Time     `json:"at"`
	For   time.Duration `json:"for"`
}

// injectFaults gives n random simulated GPUs a fault each (an Xid,
// thermal throttling, an ECC error in turn) for faultFor, one at a time,
// spread over the first three quarters of the expected run, and returns
// them.
func (f *fleet) injectFaults(ctx context.Context, seed uint64, n int, faultFor, expected time.Duration) []GPUFault {
	rng := rand.New(rand.NewPCG(seed, 11))
	kinds := []exam.GPUFault{exam.FaultXid, exam.FaultThermal, exam.FaultECC}
	var done []GPUFault
	// Each fault starts at a random time in its share of the run, less
	// the faults before it.
	gap := time.Second
	if n > 0 {
		gap = max(expected*3/4/time.Duration(n)-faultFor, time.Second)
	}
	for k := range n {
		select {
		case <-ctx.Done():
			return done
		case <-time.After(time.Duration(rng.Float64() * float64(gap))):
		}
		i, gpu := rng.IntN(f.c.Nodes), rng.IntN(f.c.GPUsPerNode)
		fault := GPUFault{Node: nodeID(i), GPU: gpu, Fault: kinds[k%len(kinds)], At: time.Now(), For: faultFor}
		if os.WriteFile(f.faultsFile(i), fmt.Appendf(nil, "%d %s\n", gpu, fault.Fault), 0o600) != nil {
			continue
		}
		done = append(done, fault)
		select {
		case <-ctx.Done():
		case <-time.After(faultFor):
		}
		_ = os.Remove(f.faultsFile(i))
	}
	return done
}

// NodeKill is one abrupt kill of a node.
type NodeKill struct {
	Node string    `json:"node"`
	At   time.Time `json:"at"`
}

// killSome kills n random nodes abruptly (SIGKILL, no drain) at random
// times within the first half of the expected run, restarting each 3 s
// later, and returns the kills.
func (f *fleet) killSome(ctx context.Context, seed uint64, n int, expected time.Duration) []NodeKill {
	rng := rand.New(rand.NewPCG(seed, 7))
	var killed []NodeKill
	for range n {
		wait := time.Duration(rng.Float64() * float64(cmp.Or(expected/2, time.Second)))
		select {
		case <-ctx.Done():
			return killed
		case <-time.After(wait):
		}
		i := rng.IntN(f.c.Nodes)
		f.mu.Lock()
		cmd := f.running[i]
		f.mu.Unlock()
		at := time.Now()
		if cmd == nil || cmd.Process.Signal(syscall.SIGKILL) != nil {
			continue
		}
		killed = append(killed, NodeKill{Node: nodeID(i), At: at})
		time.Sleep(3 * time.Second)
		if err := f.start(i); err != nil {
			return killed
		}
	}
	return killed
}

// stopAll drains every node (SIGTERM) and waits for them.
func (f *fleet) stopAll() {
	f.mu.Lock()
	for _, cmd := range f.running {
		cmd.Process.Signal(syscall.SIGTERM)
	}
	f.mu.Unlock()
	f.wg.Wait()
}
