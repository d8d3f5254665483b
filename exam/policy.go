package exam

import (
	"cmp"
	"time"
)

// Policy is the scheduling policy an exam runs under. The gateway fixes it
// when the exam is submitted and it travels in the workflow input, so a
// running exam keeps the policy it started with across deploys.
type Policy struct {
	// MaxAttempts per stage (default 3).
	MaxAttempts int32 `json:"maxAttempts"`
	// RetryBase is the first retry delay; later ones double (default 5 min).
	RetryBase time.Duration `json:"retryBase"`
	// RetryCap bounds the retry delay (default 30 min).
	RetryCap time.Duration `json:"retryCap"`
	// StageTimeout is each stage's start-to-close limit (default 10 min).
	StageTimeout time.Duration `json:"stageTimeout"`
	// HeartbeatTimeout notices a lost node (default 30 s).
	HeartbeatTimeout time.Duration `json:"heartbeatTimeout"`
	// Weights are the fairness weights of the buckets (default 60/35/5).
	Weights map[Priority]float32 `json:"weights"`
	// Aging is how long a stage may wait in a bucket before it is moved
	// one bucket up (default 30 min for low and normal; urgent does not age).
	Aging map[Priority]time.Duration `json:"aging"`
	// UrgentSLA is how long an urgent exam may take from submission to
	// report before the breach is logged and counted (default 15 min).
	UrgentSLA time.Duration `json:"urgentSla"`
	// ReviewWindow is how long after the report the exam's workflow
	// accepts review decisions (default 7 days); without a final decision
	// by then the review is expired.
	ReviewWindow time.Duration `json:"reviewWindow"`
	// ReviewReminder is how often an urgent exam awaiting review is
	// pushed to the workstation again (default 30 min, at most 5 times).
	ReviewReminder time.Duration `json:"reviewReminder"`
}

// DefaultPolicy is the production policy.
func DefaultPolicy() Policy {
	return Policy{
		MaxAttempts:      3,
		RetryBase:        5 * time.Minute,
		RetryCap:         30 * time.Minute,
		StageTimeout:     10 * time.Minute,
		HeartbeatTimeout: 30 * time.Second,
		Weights:          map[Priority]float32{Urgent: 60, Normal: 35, Low: 5},
		Aging:            map[Priority]time.Duration{Normal: 30 * time.Minute, Low: 30 * time.Minute},
		UrgentSLA:        15 * time.Minute,
		ReviewWindow:     7 * 24 * time.Hour,
		ReviewReminder:   30 * time.Minute,
	}
}

// WithDefaults fills zero fields from DefaultPolicy.
func (p Policy) WithDefaults() Policy {
	d := DefaultPolicy()
	p.MaxAttempts = cmp.Or(p.MaxAttempts, d.MaxAttempts)
	p.RetryBase = cmp.Or(p.RetryBase, d.RetryBase)
	p.RetryCap = cmp.Or(p.RetryCap, d.RetryCap)
	p.StageTimeout = cmp.Or(p.StageTimeout, d.StageTimeout)
	p.HeartbeatTimeout = cmp.Or(p.HeartbeatTimeout, d.HeartbeatTimeout)
	p.UrgentSLA = cmp.Or(p.UrgentSLA, d.UrgentSLA)
	p.ReviewWindow = cmp.Or(p.ReviewWindow, d.ReviewWindow)
	p.ReviewReminder = cmp.Or(p.ReviewReminder, d.ReviewReminder)
	if p.Weights == nil {
		p.Weights = d.Weights
	}
	if p.Aging == nil {
		p.Aging = d.Aging
	}
	return p
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
func (p Policy) Weight(bucket Priority) float32 {
	if w, ok := p.Weights[bucket]; ok && w > 0 {
		return w
	}
	return DefaultPolicy().Weights[bucket]
}
