package workers

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
)

// Metrics is a process's Prometheus registry. The Temporal SDK reports
// into it (worker, poller and activity metrics, and the counters
// workflow code keeps: octflow_urgent_sla_breaches_total,
// octflow_illegal_transitions_total, octflow_promotions_total).
type Metrics struct {
	Registry *prometheus.Registry
	// SDK is the handler to give the Temporal client.
	SDK   client.MetricsHandler
	scope io.Closer
}

// NewMetrics creates the registry with Go runtime and process metrics.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  tallyprom.NewReporter(tallyprom.Options{Registerer: reg}),
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, time.Second)
	return &Metrics{Registry: reg, SDK: sdktally.NewMetricsHandler(scope), scope: closer}
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// Close flushes and stops the SDK's reporting.
func (m *Metrics) Close() error { return m.scope.Close() }
