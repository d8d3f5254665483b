package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"octflow/api/intake"
	"octflow/exam"
	"octflow/lifecycle"
)

// repoRoot is the repository, made absolute when the package loads:
// versitygw moves the process into its S3 root when a stack starts.
var repoRoot, _ = filepath.Abs("../../..")

// scrape reads the dev system's /metrics into metric families.
func (h *harness) scrape() map[string]*dto.MetricFamily {
	h.t.Helper()
	resp, err := http.Get(h.sys.App.MetricsURL())
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		h.t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// samples are a family's samples by their labels ("k=v,k=v", sorted as
// exposed), the value of a gauge or counter, or a histogram's count.
func samples(f *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		var parts []string
		for _, l := range m.GetLabel() {
			parts = append(parts, l.GetName()+"="+l.GetValue())
		}
		v := m.GetGauge().GetValue() + m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		out[strings.Join(parts, ",")] = v
	}
	return out
}

func TestMetricsAfterOneExamShowEveryFamilyWithSaneValues(t *testing.T) {
	h := newHarness(t, 1)
	_, scan := phantomDICOM(t, tiny(41))
	if _, code, err := h.device.Submit(context.Background(), intake.Meta{ExamID: "metrics-1", Priority: "urgent"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	if st := h.waitTerminal("metrics-1"); st.State != lifecycle.Completed {
		t.Fatalf("exam ended %s", st.State)
	}
	node := "sim-gpu-node-1"
	campus := h.sys.Secrets.Campus
	type check struct {
		family, labels string
		ok             func(float64) bool
		want           string
	}
	one := func(v float64) bool { return v == 1 }
	zero := func(v float64) bool { return v == 0 }
	atLeastOne := func(v float64) bool { return v >= 1 }
	checks := []check{
		{"octflow_exams", "state=COMPLETED", atLeastOne, "≥ 1"},
		{"octflow_exams", "state=QUEUED", zero, "0"},
		{"octflow_waiting_exams", "bucket=urgent", zero, "0"},
		{"octflow_oldest_wait_seconds", "bucket=low", zero, "0"},
		{"octflow_queue_backlog", "queue=" + exam.GPUQueue, zero, "0"},
		{"octflow_queue_oldest_task_age_seconds", "queue=" + exam.CPUQueue, zero, "0"},
		{"octflow_queue_pollers", "queue=" + exam.WorkflowQueue, atLeastOne, "≥ 1"},
		{"octflow_node_up", "node=" + node, one, "1"},
		{"octflow_node_report_age_seconds", "node=" + node, func(v float64) bool { return v >= 0 && v < 10 }, "in [0, 10) s"},
		{"octflow_node_breaker_state", "node=" + node + ",state=closed", one, "1"},
		{"octflow_node_breaker_state", "node=" + node + ",state=open", zero, "0"},
		{"octflow_node_slots_in_use", "node=" + node, zero, "0"},
		{"octflow_gpu_utilization_ratio", "gpu=0,node=" + node, func(v float64) bool { return v >= 0 && v <= 1 }, "in [0, 1]"},
		{"octflow_gpu_memory_total_bytes", "gpu=0,node=" + node, func(v float64) bool { return v >= 1<<30 }, "≥ 1 GiB"},
		{"octflow_gpu_memory_used_bytes", "gpu=0,node=" + node, func(v float64) bool { return v >= 0 }, "≥ 0"},
		{"octflow_gpu_healthy", "gpu=0,node=" + node, one, "1"},
		{"octflow_gpu_fault", "fault=xid,gpu=0,node=" + node, zero, "0"},
		{"octflow_gpu_fault", "fault=thermal,gpu=0,node=" + node, zero, "0"},
		{"octflow_stage_failures_total", "reason=failed,stage=layers", zero, "0"},
		{"octflow_duplicate_reports_total", "outcome=rewritten", zero, "0"},
		{"octflow_duplicate_reports_total", "outcome=refused", zero, "0"},
		// The gateway stored the scan, the report stage read the stage
		// outputs and wrote the report: what this process asked of S3.
		{"octflow_object_store_requests_total", "op=put", func(v float64) bool { return v >= 3 }, "≥ 3 (scan, report JSON and PDF)"},
		{"octflow_object_store_requests_total", "op=get", atLeastOne, "≥ 1"},
		{"octflow_object_store_bytes_total", "direction=written", func(v float64) bool { return v >= 4<<10 }, "≥ 4 KiB"},
		{"octflow_object_store_bytes_total", "direction=read", atLeastOne, "≥ 1"},
	}
	for _, s := range shipped().Stages() {
		// The node runs GPU stages; the CPU stages run on the dev worker.
		n := node
		if !shipped().GPU(s) {
			n = "octflow-dev"
		}
		checks = append(checks, check{"octflow_stage_duration_seconds", "node=" + n + ",outcome=ok,stage=" + string(s), one, "1 stage run"})
	}
	// The arrivals counter is labelled with the device that sent the exam.
	var fams map[string]*dto.MetricFamily
	deadline := time.Now().Add(15 * time.Second)
	for {
		fams = h.scrape()
		bad := ""
		for _, c := range checks {
			v, ok := samples(fams[c.family])[c.labels]
			if !ok || !c.ok(v) {
				bad = c.family + "{" + c.labels + "}"
				break
			}
		}
		if bad == "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond) // visibility and the fleet view catch up
	}
	for _, c := range checks {
		got := samples(fams[c.family])
		if v, ok := got[c.labels]; !ok || !c.ok(v) {
			t.Errorf("%s{%s} = %v (present %v), want %s; family: %v", c.family, c.labels, v, ok, c.want, got)
		}
	}
	arrivals := samples(fams["octflow_exam_arrivals_total"])
	total := 0.0
	for labels, v := range arrivals {
		if !strings.Contains(labels, "campus="+campus) {
			t.Errorf("arrival from another campus: %s", labels)
		}
		total += v
	}
	if total != 1 {
		t.Errorf("octflow_exam_arrivals_total sums to %v, want 1: %v", total, arrivals)
	}
	// The alert rules name only metrics the system exports.
	rules, err := os.ReadFile(filepath.Join(repoRoot, "deploy/prometheus/rules/octflow.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert, Expr string
			}
		}
	}
	if err := yaml.Unmarshal(rules, &file); err != nil {
		t.Fatal(err)
	}
	// Counted by workflow code through the SDK: a family appears with its
	// first event (an aging promotion, a breach, a refused move).
	onFirstEvent := map[string]bool{"octflow_promotions_total": true, "octflow_urgent_sla_breaches_total": true,
		"octflow_illegal_transitions_total": true}
	// Exported only by a process that holds or checks a certificate,
	// which this dev system without TLS does not
	// (TestTheGatewayServesHTTPSWithItsCertificate reads it).
	withTLS := map[string]bool{"octflow_certificate_expiry_timestamp_seconds": true}
	exported := func(name string) bool {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_count"), "_bucket"), "_sum")
		return fams[name] != nil || fams[base] != nil || onFirstEvent[name] || withTLS[name]
	}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			for _, name := range regexp.MustCompile(`octflow_[a-z_]+`).FindAllString(r.Expr, -1) {
				if !exported(name) {
					t.Errorf("alert %s uses %s, which /metrics does not export", r.Alert, name)
				}
			}
		}
	}
	// So do the dashboards.
	for _, name := range dashboardMetrics() {
		if !exported(name) {
			t.Errorf("a dashboard queries %s, which /metrics does not export", name)
		}
	}
	// Nothing of a patient or an exam is a label.
	for name, f := range fams {
		for labels := range samples(f) {
			if strings.Contains(labels, "metrics-1") {
				t.Errorf("%s has a label with the exam ID: %s", name, labels)
			}
		}
	}
}
