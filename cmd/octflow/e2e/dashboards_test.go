package e2e

// Grafana's dashboards (deploy/grafana/dashboards) are generated from the
// specs below, so every query is in Go where a test can read it:
//
//	OCTFLOW_WRITE_DASHBOARDS=1 go test ./cmd/octflow/e2e -run TestDashboards
//
// rewrites them. The tests check the files match the specs, every query
// parses as PromQL (promtool), and (in the metrics test) every metric a
// query names is one the system exports.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// panel is one graph: its queries and how to show them.
type panel struct {
	title, unit, kind string // kind: timeseries (default) or stat
	queries           []query
}

type query struct{ expr, legend string }

// dashboard is one provisioned dashboard.
type dashboard struct {
	uid, title string
	vars       []string // template variables over label values: "node"
	panels     []panel
}

func dashboards() []dashboard {
	return []dashboard{
		{uid: "octflow-overview", title: "octflow: overview", panels: []panel{
			{title: "Exams accepted per minute, by campus", unit: "short", queries: []query{
				{`sum by (campus) (rate(octflow_exam_arrivals_total[5m])) * 60`, "{{campus}}"}}},
			{title: "Exams by state", unit: "short", queries: []query{
				{`octflow_exams`, "{{state}}"}}},
			{title: "Waiting exams by bucket", unit: "short", queries: []query{
				{`octflow_waiting_exams`, "{{bucket}}"}}},
			{title: "Oldest wait by bucket", unit: "s", queries: []query{
				{`octflow_oldest_wait_seconds`, "{{bucket}}"}}},
			{title: "Stage failures per minute, by reason", unit: "short", queries: []query{
				{`sum by (reason) (rate(octflow_stage_failures_total[5m])) * 60`, "{{reason}}"}}},
			{title: "Urgent SLA breaches, duplicate reports, illegal moves (1 h)", unit: "short", kind: "stat", queries: []query{
				{`sum(increase(octflow_urgent_sla_breaches_total[1h]))`, "SLA breaches"},
				{`sum(increase(octflow_duplicate_reports_total[1h]))`, "duplicate reports"},
				{`sum(increase(octflow_timeline_illegal_transitions_total[1h]))`, "illegal moves seen"}}},
		}},
		{uid: "octflow-queues", title: "octflow: queues and buckets", panels: []panel{
			{title: "Backlog by task queue", unit: "short", queries: []query{
				{`octflow_queue_backlog`, "{{queue}}"}}},
			{title: "Oldest task by task queue", unit: "s", queries: []query{
				{`octflow_queue_oldest_task_age_seconds`, "{{queue}}"}}},
			{title: "Pollers by task queue", unit: "short", queries: []query{
				{`octflow_queue_pollers`, "{{queue}}"}}},
			{title: "Waiting exams by bucket", unit: "short", queries: []query{
				{`octflow_waiting_exams`, "{{bucket}}"}}},
			{title: "Oldest wait by bucket", unit: "s", queries: []query{
				{`octflow_oldest_wait_seconds`, "{{bucket}}"}}},
			{title: "Aging promotions per hour", unit: "short", queries: []query{
				{`sum by (from, to) (increase(octflow_promotions_total[1h]))`, "{{from}} → {{to}}"}}},
		}},
		{uid: "octflow-nodes", title: "octflow: GPU nodes", vars: []string{"node"}, panels: []panel{
			{title: "Nodes up", unit: "short", kind: "stat", queries: []query{
				{`sum(octflow_node_up)`, "up"}, {`count(octflow_node_up == 0)`, "down"}}},
			{title: "Seconds since each node's last report", unit: "s", queries: []query{
				{`octflow_node_report_age_seconds{node=~"$node"}`, "{{node}}"}}},
			{title: "GPU utilisation", unit: "percentunit", queries: []query{
				{`octflow_gpu_utilization_ratio{node=~"$node"}`, "{{node}} GPU {{gpu}}"}}},
			{title: "GPU memory in use", unit: "bytes", queries: []query{
				{`octflow_gpu_memory_used_bytes{node=~"$node"}`, "{{node}} GPU {{gpu}}"}}},
			{title: "Stages in flight", unit: "short", queries: []query{
				{`octflow_node_slots_in_use{node=~"$node"}`, "{{node}}"}}},
			{title: "Breaker open", unit: "short", queries: []query{
				{`octflow_node_breaker_state{node=~"$node", state="open"}`, "{{node}}"}}},
			{title: "Stage runs per minute by node", unit: "short", queries: []query{
				{`sum by (node) (rate(octflow_stage_duration_seconds_count{node=~"$node"}[5m])) * 60`, "{{node}}"}}},
		}},
		// What octflow stands on: the Temporal server's own metrics (job
		// temporal), PostgreSQL's (postgres-exporter, job postgresql) and
		// the disk under the volumes (node-exporter, job node). Their names
		// are not octflow's: the compose test checks each panel's queries
		// answer with data from the stack's Prometheus.
		{uid: "octflow-platform", title: "octflow: Temporal, PostgreSQL and the disk", panels: []panel{
			{title: "Temporal: requests per second by service", unit: "reqps", queries: []query{
				{`sum by (service_name) (rate(service_requests{job="temporal"}[5m]))`, "{{service_name}}"}}},
			{title: "Temporal: request latency p95 by service", unit: "s", queries: []query{
				{`histogram_quantile(0.95, sum by (service_name, le) (rate(service_latency_bucket{job="temporal"}[5m])))`, "{{service_name}}"}}},
			{title: "Temporal: errors per second by type", unit: "reqps", queries: []query{
				{`sum by (service_name, error_type) (rate(service_error_with_type{job="temporal"}[5m]))`, "{{service_name}} {{error_type}}"}}},
			{title: "Temporal: persistence latency p95 by service", unit: "s", queries: []query{
				{`histogram_quantile(0.95, sum by (service_name, le) (rate(persistence_latency_bucket{job="temporal"}[5m])))`, "{{service_name}}"}}},
			{title: "Temporal: persistence errors per second by type", unit: "reqps", queries: []query{
				{`sum by (error_type) (rate(persistence_error_with_type{job="temporal"}[5m]))`, "{{error_type}}"}}},
			{title: "Temporal: SQL connections in use, open, and the pools' cap", unit: "short", queries: []query{
				{`sum by (db_kind) (persistence_sql_in_use{job="temporal"})`, "in use ({{db_kind}})"},
				{`sum by (db_kind) (persistence_sql_open_conn{job="temporal"})`, "open ({{db_kind}})"},
				{`sum by (db_kind) (persistence_sql_max_open_conn{job="temporal"})`, "cap ({{db_kind}})"}}},
			{title: "Temporal: task schedule-to-start p95 by task queue", unit: "s", queries: []query{
				{`histogram_quantile(0.95, sum by (taskqueue, le) (rate(task_schedule_to_start_latency_bucket{job="temporal"}[5m])))`, "{{taskqueue}}"}}},
			{title: "PostgreSQL up", unit: "short", kind: "stat", queries: []query{
				{`pg_up{job="postgresql"}`, "up"}}},
			{title: "PostgreSQL connections against max_connections", unit: "short", queries: []query{
				{`sum(pg_stat_database_numbackends{job="postgresql"})`, "connections"},
				{`max(pg_settings_max_connections{job="postgresql"})`, "max_connections"}}},
			{title: "PostgreSQL transactions per second by database", unit: "short", queries: []query{
				{`sum by (datname) (rate(pg_stat_database_xact_commit{job="postgresql"}[5m]))`, "{{datname}} commits"},
				{`sum by (datname) (rate(pg_stat_database_xact_rollback{job="postgresql"}[5m]))`, "{{datname}} rollbacks"}}},
			{title: "PostgreSQL database size", unit: "bytes", queries: []query{
				{`pg_database_size_bytes{job="postgresql"}`, "{{datname}}"}}},
			{title: "Free space under the volumes", unit: "percentunit", queries: []query{
				{`node_filesystem_avail_bytes{job="node"} / node_filesystem_size_bytes{job="node"}`, "{{mountpoint}}"}}},
		}},
		// Prometheus keeps no exam (no exam is ever a label): this is the
		// life of an exam's stages across all exams. One exam's own
		// timeline is GET /v1/exams/{id}/events, or the Temporal Web UI.
		{uid: "octflow-stages", title: "octflow: an exam's stages", panels: []panel{
			{title: "Stage duration, p50", unit: "s", queries: []query{
				{`histogram_quantile(0.5, sum by (stage, le) (rate(octflow_stage_duration_seconds_bucket[5m])))`, "{{stage}}"}}},
			{title: "Stage duration, p99", unit: "s", queries: []query{
				{`histogram_quantile(0.99, sum by (stage, le) (rate(octflow_stage_duration_seconds_bucket[5m])))`, "{{stage}}"}}},
			{title: "Failed share of stage runs", unit: "percentunit", queries: []query{
				{`sum by (stage) (rate(octflow_stage_failures_total[10m])) / sum by (stage) (rate(octflow_stage_duration_seconds_count[10m]))`, "{{stage}}"}}},
			{title: "Failures by stage and reason", unit: "short", queries: []query{
				{`sum by (stage, reason) (increase(octflow_stage_failures_total[1h]))`, "{{stage}} {{reason}}"}}},
		}},
	}
}

// grafanaJSON renders a dashboard as Grafana provisions it.
func (d dashboard) grafanaJSON() ([]byte, error) {
	ds := map[string]any{"type": "prometheus", "uid": "prometheus"}
	var panels []any
	for i, p := range d.panels {
		kind := p.kind
		if kind == "" {
			kind = "timeseries"
		}
		var targets []any
		for j, q := range p.queries {
			targets = append(targets, map[string]any{"datasource": ds, "expr": q.expr, "legendFormat": q.legend,
				"refId": string(rune('A' + j))})
		}
		panels = append(panels, map[string]any{
			"id": i + 1, "type": kind, "title": p.title, "datasource": ds, "targets": targets,
			"gridPos":     map[string]int{"x": (i % 2) * 12, "y": (i / 2) * 8, "w": 12, "h": 8},
			"fieldConfig": map[string]any{"defaults": map[string]any{"unit": p.unit}, "overrides": []any{}},
		})
	}
	var vars []any
	for _, v := range d.vars {
		vars = append(vars, map[string]any{"name": v, "type": "query", "datasource": ds, "includeAll": true, "multi": true,
			"query":   map[string]any{"query": fmt.Sprintf("label_values(octflow_node_up, %s)", v), "refId": "vars"},
			"refresh": 2, "current": map[string]any{"text": "All", "value": "$__all"}})
	}
	b, err := json.MarshalIndent(map[string]any{
		"uid": d.uid, "title": d.title, "tags": []string{"octflow"}, "schemaVersion": 39, "editable": false,
		"time": map[string]string{"from": "now-6h", "to": "now"}, "refresh": "30s",
		"templating": map[string]any{"list": vars}, "panels": panels,
	}, "", "  ")
	return append(b, '\n'), err
}

// dashboardDir is where Grafana's provisioning reads the dashboards.
func dashboardDir() string { return filepath.Join(repoRoot, "deploy", "grafana", "dashboards") }

func TestDashboardsAreGeneratedFromTheirSpecs(t *testing.T) {
	write := os.Getenv("OCTFLOW_WRITE_DASHBOARDS") != ""
	for _, d := range dashboards() {
		want, err := d.grafanaJSON()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dashboardDir(), d.uid+".json")
		if write {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s differs from its spec (%v); regenerate: OCTFLOW_WRITE_DASHBOARDS=1 go test ./cmd/octflow/e2e -run TestDashboards", path, err)
		}
	}
}

// dashboardExprs are every dashboard query, with Grafana's variables
// given a value so that PromQL can parse them.
func dashboardExprs() []string {
	var out []string
	for _, d := range dashboards() {
		for _, p := range d.panels {
			for _, q := range p.queries {
				out = append(out, strings.ReplaceAll(q.expr, "$node", ".*"))
			}
		}
	}
	return out
}

func TestEveryDashboardQueryParsesAsPromQL(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is missing (Debian package prometheus)")
		}
		t.Skip("promtool not installed")
	}
	// promtool parses every expression of a rules file with Prometheus's
	// own parser.
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboards\n    rules:\n")
	for i, e := range dashboardExprs() {
		b, _ := json.Marshal(e)
		fmt.Fprintf(&rules, "      - record: dashboard:query_%d\n        expr: %s\n", i, b)
	}
	path := filepath.Join(t.TempDir(), "dashboards.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

// dashboardMetrics are the metric names the dashboards query.
func dashboardMetrics() []string {
	var out []string
	for _, e := range dashboardExprs() {
		out = append(out, regexp.MustCompile(`octflow_[a-z_]+|temporal_[a-z_]+`).FindAllString(e, -1)...)
	}
	return out
}
