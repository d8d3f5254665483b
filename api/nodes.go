package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

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
}

// listNodes serves GET /v1/nodes from the fleet workflow.
func (s *Server) listNodes(c echo.Context) error {
	views, err := s.nodeViews(c.Request().Context())
	if err != nil {
		return problem(http.StatusServiceUnavailable, "unavailable", "fleet: "+err.Error())
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
			ResetGeneration: n.ResetGeneration, ResetsApplied: n.Report.ResetsApplied}
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
	handle, err := s.cfg.Temporal.UpdateWorkflow(c.Request().Context(), client.UpdateWorkflowOptions{
		WorkflowID: contract.FleetWorkflowID, UpdateName: contract.ResetBreakerUpdate,
		Args: []any{nodeID}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if isNotFound(err) {
		return problem(http.StatusNotFound, "not-found", "no node has reported yet")
	} else if err != nil {
		return problem(http.StatusServiceUnavailable, "unavailable", "fleet: "+err.Error())
	}
	var gen int
	if err := handle.Get(c.Request().Context(), &gen); err != nil {
		var rejected *temporal.ApplicationError // the fleet knows no such node
		if errors.As(err, &rejected) {
			return problem(http.StatusNotFound, "not-found", "no such node")
		}
		return problem(http.StatusServiceUnavailable, "unavailable", "fleet: "+err.Error())
	}
	s.cfg.Logger.Info("breaker reset requested", zap.String("nodeId", nodeID), zap.String("by", principal(c).Name))
	return c.JSON(http.StatusAccepted, BreakerReset{NodeID: nodeID, ResetGeneration: gen,
		Note: "the node applies the reset at its next report"})
}
