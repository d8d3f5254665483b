package workflows

import (
	"octflow/contract"
	"octflow/exam"
)

// The counters the workflows keep through workflow.GetMetricsHandler.
// Counters lists each with every tag set it is kept with.
const (
	// IllegalTransitionsCounter counts the moves of an exam that
	// lifecycle's table forbids (never applied).
	IllegalTransitionsCounter = "octflow_illegal_transitions_total"
	// StageHedgesCounter counts the hedged stages, by stage and by which
	// try won ("hedge", "original", "neither").
	StageHedgesCounter = "octflow_stage_hedges_total"
	// PromotionsCounter counts the stages promoted a bucket after aging,
	// by the buckets from and to.
	PromotionsCounter = "octflow_promotions_total"
	// UrgentSLABreachesCounter counts the urgent exams with no report
	// within the SLA.
	UrgentSLABreachesCounter = "octflow_urgent_sla_breaches_total"
	// ExportsCounter counts the PACS exports that ended, by outcome
	// ("delivered", "failed").
	ExportsCounter = "octflow_exports_total"
	// NodeHealthChangesCounter counts the fleet's changes of a node's
	// health, by the health it changed to.
	NodeHealthChangesCounter = "octflow_node_health_changes_total"
)

// The hedge's outcomes, the won tag of StageHedgesCounter.
const (
	hedgeWon    = "hedge"
	originalWon = "original"
	neitherWon  = "neither"
)

// The export's outcomes, the outcome tag of ExportsCounter.
const (
	exportDelivered = "delivered"
	exportFailed    = "failed"
)

// Counter is one series of a counter the workflows keep: its name, the
// type of the workflow that keeps it, and the tags the workflow sets.
type Counter struct {
	Name string
	// Workflow is the workflow type the series is labelled with
	// (workflow_type, which the SDK sets).
	Workflow string
	// Tags are the tags the workflow sets; nil: none.
	Tags map[string]string
}

// Counters is every series of the counters the workflows keep when the
// exam's workflow runs stages: the hedges are those of its GPU stages.
// A process's registry creates each at 0 when a worker of the workflow
// queue is made (app.NewMetrics): tally's Prometheus reporter would
// otherwise create a series only at its first increment, with the value
// 1, and an increase() over it would never see the first breach or
// illegal transition after a worker starts.
func Counters(stages exam.Pipeline) []Counter {
	out := []Counter{
		{Name: IllegalTransitionsCounter, Workflow: contract.ExamWorkflow},
		{Name: UrgentSLABreachesCounter, Workflow: contract.ExamWorkflow},
	}
	for _, from := range exam.Buckets() {
		if from.Up() != from {
			out = append(out, Counter{Name: PromotionsCounter, Workflow: contract.ExamWorkflow,
				Tags: map[string]string{"from": string(from), "to": string(from.Up())}})
		}
	}
	for _, spec := range stages {
		if !spec.GPU {
			continue
		}
		for _, won := range []string{hedgeWon, originalWon, neitherWon} {
			out = append(out, Counter{Name: StageHedgesCounter, Workflow: contract.ExamWorkflow,
				Tags: map[string]string{"stage": string(spec.Stage), "won": won}})
		}
	}
	for _, outcome := range []string{exportDelivered, exportFailed} {
		out = append(out, Counter{Name: ExportsCounter, Workflow: contract.ExportWorkflow,
			Tags: map[string]string{"outcome": outcome}})
	}
	for _, to := range []string{contract.Healthy, contract.Degraded} {
		out = append(out, Counter{Name: NodeHealthChangesCounter, Workflow: contract.FleetWorkflow,
			Tags: map[string]string{"to": to}})
	}
	return out
}
