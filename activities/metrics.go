package activities

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/temporal"

	"octflow/contract"
	"octflow/exam"
)

// Failure reasons of a stage, the fixed set octflow_stage_failures_total
// counts by.
const (
	ReasonInvalidVolume  = "invalid_volume"
	ReasonPanic          = "panic"
	ReasonInfrastructure = "infrastructure"
	ReasonReportExists   = "report_exists"
	ReasonCanceled       = "canceled"
	ReasonFailed         = "failed"
)

// StageMetrics are the stages' Prometheus metrics: how long each ran on
// which node, why they failed, and report stages that found a report
// already written. Every label comes from a fixed or operator-chosen set
// (stages, reasons, node IDs): no exam or patient ever becomes a label.
type StageMetrics struct {
	duration   *prometheus.HistogramVec
	failures   *prometheus.CounterVec
	duplicates *prometheus.CounterVec
}

// NewStageMetrics registers the metrics of stages with reg.
func NewStageMetrics(reg prometheus.Registerer, stages exam.Pipeline) (*StageMetrics, error) {
	m := &StageMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "octflow_stage_duration_seconds",
			Help:    "How long a stage ran on a node (its GPU bound), by outcome.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"stage", "node", "outcome"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "octflow_stage_failures_total",
			Help: "Stage attempts that failed, by stage and reason (invalid_volume, panic, infrastructure, report_exists, canceled, failed).",
		}, []string{"stage", "reason"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "octflow_duplicate_reports_total",
			Help: "Report stages that found the exam's report already written: rewritten by the same run, or refused for another run.",
		}, []string{"outcome"}),
	}
	for _, c := range []prometheus.Collector{m.duration, m.failures, m.duplicates} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Every series exists from the start, so a rate is 0 rather than absent.
	for _, s := range stages.Stages() {
		for _, r := range []string{ReasonInvalidVolume, ReasonPanic, ReasonInfrastructure, ReasonReportExists, ReasonCanceled, ReasonFailed} {
			m.failures.WithLabelValues(string(s), r)
		}
	}
	for _, o := range []string{"rewritten", "refused"} {
		m.duplicates.WithLabelValues(o)
	}
	return m, nil
}

// observe records one stage attempt that ran from start and ended with err.
func (m *StageMetrics) observe(ctx context.Context, stage exam.Stage, node string, start time.Time, err error) {
	if m == nil {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = "failed"
		m.failures.WithLabelValues(string(stage), failureReason(ctx, err)).Inc()
	}
	m.duration.WithLabelValues(string(stage), node, outcome).Observe(time.Since(start).Seconds())
}

// duplicate counts a report stage that found a report written before.
func (m *StageMetrics) duplicate(outcome string) {
	if m != nil {
		m.duplicates.WithLabelValues(outcome).Inc()
	}
}

// failureReason sorts a stage's error into the fixed set of reasons.
func failureReason(ctx context.Context, err error) string {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return ReasonCanceled
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		switch app.Type() {
		case contract.ErrTypeInvalidVolume:
			return ReasonInvalidVolume
		case contract.ErrTypeStagePanic:
			return ReasonPanic
		case contract.ErrTypeInfrastructure:
			return ReasonInfrastructure
		case contract.ErrTypeReportExists:
			return ReasonReportExists
		}
	}
	return ReasonFailed
}
