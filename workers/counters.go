package workers

import (
	"octflow/contract"
	"octflow/exam"
)

// WorkflowCounters are the counters the workflows keep through
// workflow.GetMetricsHandler, each with the extra tags it sets (one
// entry per tag set; a workflow_type among them names a workflow other
// than the exam's). The process's registry (app.NewMetrics) creates
// every one at 0 when a worker of the workflow queue is made: tally's
// Prometheus reporter would otherwise create a series only at its first
// increment, with the value 1, and an increase() over it would never
// see the first breach or illegal transition after a worker starts. The
// hedges are those of the GPU stages of stages, the pipeline the
// workflows run.
func WorkflowCounters(stages exam.Pipeline) map[string][]map[string]string {
	promotions := []map[string]string{}
	for _, from := range exam.Buckets() {
		if from.Up() != from {
			promotions = append(promotions, map[string]string{"from": string(from), "to": string(from.Up())})
		}
	}
	hedges := []map[string]string{}
	for _, spec := range stages {
		if !spec.GPU {
			continue
		}
		for _, won := range []string{"hedge", "original", "neither"} {
			hedges = append(hedges, map[string]string{"stage": string(spec.Stage), "won": won})
		}
	}
	health := []map[string]string{}
	for _, to := range []string{contract.Healthy, contract.Degraded} {
		health = append(health, map[string]string{"workflow_type": contract.FleetWorkflow, "to": to})
	}
	return map[string][]map[string]string{
		"octflow_stage_hedges_total":        hedges,
		"octflow_node_health_changes_total": health,
		"octflow_urgent_sla_breaches_total": {nil},
		"octflow_illegal_transitions_total": {nil},
		"octflow_promotions_total":          promotions,
		"octflow_exports_total": {
			{"workflow_type": contract.ExportWorkflow, "outcome": "delivered"},
			{"workflow_type": contract.ExportWorkflow, "outcome": "failed"},
		},
	}
}
