package app

import (
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"

	"octflow/exam"
	"octflow/workflows"
)

// Metrics is a process's Prometheus registry. The Temporal SDK reports
// into it (worker, poller and activity metrics, and the counters
// workflow code keeps: workflows.Counters).
type Metrics struct {
	Registry *prometheus.Registry
	// SDK is the handler to give the Temporal client. A worker of the
	// workflow queue made with it creates the exam workflow's counters
	// at 0 (workflows.Counters).
	SDK   client.MetricsHandler
	scope io.Closer
}

// NewMetrics creates the registry with Go runtime and process metrics,
// for a process whose workflows run stages (workflows.Counters).
func NewMetrics(stages exam.Pipeline) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  tallyprom.NewReporter(tallyprom.Options{Registerer: reg}),
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, time.Second)
	return &Metrics{Registry: reg, SDK: zeroingHandler{sdktally.NewMetricsHandler(scope), workflows.Counters(stages)}, scope: closer}
}

// zeroingHandler is the SDK's handler until a worker of the workflow
// queue derives its own from it. The SDK tags a worker's handler with
// the client's tags and then the worker's task queue (task_queue alone),
// and a workflow's with that and its workflow type: so the worker's
// handler, tagged with workflow_type, gives the very label set the
// workflow's counters will have, and creating them there (tally's
// reporter allocates a Prometheus series when a counter is made)
// exposes them at 0 from the worker's start.
type zeroingHandler struct {
	client.MetricsHandler
	counters []workflows.Counter
}

// taskQueueTag is the tag the SDK gives a worker's metrics handler,
// workflowTypeTag the one it adds for a workflow's.
const (
	taskQueueTag    = "task_queue"
	workflowTypeTag = "workflow_type"
)

// WithTags implements client.MetricsHandler.
func (h zeroingHandler) WithTags(tags map[string]string) client.MetricsHandler {
	inner := h.MetricsHandler.WithTags(tags)
	if len(tags) != 1 || tags[taskQueueTag] != exam.WorkflowQueue {
		return zeroingHandler{inner, h.counters}
	}
	for _, c := range h.counters {
		inner.WithTags(map[string]string{workflowTypeTag: c.Workflow}).WithTags(c.Tags).Counter(c.Name)
	}
	return inner
}

// Unwrap gives the tally handler (sdktally.ScopeFromHandler).
func (h zeroingHandler) Unwrap() client.MetricsHandler { return h.MetricsHandler }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// Close flushes and stops the SDK's reporting.
func (m *Metrics) Close() error { return m.scope.Close() }
