package api

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"octflow/api/auditing"
	"octflow/api/auth"
	"octflow/api/codecserver"
	"octflow/api/intake"
	"octflow/api/problems"
	"octflow/audit"
	"octflow/callback"
	"octflow/codec"
	"octflow/exam"
	"octflow/lifecycle"
)

// ObjectStore is what the gateway needs of the object store: what the
// intake needs, and Ping for /readyz.
type ObjectStore interface {
	intake.Store
	Ping(ctx context.Context) error
}

// Config holds the gateway's dependencies and limits.
type Config struct {
	Temporal client.Client
	// ExportCampuses are the campuses whose results go to a PACS: their
	// exams start with Export set (contract.ExamInput).
	ExportCampuses map[string]bool
	// Namespace is the Temporal namespace (default "default").
	Namespace     string
	Store         ObjectStore
	Tokens        *auth.Tokens
	Pseudonymizer *intake.Pseudonymizer
	Logger        *zap.Logger
	// AuditTrail receives one DICOM audit event per access decision,
	// allowed or refused (see package auditing): audit.Open's trail to a
	// syslog collector, or audit.NewLogSink's JSON lines (default: on
	// stderr, unsampled).
	AuditTrail audit.Sink
	// Converters decode what Temporal stores: the converters the Temporal
	// client was built with (default: Temporal's own).
	Converters lifecycle.Converters
	// Registerer, when set, takes the gateway's own metrics.
	Registerer prometheus.Registerer
	// Policy is the scheduling policy new exams run under; New refuses
	// one that does not validate.
	Policy exam.Policy
	// MaxScanBytes bounds an upload (default 512 MiB).
	MaxScanBytes int64
	// SpoolDir holds uploads while they are validated (default: os.TempDir).
	SpoolDir string
	// StatusMaxAge is how long one reading of Temporal for the status
	// metrics serves further scrapes (default DefaultStatusMaxAge). The
	// gateway serves no /metrics: its process serves the registry on a
	// listener of its own, off the public port.
	StatusMaxAge time.Duration
	// Callbacks decides which callback URLs a device may give.
	Callbacks *callback.Guard
	// NotifyPoll is how often the event stream reads the inbox (default 1 s).
	NotifyPoll time.Duration
	// Streams bounds the event streams held open.
	Streams StreamLimits
	// DeviceRate limits each device's submissions.
	DeviceRate intake.RateLimit
	// Uploads bounds what uploads may take of the gateway.
	Uploads intake.Limits
	// SpoolMaxBytes caps what all uploads in flight may put in SpoolDir
	// together (default DefaultSpoolMaxBytes); over it an upload is
	// answered 503 with Retry-After. It must hold one upload of
	// MaxScanBytes.
	SpoolMaxBytes int64
	// Identities seals each scan's identity for the way back to the PACS
	// (see intake.KeepIdentity): the identity keys, which GPU nodes do not
	// hold (nil: no identity is kept).
	Identities *codec.Codec
	// PayloadCodec, when set, is served at /codec/encode and
	// /codec/decode for admins and clinicians, so the Temporal Web UI
	// can show sealed payloads (package codecserver); CodecOrigins are
	// the Web UI origins that may call it from a browser.
	PayloadCodec converter.PayloadCodec
	CodecOrigins []string
}

// Server is the HTTP gateway.
type Server struct {
	cfg  Config
	echo *echo.Echo
	// intake takes uploads: receives, validates and stores them.
	intake *intake.Intake
	// illegal counts forbidden moves found while folding histories.
	illegal prometheus.Counter
	// arrivals counts accepted exams per campus and device.
	arrivals *prometheus.CounterVec
	// notify admits event streams and feeds them, one hub per campus.
	notify *notifier
	// sharing are the campuses that sent exams lately: each exam's part
	// of its bucket is its campus's weight over theirs (policyFor).
	sharing *campusActivity
}

// New builds the gateway and its routes.
func New(cfg Config) (*Server, error) {
	if err := cfg.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	uploading := cfg.Tokens.UploadCampuses()
	for _, c := range slices.Sorted(maps.Keys(cfg.Policy.CampusWeights)) {
		if !slices.Contains(uploading, c) {
			return nil, fmt.Errorf("policy: the campus weights (OCTFLOW_CAMPUS_WEIGHTS) name %s, a campus no device or router token sends for: misspelt?", c)
		}
	}
	if cfg.Pseudonymizer == nil {
		return nil, errors.New("no pseudonym key: exams and patients are kept under keyed pseudonyms")
	}
	if cfg.Converters.Data == nil || cfg.Converters.Failure == nil {
		cfg.Converters = lifecycle.DefaultConverters()
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
	if cfg.AuditTrail == nil {
		cfg.AuditTrail = audit.NewLogSink(zapcore.Lock(os.Stderr), audit.Source{ID: "api"})
	}
	in, err := intake.New(intake.Config{Store: cfg.Store, Pseudonymizer: cfg.Pseudonymizer, Identities: cfg.Identities,
		Callbacks: cfg.Callbacks, Logger: cfg.Logger, MaxScanBytes: cfg.MaxScanBytes, SpoolDir: cfg.SpoolDir,
		SpoolMaxBytes: cfg.SpoolMaxBytes, Uploads: cfg.Uploads, DeviceRate: cfg.DeviceRate, Campuses: uploading})
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, echo: echo.New(), intake: in,
		illegal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "octflow_timeline_illegal_transitions_total",
			Help: "State transitions the lifecycle table forbids, found while folding an exam's history.",
		}),
		arrivals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "octflow_exam_arrivals_total",
			Help: "Exams accepted (202), by campus and device; resends answered 200 are not counted.",
		}, []string{"campus", "device"}),
		sharing: newCampusActivity(),
	}
	s.notify = newNotifier(cfg.Streams, cfg.NotifyPoll, s.inboxSince, cfg.Logger)
	if cfg.Registerer != nil {
		collectors := []prometheus.Collector{s.illegal, s.arrivals, newStatusCollector(s)}
		if c := auditing.Collector(cfg.AuditTrail); c != nil {
			collectors = append(collectors, c)
		}
		for _, c := range collectors {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register metrics: %w", err)
			}
		}
	}
	e := s.echo
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = problems.Handler(cfg.Logger)
	e.Use(auditing.RequestIDs(randomID))
	e.Use(middleware.Recover())
	e.Use(s.accessLog)
	e.Use(auditing.New(auditing.Config{Trail: cfg.AuditTrail, Tokens: cfg.Tokens, ExamRef: cfg.Pseudonymizer.ExamRef,
		MaxExams: intake.MaxInstances, Logger: cfg.Logger}).Middleware)

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/openapi.yaml", serveOpenAPI)
	if cfg.PayloadCodec != nil {
		codecserver.Register(e, codecserver.Config{Codec: cfg.PayloadCodec, Origins: cfg.CodecOrigins, Tokens: cfg.Tokens, Logger: cfg.Logger})
	}
	// DICOMweb STOW-RS, for devices and DICOM routers (see stow.go).
	e.POST("/dicom-web/studies", s.storeInstances, require(cfg.Tokens, auth.RoleDevice, auth.RoleRouter), in.DeviceRate, in.SpoolBudget)
	e.POST("/dicom-web/studies/:study", s.storeInstances, require(cfg.Tokens, auth.RoleDevice, auth.RoleRouter), in.DeviceRate, in.SpoolBudget)
	v1 := e.Group("/v1")
	v1.POST("/exams", s.submitExam, require(cfg.Tokens, auth.RoleDevice), in.DeviceRate, in.SpoolBudget)
	v1.GET("/exams/:examId", s.getExam, require(cfg.Tokens, auth.RoleDevice, auth.RoleClinician, auth.RoleAdmin))
	v1.GET("/exams/:examId/events", s.getEvents, require(cfg.Tokens, auth.RoleClinician, auth.RoleAdmin))
	v1.GET("/exams/:examId/report", s.getReport, require(cfg.Tokens, auth.RoleClinician, auth.RoleAdmin))
	v1.POST("/exams/:examId/review", s.postReview, require(cfg.Tokens, auth.RoleClinician))
	v1.POST("/exams/:examId/rerun", s.rerunExam, require(cfg.Tokens, auth.RoleAdmin))
	v1.POST("/exams/:examId/export", s.rerunExport, require(cfg.Tokens, auth.RoleAdmin))
	v1.GET("/notifications", s.notifications, require(cfg.Tokens, auth.RoleClinician))
	v1.GET("/nodes", s.listNodes, require(cfg.Tokens, auth.RoleAdmin))
	v1.GET("/queues", s.listQueues, require(cfg.Tokens, auth.RoleAdmin))
	v1.POST("/nodes/:nodeId/breaker/reset", s.resetBreaker, require(cfg.Tokens, auth.RoleAdmin))
	v1.POST("/nodes/:nodeId/health", s.markNode, require(cfg.Tokens, auth.RoleAdmin))
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
		return problems.New(http.StatusServiceUnavailable, "not-ready", "temporal: "+err.Error())
	}
	if err := s.cfg.Store.Ping(ctx); err != nil {
		return problems.New(http.StatusServiceUnavailable, "not-ready", "object store: "+err.Error())
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
			zap.String("principal", auth.Of(c).Name))
		return nil
	}
}
