package app

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"octflow/activities"
	"octflow/exam"
	"octflow/workflows"
)

// counters are the registry's series of name: label set (k=v, sorted by
// the registry) → value.
func counters(t *testing.T, m *Metrics, name string) map[string]float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			out[labelString(s.GetLabel())] = s.GetCounter().GetValue()
		}
	}
	return out
}

func labelString(ls []*dto.LabelPair) string {
	s := ""
	for _, l := range ls {
		s += l.GetName() + "=" + l.GetValue() + ","
	}
	return s
}

// shipped is the pipeline octflow ships.
var shipped = activities.Pipeline().Specs()

// seriesByName is workflows.Counters(stages) by counter name.
func seriesByName(stages exam.Pipeline) map[string][]workflows.Counter {
	out := map[string][]workflows.Counter{}
	for _, c := range workflows.Counters(stages) {
		out[c.Name] = append(out[c.Name], c)
	}
	return out
}

// newWorker makes (never starts) an SDK worker on queue with m's
// handler, as workers.Start does: no server is needed to make one.
func newWorker(t *testing.T, m *Metrics, queue string) {
	t.Helper()
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1", Namespace: "octflow", MetricsHandler: m.SDK})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	worker.New(c, queue, worker.Options{})
}

func TestAWorkflowWorkerExposesTheWorkflowsCountersAtZeroFromItsStart(t *testing.T) {
	m := NewMetrics(shipped)
	defer m.Close()
	for name := range seriesByName(shipped) {
		if got := counters(t, m, name); len(got) != 0 {
			t.Errorf("%s before any worker: %v, want no series", name, got)
		}
	}
	newWorker(t, m, exam.GPUQueue)
	if got := counters(t, m, "octflow_urgent_sla_breaches_total"); len(got) != 0 {
		t.Errorf("a GPU queue's worker made the workflow's counters: %v", got)
	}
	newWorker(t, m, exam.WorkflowQueue)
	// The label set the SDK gives a metric of workflow code: the client's
	// tags, the worker's task queue (tally's sanitiser writes "_" for "-"),
	// the workflow's type.
	want := "activity_type=none,client_name=temporal_go,namespace=octflow,task_queue=oct_workflows,worker_type=none,workflow_type=ExamWorkflow,"
	for name, series := range seriesByName(shipped) {
		got := counters(t, m, name)
		if len(got) != len(series) {
			t.Errorf("%s: %v, want %d series", name, got, len(series))
		}
		for labels, v := range got {
			if v != 0 {
				t.Errorf("%s{%s} = %v, want 0", name, labels, v)
			}
			if series[0].Tags == nil && labels != want {
				t.Errorf("%s has labels %s, want %s", name, labels, want)
			}
		}
	}
	if got := counters(t, m, "octflow_promotions_total"); len(got) != 2 {
		t.Errorf("promotions: %v, want low→normal and normal→urgent", got)
	}
	// The export's counter carries the export workflow's type, as its
	// increments will.
	exports := counters(t, m, "octflow_exports_total")
	for labels := range exports {
		if !strings.Contains(labels, "workflow_type=ExportWorkflow,") || !strings.Contains(labels, "outcome=") {
			t.Errorf("exports counter labelled %s", labels)
		}
	}
	if len(exports) != 2 {
		t.Errorf("exports: %v, want delivered and failed", exports)
	}
}
