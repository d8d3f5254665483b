package workflows

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"octflow/contract"
	"octflow/exam"
	"octflow/lifecycle"
)

// What a pipeline says of an exam is what its history holds, where the
// exam's status, timeline and list queries read it (lifecycle, the api):
// the state and stage it upserts into its search attributes, the bucket
// of each try in the try's fairness key, each retried try's record in
// the timer of the wait after it, a failed notification in its result,
// a DEAD exam's cause in its failure, and what it counts in its metrics.
// The tests read the first three from the commands the workflow gives
// (the recorder's outbound interceptor), the metrics from a counting
// handler.

// wait is a timer the workflow started: its duration and its summary.
type wait struct {
	d       time.Duration
	summary string
}

// upsert notes the state and stage the workflow writes into its search
// attributes ("STATE/stage").
func (s *scheduleOutbound) UpsertTypedSearchAttributes(ctx workflow.Context, updates ...temporal.SearchAttributeUpdate) error {
	sa := temporal.NewSearchAttributes(updates...)
	state, _ := sa.GetKeyword(stateAttr)
	stage, _ := sa.GetKeyword(stageAttr)
	s.r.mu.Lock()
	s.r.states = append(s.r.states, state+"/"+stage)
	s.r.mu.Unlock()
	return s.Next.UpsertTypedSearchAttributes(ctx, updates...)
}

// NewTimerWithOptions notes every timer the workflow starts.
func (s *scheduleOutbound) NewTimerWithOptions(ctx workflow.Context, d time.Duration, opts workflow.TimerOptions) workflow.Future {
	s.r.mu.Lock()
	s.r.waits = append(s.r.waits, wait{d: d, summary: opts.Summary})
	s.r.mu.Unlock()
	return s.Next.NewTimerWithOptions(ctx, d, opts)
}

// lastState is the state and stage the workflow last wrote ("STATE/stage").
func (r *stages) lastState() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.states) == 0 {
		return ""
	}
	return r.states[len(r.states)-1]
}

// illegalStates lists every move between the states the workflow wrote,
// from CREATED, that lifecycle's table forbids.
func (r *stages) illegalStates() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var bad []string
	from := lifecycle.Created
	for _, s := range r.states {
		to := lifecycle.State(strings.Split(s, "/")[0])
		if err := lifecycle.CheckMove(from, to); err != nil {
			bad = append(bad, err.Error())
		}
		from = to
	}
	return bad
}

// retried is the record of every retried try, as the timers of the waits
// after them carry it (contract.RetrySummary), with the wait.
func (r *stages) retried() []contract.Attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.retriedLocked()
}

// retriedLocked is retried, with r.mu held.
func (r *stages) retriedLocked() []contract.Attempt {
	var out []contract.Attempt
	for _, w := range r.waits {
		if a, ok := contract.AttemptOfRetrySummary(w.summary); ok {
			a.RetryAfter = w.d
			out = append(out, a)
		}
	}
	return out
}

// counters is a metrics handler that counts what the workflows count,
// by name and tags ("name" or "name{k=v,…}").
type counters struct {
	mu   *sync.Mutex
	n    map[string]int64
	tags map[string]string
}

func newCounters() *counters { return &counters{mu: &sync.Mutex{}, n: map[string]int64{}} }

func (c *counters) WithTags(tags map[string]string) client.MetricsHandler {
	merged := maps.Clone(c.tags)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, tags)
	return &counters{mu: c.mu, n: c.n, tags: merged}
}

func (c *counters) Counter(name string) client.MetricsCounter {
	return counter{c: c, name: seriesKey(name, c.tags)}
}

// seriesKey names a counter's series: name{k=v,...}, the tags sorted.
func seriesKey(name string, tags map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		kv = append(kv, k+"="+tags[k])
	}
	if len(kv) > 0 {
		name += "{" + strings.Join(kv, ",") + "}"
	}
	return name
}

func (c *counters) Gauge(string) client.MetricsGauge { return nopMetric{} }
func (c *counters) Timer(string) client.MetricsTimer { return nopMetric{} }

// get is a counter's count.
func (c *counters) get(name string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// named is every counter whose name starts with prefix, with its count.
func (c *counters) named(prefix string) map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int64{}
	for k, v := range c.n {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

type counter struct {
	c    *counters
	name string
}

func (k counter) Inc(n int64) {
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	k.c.n[k.name] += n
}

type nopMetric struct{}

func (nopMetric) Update(float64)       {}
func (nopMetric) Record(time.Duration) {}

// bucketOf is the bucket a try was scheduled in, as its fairness key
// says (where the timeline reads it).
func bucketOf(opts workflow.ActivityOptions) exam.Priority {
	return contract.BucketOfKey(opts.Priority.FairnessKey)
}
