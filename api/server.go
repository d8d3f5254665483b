// Package api is octflow's HTTP gateway (Echo): devices submit exams,
// clinicians and admins read them. It authenticates bearer tokens by
// role, validates every upload before anything is stored, pseudonymises
// patient identifiers, stores the scan and starts the exam's workflow
// with the exam ID as workflow ID, which makes submission idempotent.
// Errors are RFC 9457 problem+json.
package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"octflow/activities"
	"octflow/exam"
	"octflow/lifecycle"
)

// ObjectStore is what the gateway needs of the object store.
type ObjectStore interface {
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
	Get(ctx context.Context, key string) (io.ReadCloser, int64, error)
	Delete(ctx context.Context, key string) error
	Ping(ctx context.Context) error
}

// Config holds the gateway's dependencies and limits.
type Config struct {
	Temporal client.Client
	// Namespace is the Temporal namespace (default "default").
	Namespace     string
	Store         ObjectStore
	Tokens        *Tokens
	Pseudonymizer *Pseudonymizer
	Logger        *zap.Logger
	// Codec decodes what Temporal stores: the converters the Temporal
	// client was built with (default: Temporal's own).
	Codec lifecycle.Codec
	// Registerer, when set, takes the gateway's own metrics.
	Registerer prometheus.Registerer
	// Policy is the scheduling policy new exams run under; New refuses
	// one that does not validate.
	Policy exam.Policy
	// MaxScanBytes bounds an upload (default 512 MiB).
	MaxScanBytes int64
	// SpoolDir holds uploads while they are validated (default: os.TempDir).
	SpoolDir string
	// Metrics, when set, is served at GET /metrics.
	Metrics http.Handler
	// Callbacks decides which callback URLs a device may give.
	Callbacks *activities.CallbackGuard
	// NotifyPoll is how often the event stream reads the inbox (default 1 s).
	NotifyPoll time.Duration
	// DeviceRate limits each device's submissions.
	DeviceRate RateLimit
	// MaxConcurrentUploads bounds the uploads being received and
	// validated at once (default 4): validation holds a whole volume in
	// memory. UploadWait is how long a submission may wait for a turn
	// (default 30 s) before it is answered 503 with Retry-After.
	MaxConcurrentUploads int
	UploadWait           time.Duration
}

// Server is the HTTP gateway.
type Server struct {
	cfg     Config
	echo    *echo.Echo
	uploads chan struct{} // one token per upload in progress
	// illegal counts forbidden moves found while folding histories.
	illegal prometheus.Counter
}

// New builds the gateway and its routes.
func New(cfg Config) (*Server, error) {
	if err := cfg.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if cfg.Codec.Data == nil || cfg.Codec.Failure == nil {
		cfg.Codec = lifecycle.DefaultCodec()
	}
	if cfg.MaxScanBytes == 0 {
		cfg.MaxScanBytes = 512 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.NotifyPoll == 0 {
		cfg.NotifyPoll = time.Second
	}
	if cfg.MaxConcurrentUploads <= 0 {
		cfg.MaxConcurrentUploads = 4
	}
	if cfg.UploadWait == 0 {
		cfg.UploadWait = 30 * time.Second
	}
	s := &Server{cfg: cfg, echo: echo.New(), uploads: make(chan struct{}, cfg.MaxConcurrentUploads),
		illegal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "octflow_timeline_illegal_transitions_total",
			Help: "State transitions the lifecycle table forbids, found while folding an exam's history.",
		})}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(s.illegal); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	e := s.echo
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(cfg.Logger)
	e.Use(middleware.RequestID())
	e.Use(middleware.Recover())
	e.Use(s.accessLog)

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/openapi.yaml", serveOpenAPI)
	if cfg.Metrics != nil {
		e.GET("/metrics", echo.WrapHandler(cfg.Metrics))
	}
	v1 := e.Group("/v1")
	v1.POST("/exams", s.submitExam, cfg.Tokens.require(RoleDevice), deviceLimit(cfg.DeviceRate))
	v1.GET("/exams/:examId", s.getExam, cfg.Tokens.require(RoleDevice, RoleClinician, RoleAdmin))
	v1.GET("/exams/:examId/events", s.getEvents, cfg.Tokens.require(RoleClinician, RoleAdmin))
	v1.GET("/exams/:examId/report", s.getReport, cfg.Tokens.require(RoleClinician, RoleAdmin))
	v1.POST("/exams/:examId/review", s.postReview, cfg.Tokens.require(RoleClinician))
	v1.POST("/exams/:examId/rerun", s.rerunExam, cfg.Tokens.require(RoleAdmin))
	v1.GET("/notifications", s.notifications, cfg.Tokens.require(RoleClinician))
	v1.GET("/nodes", s.listNodes, cfg.Tokens.require(RoleAdmin))
	v1.GET("/queues", s.listQueues, cfg.Tokens.require(RoleAdmin))
	v1.POST("/nodes/:nodeId/breaker/reset", s.resetBreaker, cfg.Tokens.require(RoleAdmin))
	return s, nil
}

// ServeHTTP makes the gateway an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 only when Temporal and the object store answer.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 3*time.Second)
	defer cancel()
	if _, err := s.cfg.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return problem(http.StatusServiceUnavailable, "not-ready", "temporal: "+err.Error())
	}
	if err := s.cfg.Store.Ping(ctx); err != nil {
		return problem(http.StatusServiceUnavailable, "not-ready", "object store: "+err.Error())
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

// accessLog logs method, route (the pattern, never the exam ID or any
// query), status and duration.
func (s *Server) accessLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		s.cfg.Logger.Info("http",
			zap.String("method", c.Request().Method),
			zap.String("route", c.Path()),
			zap.Int("status", c.Response().Status),
			zap.Duration("took", time.Since(start)),
			zap.String("requestId", c.Response().Header().Get(echo.HeaderXRequestID)),
			zap.String("principal", principal(c).Name))
		return nil
	}
}
