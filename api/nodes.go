package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"octflow/api/auth"
	"octflow/api/problems"
	"octflow/contract"
	"octflow/exam"
)

// NodeView is one GPU node in GET /v1/nodes.
type NodeView struct {
	NodeID string `json:"nodeId"`
	// Status is up, draining (shutting down gracefully) or down (silent
	// for more than three report intervals).
	Status          string             `json:"status"`
	LastReportAt    time.Time          `json:"lastReportAt"`
	TaskQueue       string             `json:"taskQueue"`
	GPUs            []exam.GPU         `json:"gpus"`
	InFlight        int                `json:"inFlight"`
	Breaker         exam.BreakerStatus `json:"breaker"`
	ResetGeneration int                `json:"resetGeneration"`
	ResetsApplied   int                `json:"resetsApplied"`
	// Health is the fleet's judgement of the node's speed: degraded, it
	// takes no new stage.
	Health NodeHealthView `json:"health"`
	// Pace is how fast the node computes, as it last reported (nil: it
	// does not say).
	Pace *PaceView `json:"pace,omitempty"`
}

// NodeHealthView is a node's health in GET /v1/nodes and the answer to
// POST /v1/nodes/{nodeId}/health.
type NodeHealthView struct {
	State  string     `json:"state"`
	Since  *time.Time `json:"since,omitempty"`
	Reason string     `json:"reason,omitempty"`
	By     string     `json:"by,omitempty"`
	// Held: an operator marked the node degraded; only an operator's
	// healthy mark clears it.
	Held bool `json:"held"`
}

// PaceView is a node's figures: its probe and each stage's compute time.
type PaceView struct {
	Model   string                            `json:"model"`
	ProbeMs float64                           `json:"probeMs"`
	Probes  int                               `json:"probes"`
	Stages  map[exam.Stage]contract.StagePace `json:"stages"`
	Running int                               `json:"running"`
}

func healthView(h contract.NodeHealth) NodeHealthView {
	v := NodeHealthView{State: cmp.Or(h.State, contract.Healthy), Reason: h.Reason, By: h.By, Held: h.Held}
	if !h.Since.IsZero() {
		since := h.Since.UTC()
		v.Since = &since
	}
	return v
}

// listNodes serves GET /v1/nodes from the fleet workflow.
func (s *Server) listNodes(c echo.Context) error {
	views, err := s.nodeViews(c.Request().Context())
	if err != nil {
		return problems.New(http.StatusServiceUnavailable, "unavailable", "fleet: "+err.Error())
	}
	return c.JSON(http.StatusOK, views)
}

// nodeViews reads the fleet workflow: every node as it last reported.
func (s *Server) nodeViews(ctx context.Context) ([]NodeView, error) {
	val, err := s.cfg.Temporal.QueryWorkflow(ctx, contract.FleetWorkflowID, "", contract.FleetQuery)
	if isNotFound(err) {
		return []NodeView{}, nil // no node has reported yet
	} else if err != nil {
		return nil, err
	}
	var nodes []contract.FleetNode
	if err := val.Get(&nodes); err != nil {
		return nil, err
	}
	now := time.Now()
	views := make([]NodeView, 0, len(nodes))
	for _, n := range nodes {
		v := NodeView{NodeID: n.Report.NodeID, Status: "up", LastReportAt: n.LastSeen.UTC(), TaskQueue: n.Report.TaskQueue,
			GPUs: n.Report.GPUs, InFlight: n.Report.InFlight, Breaker: n.Report.Breaker,
			ResetGeneration: n.ResetGeneration, ResetsApplied: n.Report.ResetsApplied, Health: healthView(n.Health)}
		if p := n.Report.Pace; p != nil {
			v.Pace = &PaceView{Model: p.Model, ProbeMs: p.ProbeMs, Probes: p.Probes, Stages: p.Stages, Running: len(p.Running)}
			if v.Pace.Stages == nil {
				v.Pace.Stages = map[exam.Stage]contract.StagePace{}
			}
		}
		if v.GPUs == nil {
			v.GPUs = []exam.GPU{} // [], never null
		}
		switch {
		case now.Sub(n.LastSeen) > 3*n.Report.Interval:
			v.Status = "down"
		case n.Report.Draining:
			v.Status = "draining"
		}
		views = append(views, v)
	}
	return views, nil
}

// updateFleet runs an update of the fleet workflow about one node (arg
// names it) and reads its answer into out; an error is the problem to
// answer: 404 when no node has reported yet or the fleet knows no such
// node (its validator refused), 503 when the fleet cannot be reached.
func (s *Server) updateFleet(ctx context.Context, name string, arg, out any) error {
	handle, err := s.cfg.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: contract.FleetWorkflowID, UpdateName: name,
		Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if isNotFound(err) {
		return problems.New(http.StatusNotFound, "not-found", "no node has reported yet")
	} else if err != nil {
		return problems.New(http.StatusServiceUnavailable, "unavailable", "fleet: "+err.Error())
	}
	if err := handle.Get(ctx, out); err != nil {
		var rejected *temporal.ApplicationError // the fleet knows no such node
		if errors.As(err, &rejected) {
			return problems.New(http.StatusNotFound, "not-found", "no such node")
		}
		return problems.New(http.StatusServiceUnavailable, "unavailable", "fleet: "+err.Error())
	}
	return nil
}

// BreakerReset is the answer to POST /v1/nodes/{nodeId}/breaker/reset.
type BreakerReset struct {
	NodeID          string `json:"nodeId"`
	ResetGeneration int    `json:"resetGeneration"`
	Note            string `json:"note"`
}

// resetBreaker serves POST /v1/nodes/{nodeId}/breaker/reset: the reset is
// recorded in the fleet workflow and the node applies it at its next
// report.
func (s *Server) resetBreaker(c echo.Context) error {
	nodeID := c.Param("nodeId")
	var gen int
	if err := s.updateFleet(c.Request().Context(), contract.ResetBreakerUpdate, nodeID, &gen); err != nil {
		return err
	}
	s.cfg.Logger.Info("breaker reset requested", zap.String("nodeId", nodeID), zap.String("by", auth.Of(c).Name))
	return c.JSON(http.StatusAccepted, BreakerReset{NodeID: nodeID, ResetGeneration: gen,
		Note: "the node applies the reset at its next report"})
}

// NodeMarkRequest is the body of POST /v1/nodes/{nodeId}/health.
type NodeMarkRequest struct {
	// State is degraded (the node takes no new stage, and its stages are
	// hedged, until an operator marks it healthy) or healthy (the mark
	// and any judgement are cleared; the fleet judges the node afresh).
	State string `json:"state"`
}

// markNode serves POST /v1/nodes/{nodeId}/health: an operator marks a
// node degraded (a cordon) or healthy, in the fleet workflow; the node
// reads it at its next report.
func (s *Server) markNode(c echo.Context) error {
	var body NodeMarkRequest
	dec := json.NewDecoder(http.MaxBytesReader(c.Response(), c.Request().Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return problems.JSON("the mark (JSON {state})", err)
	}
	if body.State != contract.Degraded && body.State != contract.Healthy {
		return problems.New(http.StatusBadRequest, "malformed-request", `state: want "degraded" or "healthy"`)
	}
	nodeID := c.Param("nodeId")
	mark := contract.NodeMark{NodeID: nodeID, State: body.State, By: auth.Of(c).Name}
	var h contract.NodeHealth
	if err := s.updateFleet(c.Request().Context(), contract.MarkNodeUpdate, mark, &h); err != nil {
		return err
	}
	s.cfg.Logger.Info("node marked", zap.String("nodeId", nodeID), zap.String("health", body.State), zap.String("by", mark.By))
	return c.JSON(http.StatusOK, healthView(h))
}
