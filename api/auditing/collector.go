package auditing

import (
	"github.com/prometheus/client_golang/prometheus"

	"octflow/audit"
)

// auditStats is an audit trail that gives its figures (audit.Trail).
type auditStats interface {
	Stats() audit.Stats
}

// auditCollector exports the audit trail's figures: what waits for the
// collector, since when the collector took nothing, and the requests
// refused for want of a trail.
type auditCollector struct {
	trail                                    auditStats
	pendingRecords, pendingBytes, spoolBytes *prometheus.Desc
	lastTaken, refused                       *prometheus.Desc
}

// Collector exports the figures of a trail that gives them (an
// audit.Trail), or is nil for one that does not.
func Collector(trail audit.Sink) prometheus.Collector {
	if t, ok := trail.(auditStats); ok {
		return newAuditCollector(t)
	}
	return nil
}

func newAuditCollector(t auditStats) *auditCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &auditCollector{trail: t,
		pendingRecords: d("octflow_audit_pending_records", "Audit records the collector has not taken yet."),
		pendingBytes:   d("octflow_audit_pending_bytes", "Bytes of the audit spool the collector has not taken yet."),
		spoolBytes:     d("octflow_audit_spool_bytes", "The audit spool's cap: past it, requests are answered 503."),
		lastTaken:      d("octflow_audit_last_taken_timestamp_seconds", "When the audit collector last took records (0: not since the api started)."),
		refused: d("octflow_audit_refused_total",
			"Requests answered 503 because the audit trail could not record them (the spool full, or one caller over its share)."),
	}
}

// Describe implements prometheus.Collector.
func (c *auditCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pendingRecords, c.pendingBytes, c.spoolBytes, c.lastTaken, c.refused} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *auditCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.trail.Stats()
	var taken float64
	if !st.LastTaken.IsZero() {
		taken = float64(st.LastTaken.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(c.pendingRecords, prometheus.GaugeValue, float64(st.PendingRecords))
	ch <- prometheus.MustNewConstMetric(c.pendingBytes, prometheus.GaugeValue, float64(st.PendingBytes))
	ch <- prometheus.MustNewConstMetric(c.spoolBytes, prometheus.GaugeValue, float64(st.SpoolBytes))
	ch <- prometheus.MustNewConstMetric(c.lastTaken, prometheus.GaugeValue, taken)
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(st.Refused))
}
