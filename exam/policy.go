package exam

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Policy is the scheduling policy an exam runs under. The gateway
// resolves and validates it when the exam is submitted, and it travels in
// the workflow input: a running exam keeps the policy it started with
// across deploys, and the workflow uses it as given. Every field means
// what it says; a zero is never replaced by a default.
type Policy struct {
	// MaxAttempts per stage (production: 3). With LostAttempts set, only
	// the stage's own failures spend them.
	MaxAttempts int32 `json:"maxAttempts"`
	// LostAttempts is how many attempts of a stage may end without an
	// answer from their node (killed, cut off: the heartbeat or stage
	// timeout ends them) on top of MaxAttempts, so that nodes lost under
	// an exam do not make it DEAD (production: 3). They stay bounded: an
	// input that kills every node it lands on stops after MaxAttempts +
	// LostAttempts attempts. 0, as in exams submitted before it existed:
	// every attempt spends MaxAttempts.
	LostAttempts int32 `json:"lostAttempts,omitempty"`
	// RetryBase is the first retry delay's ceiling; later ones double
	// (production: 5 min). Each delay is drawn with full jitter.
	RetryBase time.Duration `json:"retryBase"`
	// RetryCap bounds the retry delay (production: 30 min).
	RetryCap time.Duration `json:"retryCap"`
	// StageTimeout is each stage's start-to-close limit (production: 10 min).
	StageTimeout time.Duration `json:"stageTimeout"`
	// HeartbeatTimeout notices a lost node (production: 30 s).
	HeartbeatTimeout time.Duration `json:"heartbeatTimeout"`
	// Weights are the fairness weights of the buckets (production: 60/35/5).
	Weights map[Priority]float32 `json:"weights"`
	// Aging is how long a stage may wait in a bucket before it is moved
	// one bucket up (production: 30 min for low and normal). A bucket
	// without an entry, or with 0, is never promoted; urgent has nowhere
	// to go.
	Aging map[Priority]time.Duration `json:"aging"`
	// UrgentSLA is how long an urgent exam may take from submission to
	// report before the breach is logged and counted (production:
	// 15 min; 0: not watched).
	UrgentSLA time.Duration `json:"urgentSla"`
	// ReviewWindow is how long after the report the exam accepts review
	// decisions (production: 7 days); without a final decision by then
	// the review is expired.
	ReviewWindow time.Duration `json:"reviewWindow"`
	// ReviewReminder is how often an urgent exam awaiting review is
	// pushed to the workstation again (production: 30 min, at most 5
	// times; 0: no reminders).
	ReviewReminder time.Duration `json:"reviewReminder"`
	// InfraRetryFor is how long a stage keeps being rescheduled while the
	// object store (or another backing service) is unreachable, without
	// spending its attempts, before the exam is DEAD (production: 1 h).
	// 0, as in exams submitted before it existed: such failures spend the
	// stage's attempts like any other.
	InfraRetryFor time.Duration `json:"infraRetryFor,omitempty"`
	// ExportRetryFor is how long the export of an exam's results keeps
	// being retried while the campus's PACS does not answer (production:
	// a day); past it the export has failed and an admin may run it again.
	ExportRetryFor time.Duration `json:"exportRetryFor,omitempty"`
	// NodeAffinityWait is how long a GPU stage waits for the node that
	// ran the exam's previous GPU stage (and holds its output in a local
	// cache) before it goes back to the shared GPU queue of its bucket
	// (production: 30 s). 0, as in exams submitted before it existed:
	// every GPU stage goes to the shared queue.
	NodeAffinityWait time.Duration `json:"nodeAffinityWait,omitempty"`
	// CampusWeights weigh the campuses against each other inside the
	// normal and the low bucket (production: none, every campus 1; each
	// from MinCampusWeight to MaxCampusWeight). The gateway turns them
	// into each exam's CampusShare (ForCampus); an exam's input carries
	// no campus's weights.
	CampusWeights map[string]float32 `json:"campusWeights,omitempty"`
	// CampusShare is the exam's campus's part of the normal and of the
	// low bucket: its weight over the weights of the campuses that sent
	// exams lately (the gateway's choice of campuses; production: 1, one
	// campus; above 0, at most 1). While several campuses have stages
	// waiting in one of those buckets, each is dispatched by its part, so
	// one campus's burst does not hold back the others. Urgent stages are
	// taken in their order of arrival, whatever their campus.
	CampusShare float32 `json:"campusShare"`
	// OwnGPUs are the campuses whose GPU stages run only on GPU nodes
	// bound to them (production: none, every campus on the shared GPU
	// queue): nodes serving that campus alone, on its own queue
	// (CampusGPUQueue), holding no other campus's payload keys. The
	// gateway turns them into each exam's GPUQueue (ForCampus); an
	// exam's input carries no campus's list.
	OwnGPUs []string `json:"ownGpus,omitempty"`
	// GPUQueue is the queue of the exam's GPU stages: "" (as in exams
	// submitted before it existed), the shared GPU queue; its campus's
	// own (CampusGPUQueue) where the campus is in OwnGPUs.
	GPUQueue string `json:"gpuQueue,omitempty"`
}

// The range of a campus's weight (Policy.CampusWeights): a hundredfold
// between the lightest and the heaviest campus.
const (
	MinCampusWeight = 0.1
	MaxCampusWeight = 10
)

// DefaultPolicy is the production policy.
func DefaultPolicy() Policy {
	return Policy{
		MaxAttempts:      3,
		LostAttempts:     3,
		RetryBase:        5 * time.Minute,
		RetryCap:         30 * time.Minute,
		StageTimeout:     10 * time.Minute,
		HeartbeatTimeout: 30 * time.Second,
		Weights:          map[Priority]float32{Urgent: 60, Normal: 35, Low: 5},
		Aging:            map[Priority]time.Duration{Normal: 30 * time.Minute, Low: 30 * time.Minute},
		UrgentSLA:        15 * time.Minute,
		ReviewWindow:     7 * 24 * time.Hour,
		ReviewReminder:   30 * time.Minute,
		InfraRetryFor:    time.Hour,
		ExportRetryFor:   24 * time.Hour,
		NodeAffinityWait: 30 * time.Second,
		CampusShare:      1,
	}
}

// PolicyError is one setting of a Policy that cannot work. Field is the
// setting's JSON name, so a configuration layer can name its source.
type PolicyError struct {
	Field  string
	Reason string
}

func (e *PolicyError) Error() string { return e.Field + ": " + e.Reason }

// Validate reports every setting that cannot work, each as a
// *PolicyError.
func (p Policy) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &PolicyError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if p.MaxAttempts < 1 {
		bad("maxAttempts", "%d: want at least 1", p.MaxAttempts)
	}
	if p.LostAttempts < 0 {
		bad("lostAttempts", "%d: want 0 or more", p.LostAttempts)
	}
	if p.RetryBase <= 0 {
		bad("retryBase", "%s: want a positive duration", p.RetryBase)
	}
	if p.RetryCap < p.RetryBase {
		bad("retryCap", "%s: want at least the retry base %s", p.RetryCap, p.RetryBase)
	}
	if p.StageTimeout <= 0 {
		bad("stageTimeout", "%s: want a positive duration", p.StageTimeout)
	}
	if p.HeartbeatTimeout <= 0 || p.HeartbeatTimeout >= p.StageTimeout {
		bad("heartbeatTimeout", "%s: want a positive duration below the stage timeout %s", p.HeartbeatTimeout, p.StageTimeout)
	}
	for _, b := range Buckets() {
		if w := p.Weights[b]; !(w > 0) {
			bad("weights", "%s bucket weight %v: want a positive number", b, w)
		}
	}
	for _, b := range slices.Sorted(maps.Keys(p.Aging)) {
		switch d := p.Aging[b]; {
		case b != Normal && b != Low:
			bad("aging", "%q: only normal and low are promoted", b)
		case d < 0:
			bad("aging", "%s aging %s: want 0 (never) or a positive duration", b, d)
		}
	}
	if p.UrgentSLA < 0 {
		bad("urgentSla", "%s: want 0 (not watched) or a positive duration", p.UrgentSLA)
	}
	if p.ReviewWindow <= 0 {
		bad("reviewWindow", "%s: want a positive duration", p.ReviewWindow)
	}
	if p.ReviewReminder < 0 {
		bad("reviewReminder", "%s: want 0 (none) or a positive duration", p.ReviewReminder)
	}
	if p.InfraRetryFor < 0 {
		bad("infraRetryFor", "%s: want 0 or a positive duration", p.InfraRetryFor)
	}
	if p.ExportRetryFor < 0 {
		bad("exportRetryFor", "%s: want 0 or a positive duration", p.ExportRetryFor)
	}
	if p.NodeAffinityWait < 0 {
		bad("nodeAffinityWait", "%s: want 0 (no affinity) or a positive duration", p.NodeAffinityWait)
	}
	if !(p.CampusShare > 0 && p.CampusShare <= 1) {
		bad("campusShare", "%v: want above 0 and at most 1", p.CampusShare)
	}
	for _, c := range slices.Sorted(maps.Keys(p.CampusWeights)) {
		if err := ValidateCampus(c); err != nil {
			bad("campusWeights", "%v", err)
		} else if w := p.CampusWeights[c]; !(w >= MinCampusWeight && w <= MaxCampusWeight) {
			bad("campusWeights", "campus %s weight %v: want %v to %v", c, w, MinCampusWeight, MaxCampusWeight)
		}
	}
	for _, c := range p.OwnGPUs {
		if err := ValidateCampus(c); err != nil {
			bad("ownGpus", "%v", err)
		}
	}
	if campus, ok := strings.CutPrefix(p.GPUQueue, GPUQueue+"-campus-"); p.GPUQueue != "" && (!ok || ValidateCampus(campus) != nil) {
		bad("gpuQueue", "%q: want empty (the shared GPU queue) or a campus's own (%s)", p.GPUQueue, CampusGPUQueue("<campus>"))
	}
	return errors.Join(errs...)
}

// StageQueue is the task queue stage runs on under this policy: the
// exam's own GPU queue for a GPU stage where it has one (GPUQueue), the
// stage's queue otherwise.
func (p Policy) StageQueue(s StageSpec) string {
	if s.GPU {
		return p.GPUStageQueue()
	}
	return s.Queue()
}

// GPUStageQueue is the queue of the exam's GPU stages (StageQueue of a
// GPU stage).
func (p Policy) GPUStageQueue() string {
	if p.GPUQueue != "" {
		return p.GPUQueue
	}
	return GPUQueue
}

// AgingAfter is how long a stage may wait in bucket before promotion; 0
// means it is never promoted.
func (p Policy) AgingAfter(bucket Priority) time.Duration {
	if bucket == Urgent {
		return 0
	}
	return p.Aging[bucket]
}

// Weight is the fairness weight of bucket under this policy.
func (p Policy) Weight(bucket Priority) float32 { return p.Weights[bucket] }

// Share is bucket's share of dispatches while every bucket has stages
// waiting: its weight over the three buckets' (0.35 for normal under
// 60/35/5).
func (p Policy) Share(bucket Priority) float32 {
	var total float32
	for _, b := range Buckets() {
		total += p.Weights[b]
	}
	if !(total > 0) {
		return 0
	}
	return p.Weights[bucket] / total
}

// CampusWeight is campus's weight inside the normal and the low bucket:
// its entry in CampusWeights, 1 without one.
func (p Policy) CampusWeight(campus string) float32 {
	if w, ok := p.CampusWeights[campus]; ok {
		return w
	}
	return 1
}

// ForCampus is the policy an exam of campus runs under, where campuses
// are the campuses sharing the buckets (the gateway's: those that sent
// exams lately): its CampusShare is campus's weight over theirs (campus
// counted once, listed or not), its GPUQueue the campus's own where it
// is in OwnGPUs, and it carries no campus's weights or list.
func (p Policy) ForCampus(campus string, campuses []string) Policy {
	total := p.CampusWeight(campus)
	for _, c := range campuses {
		if c != campus {
			total += p.CampusWeight(c)
		}
	}
	p.CampusShare = p.CampusWeight(campus) / total
	p.CampusWeights = nil
	if slices.Contains(p.OwnGPUs, campus) {
		p.GPUQueue = CampusGPUQueue(campus)
	}
	p.OwnGPUs = nil
	return p
}
