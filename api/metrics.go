package api

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"

	"octflow/contract"
	"octflow/exam"
	"octflow/lifecycle"
)

// scrapeTimeout bounds the Temporal calls one scrape makes.
const scrapeTimeout = 8 * time.Second

// oldestScanLimit bounds how many waiting exams of a bucket a scrape
// reads to find the oldest.
const oldestScanLimit = 10_000

// statusCollector answers a Prometheus scrape with what Temporal holds:
// exams per state, waiting exams and the oldest wait per bucket, each
// queue's backlog, and the fleet view's nodes. Labels are states,
// buckets, queues, node IDs and GPU indexes: all bounded.
type statusCollector struct {
	s *Server

	exams, waiting, oldest                                       *prometheus.Desc
	backlog, backlogAge, pollers                                 *prometheus.Desc
	nodeUp, reportAge, breaker, inFlight                         *prometheus.Desc
	gpuUtil, gpuMemUsed, gpuMemTotal, healthy, gpuFault, gpuTemp *prometheus.Desc
	degraded, probe, stageTime                                   *prometheus.Desc
}

// DefaultStatusMaxAge is how long a scrape's reading of Temporal serves
// further scrapes (Config.StatusMaxAge).
const DefaultStatusMaxAge = 15 * time.Second

// cachedCollector serves a costly collector's metrics from a cache: it
// collects at most once per maxAge, one collection at a time, and every
// scrape in between is answered from the last one. A scrape that finds
// the cache stale while a collection runs is answered from the stale
// cache; only scrapes with nothing cached wait. So any number of
// concurrent scrapes costs at most one collection per maxAge.
type cachedCollector struct {
	inner  prometheus.Collector
	maxAge time.Duration
	now    func() time.Time

	mu      sync.Mutex
	metrics []prometheus.Metric
	at      time.Time     // when metrics were collected; zero: never
	running chan struct{} // non-nil while a collection runs; closed at its end
}

func newCachedCollector(inner prometheus.Collector, maxAge time.Duration, now func() time.Time) *cachedCollector {
	return &cachedCollector{inner: inner, maxAge: maxAge, now: now}
}

// Describe implements prometheus.Collector.
func (c *cachedCollector) Describe(ch chan<- *prometheus.Desc) { c.inner.Describe(ch) }

// Collect implements prometheus.Collector.
func (c *cachedCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.current() {
		ch <- m
	}
}

// current returns the cached metrics, collecting them first when they
// are stale and no collection runs.
func (c *cachedCollector) current() []prometheus.Metric {
	c.mu.Lock()
	switch {
	case !c.at.IsZero() && c.now().Sub(c.at) < c.maxAge:
		defer c.mu.Unlock()
		return c.metrics
	case c.running != nil && !c.at.IsZero():
		defer c.mu.Unlock()
		return c.metrics // stale, while the next collection runs
	case c.running != nil:
		running := c.running
		c.mu.Unlock()
		<-running
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.metrics
	}
	running := make(chan struct{})
	c.running = running
	c.mu.Unlock()

	metrics := collect(c.inner)
	c.mu.Lock()
	c.metrics, c.at, c.running = metrics, c.now(), nil
	c.mu.Unlock()
	close(running)
	return metrics
}

// collect gathers what a collector collects.
func collect(inner prometheus.Collector) []prometheus.Metric {
	ch := make(chan prometheus.Metric)
	go func() {
		defer close(ch)
		inner.Collect(ch)
	}()
	var metrics []prometheus.Metric
	for m := range ch {
		metrics = append(metrics, m)
	}
	return metrics
}

// newStatusCollector is the status collector of s behind a cache of
// s.cfg.StatusMaxAge: each of its collections costs some forty calls to
// Temporal's visibility store.
func newStatusCollector(s *Server) prometheus.Collector {
	return newCachedCollector(newTemporalStatus(s), cmp.Or(s.cfg.StatusMaxAge, DefaultStatusMaxAge), time.Now)
}

func newTemporalStatus(s *Server) *statusCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &statusCollector{s: s,
		exams:       d("octflow_exams", "Exams Temporal holds, by the state their pipeline last recorded (CREATED, QUEUED — stages in flight included —, RETRY_WAIT, COMPLETED, DEAD).", "state"),
		waiting:     d("octflow_waiting_exams", "Exams whose pipeline is running (CREATED, QUEUED or RETRY_WAIT), by submitted bucket.", "bucket"),
		oldest:      d("octflow_oldest_wait_seconds", "Age of the oldest exam whose pipeline is still running, by submitted bucket (0: none).", "bucket"),
		backlog:     d("octflow_queue_backlog", "Tasks waiting on a task queue (Temporal's approximate count).", "queue"),
		backlogAge:  d("octflow_queue_oldest_task_age_seconds", "Age of the oldest task waiting on a task queue.", "queue"),
		pollers:     d("octflow_queue_pollers", "Workers polling a task queue recently.", "queue"),
		nodeUp:      d("octflow_node_up", "1 while a GPU node reports (up or draining), 0 once silent for three report intervals.", "node"),
		reportAge:   d("octflow_node_report_age_seconds", "Seconds since a GPU node's last report (its heartbeat to the fleet view).", "node"),
		breaker:     d("octflow_node_breaker_state", "A GPU node's circuit breaker: 1 for its current state.", "node", "state"),
		inFlight:    d("octflow_node_slots_in_use", "Stages bound to a GPU on a node, as it last reported.", "node"),
		gpuUtil:     d("octflow_gpu_utilization_ratio", "GPU utilisation as the node last reported it (NVML; a simulated GPU is 1 while a stage holds it).", "node", "gpu"),
		gpuMemUsed:  d("octflow_gpu_memory_used_bytes", "GPU memory in use as the node last reported it.", "node", "gpu"),
		gpuMemTotal: d("octflow_gpu_memory_total_bytes", "GPU memory as the node last reported it.", "node", "gpu"),
		healthy:     d("octflow_gpu_healthy", "1 if the GPU was healthy at the node's last report.", "node", "gpu"),
		gpuFault:    d("octflow_gpu_fault", "1 for each fault the GPU had at the node's last report (xid, ecc, retired-pages, thermal, hw-slowdown, unreadable), 0 for the others.", "node", "gpu", "fault"),
		gpuTemp:     d("octflow_gpu_temperature_celsius", "The GPU's core temperature at the node's last report (NVML; none for a simulated GPU).", "node", "gpu"),
		degraded:    d("octflow_node_degraded", "1 while the fleet holds a GPU node degraded (too slow against the nodes of its GPU model, or marked by an operator): it takes no new stage.", "node"),
		probe:       d("octflow_node_probe_seconds", "Median of a GPU node's latest probes (the same computation timed on every node at each report).", "node"),
		stageTime:   d("octflow_node_stage_compute_seconds", "Median compute time (GPU held) of a stage's latest runs on a GPU node that ended well.", "node", "stage"),
	}
}

// Describe implements prometheus.Collector.
func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.exams, c.waiting, c.oldest, c.backlog, c.backlogAge, c.pollers,
		c.nodeUp, c.reportAge, c.breaker, c.inFlight, c.gpuUtil, c.gpuMemUsed, c.gpuMemTotal, c.healthy, c.gpuFault, c.gpuTemp,
		c.degraded, c.probe, c.stageTime} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A part Temporal does not
// answer is left out of the scrape (and logged), the rest still served.
func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	warn := func(part string, err error) {
		c.s.cfg.Logger.Warn("metrics: a part of the scrape failed", zap.String("part", part), zap.Error(err))
	}
	for _, st := range []lifecycle.State{lifecycle.Created, lifecycle.Queued, lifecycle.RetryWait, lifecycle.Completed, lifecycle.Dead} {
		n, err := c.s.count(ctx, fmt.Sprintf("WorkflowType = '%s' AND %s = '%s'", contract.ExamWorkflow, exam.AttrState, st))
		if err != nil {
			warn("exams", err)
			break
		}
		gauge(c.exams, float64(n), string(st))
	}
	for _, b := range exam.Buckets() {
		n, oldest, err := c.s.waitingExams(ctx, b)
		if err != nil {
			warn("waiting", err)
			break
		}
		gauge(c.waiting, float64(n), string(b))
		gauge(c.oldest, oldest.Seconds(), string(b))
	}
	if queues, err := c.s.queueStats(ctx); err != nil {
		warn("queues", err)
	} else {
		for _, q := range queues {
			gauge(c.backlog, float64(q.backlog), q.name)
			gauge(c.backlogAge, q.age.Seconds(), q.name)
			gauge(c.pollers, float64(q.pollers), q.name)
		}
	}
	nodes, err := c.s.nodeViews(ctx)
	if err != nil {
		warn("nodes", err)
		return
	}
	now := time.Now()
	for _, n := range nodes {
		up := 1.0
		if n.Status == "down" {
			up = 0
		}
		gauge(c.nodeUp, up, n.NodeID)
		gauge(c.reportAge, now.Sub(n.LastReportAt).Seconds(), n.NodeID)
		gauge(c.inFlight, float64(n.InFlight), n.NodeID)
		degraded := 0.0
		if n.Health.State == contract.Degraded {
			degraded = 1
		}
		gauge(c.degraded, degraded, n.NodeID)
		if p := n.Pace; p != nil {
			if p.Probes > 0 {
				gauge(c.probe, p.ProbeMs/1000, n.NodeID)
			}
			for stage, sp := range p.Stages {
				gauge(c.stageTime, sp.MedianMs/1000, n.NodeID, string(stage))
			}
		}
		for _, st := range []exam.BreakerState{exam.BreakerClosed, exam.BreakerHalfOpen, exam.BreakerOpen} {
			v := 0.0
			if n.Breaker.State == st {
				v = 1
			}
			gauge(c.breaker, v, n.NodeID, string(st))
		}
		for _, g := range n.GPUs {
			idx := fmt.Sprint(g.Index)
			gauge(c.gpuUtil, float64(g.UtilizationPct)/100, n.NodeID, idx)
			gauge(c.gpuMemUsed, float64(g.MemoryTotalMiB-min(g.MemoryFreeMiB, g.MemoryTotalMiB))*(1<<20), n.NodeID, idx)
			gauge(c.gpuMemTotal, float64(g.MemoryTotalMiB)*(1<<20), n.NodeID, idx)
			h := 0.0
			if g.Healthy {
				h = 1
			}
			gauge(c.healthy, h, n.NodeID, idx)
			for _, f := range exam.GPUFaults() {
				v := 0.0
				if slices.Contains(g.Faults, f) {
					v = 1
				}
				gauge(c.gpuFault, v, n.NodeID, idx, string(f))
			}
			if g.TemperatureC > 0 {
				gauge(c.gpuTemp, float64(g.TemperatureC), n.NodeID, idx)
			}
		}
	}
}

// count counts the workflows a visibility query matches.
func (s *Server) count(ctx context.Context, query string) (int64, error) {
	resp, err := s.cfg.Temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
	if err != nil {
		return 0, err
	}
	return resp.GetCount(), nil
}

// waitingExams counts the exams of a bucket whose pipeline still runs
// and finds how long the oldest of them has been in it (reading at most
// oldestScanLimit of them).
func (s *Server) waitingExams(ctx context.Context, b exam.Priority) (int64, time.Duration, error) {
	query := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running' AND %s = '%s'", contract.ExamWorkflow, exam.AttrPriority, b)
	n, err := s.count(ctx, query)
	if err != nil || n == 0 {
		return n, 0, err
	}
	var oldest time.Time
	var token []byte
	for read := 0; read < oldestScanLimit; {
		resp, err := s.cfg.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: query, PageSize: 1000, NextPageToken: token})
		if err != nil {
			return 0, 0, err
		}
		for _, e := range resp.GetExecutions() {
			if t := e.GetStartTime().AsTime(); oldest.IsZero() || t.Before(oldest) {
				oldest = t
			}
		}
		read += len(resp.GetExecutions())
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	if oldest.IsZero() {
		return n, 0, nil
	}
	return n, time.Since(oldest), nil
}
