package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"octflow/api/auditing"
	"octflow/api/codecserver"
	"octflow/api/problems"
	"octflow/audit"
	"octflow/callback"
	"octflow/codec"
	"octflow/exam"
	"octflow/lifecycle"
)

// ObjectStore is what the gateway needs of the object store.
type ObjectStore interface {
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
	Get(ctx context.Context, key string) (io.ReadCloser, int64, error)
	Exists(ctx context.Context, key string) (bool, error)
	Delete(ctx context.Context, key string) error
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
	Tokens        *Tokens
	Pseudonymizer *Pseudonymizer
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
	DeviceRate RateLimit
	// Uploads bounds what uploads may take of the gateway.
	Uploads UploadLimits
	// SpoolMaxBytes caps what all uploads in flight may put in SpoolDir
	// together (default DefaultSpoolMaxBytes); over it an upload is
	// answered 503 with Retry-After. It must hold one upload of
	// MaxScanBytes.
	SpoolMaxBytes int64
	// Identities seals each scan's identity for the way back to the PACS
	// (see keepIdentity): the identity keys, which GPU nodes do not hold
	// (nil: no identity is kept).
	Identities *codec.Codec
	// PayloadCodec, when set, is served at /codec/encode and
	// /codec/decode for admins and clinicians, so the Temporal Web UI
	// can show sealed payloads (package codecserver); CodecOrigins are
	// the Web UI origins that may call it from a browser.
	PayloadCodec converter.PayloadCodec
	CodecOrigins []string
}

// UploadLimits bound what uploads may take of the gateway. Zero fields
// take the defaults.
type UploadLimits struct {
	// Validating bounds the scans being validated at once (default 4):
	// validation holds a whole volume in memory. A scan takes a turn only
	// once it has been received in full. Wait is how long it may wait
	// for a turn (default 30 s) before it is answered 503 with
	// Retry-After.
	Validating int
	Wait       time.Duration
	// ValidationBytes bounds the memory all validations together may
	// take, in bytes (default DefaultValidationBytes): each is charged
	// what its scan's header says reading and de-identifying it takes
	// (octdicom.PreScan), and waits for it within Wait; a scan that
	// could never fit is refused 413. Where several campuses upload,
	// each holds at most its share (or one larger scan, alone).
	ValidationBytes int64
	// PerDevice bounds one device's uploads in flight (default 2); over
	// it a device gets 429.
	PerDevice int
	// Pace bounds how slowly an upload may arrive (408 below it).
	Pace UploadPace
}

// Server is the HTTP gateway.
type Server struct {
	cfg     Config
	echo    *echo.Echo
	uploads chan struct{} // one token per upload in progress
	budget  *byteBudget   // the memory of validations (Uploads.ValidationBytes)
	// illegal counts forbidden moves found while folding histories.
	illegal prometheus.Counter
	// arrivals counts accepted exams per campus and device.
	arrivals *prometheus.CounterVec
	// deviceUploads counts each device's uploads in flight.
	deviceMu      sync.Mutex
	deviceUploads map[string]int
	// notify admits event streams and feeds them, one hub per campus.
	notify *notifier
	// spool bounds the bytes of uploads in flight.
	spool *spoolQuota
	// rates is each device's rate of exams, over both submitting routes.
	rates *deviceRates
	// campusSlots is each campus's share of the validation slots.
	campusSlots map[string]chan struct{}
	// campusBudgets is each campus's share of the validation memory.
	campusBudgets map[string]*byteBudget
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
	u := &cfg.Uploads
	u.Validating = cmp.Or(max(u.Validating, 0), 4)
	u.Wait = cmp.Or(u.Wait, 30*time.Second)
	u.ValidationBytes = cmp.Or(max(u.ValidationBytes, 0), DefaultValidationBytes)
	u.PerDevice = cmp.Or(max(u.PerDevice, 0), 2)
	u.Pace.Idle = cmp.Or(u.Pace.Idle, 30*time.Second)
	u.Pace.Grace = cmp.Or(u.Pace.Grace, 10*time.Second)
	u.Pace.MinRate = cmp.Or(u.Pace.MinRate, 16<<10)
	u.Pace.Longest = cmp.Or(u.Pace.Longest, 30*time.Minute)
	if cfg.AuditTrail == nil {
		cfg.AuditTrail = audit.NewLogSink(zapcore.Lock(os.Stderr), audit.Source{ID: "api"})
	}
	cfg.SpoolMaxBytes = cmp.Or(cfg.SpoolMaxBytes, DefaultSpoolMaxBytes)
	if need := SpoolBytesFor(cfg.MaxScanBytes); cfg.SpoolMaxBytes < need {
		return nil, fmt.Errorf("spool cap %d bytes holds no upload of %d bytes: want at least %d", cfg.SpoolMaxBytes, cfg.MaxScanBytes, need)
	}
	s := &Server{cfg: cfg, echo: echo.New(), uploads: make(chan struct{}, cfg.Uploads.Validating), budget: newByteBudget(cfg.Uploads.ValidationBytes), deviceUploads: map[string]int{},
		illegal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "octflow_timeline_illegal_transitions_total",
			Help: "State transitions the lifecycle table forbids, found while folding an exam's history.",
		}),
		arrivals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "octflow_exam_arrivals_total",
			Help: "Exams accepted (202), by campus and device; resends answered 200 are not counted.",
		}, []string{"campus", "device"}),
		spool:       newSpoolQuota(cfg.SpoolMaxBytes, len(uploading), SpoolBytesFor(cfg.MaxScanBytes)),
		rates:       newDeviceRates(cfg.DeviceRate),
		campusSlots: campusSlots(cfg.Uploads.Validating, uploading), campusBudgets: campusBudgets(cfg.Uploads.ValidationBytes, uploading),
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
		MaxExams: maxInstances, Logger: cfg.Logger}).Middleware)

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/openapi.yaml", serveOpenAPI)
	if cfg.PayloadCodec != nil {
		codecserver.Register(e, codecserver.Config{Codec: cfg.PayloadCodec, Origins: cfg.CodecOrigins, Tokens: cfg.Tokens, Logger: cfg.Logger})
	}
	// DICOMweb STOW-RS, for devices and DICOM routers (see stow.go).
	e.POST("/dicom-web/studies", s.storeInstances, require(cfg.Tokens, RoleDevice, RoleRouter), s.rates.middleware, s.spoolBudget)
	e.POST("/dicom-web/studies/:study", s.storeInstances, require(cfg.Tokens, RoleDevice, RoleRouter), s.rates.middleware, s.spoolBudget)
	v1 := e.Group("/v1")
	v1.POST("/exams", s.submitExam, require(cfg.Tokens, RoleDevice), s.rates.middleware, s.spoolBudget)
	v1.GET("/exams/:examId", s.getExam, require(cfg.Tokens, RoleDevice, RoleClinician, RoleAdmin))
	v1.GET("/exams/:examId/events", s.getEvents, require(cfg.Tokens, RoleClinician, RoleAdmin))
	v1.GET("/exams/:examId/report", s.getReport, require(cfg.Tokens, RoleClinician, RoleAdmin))
	v1.POST("/exams/:examId/review", s.postReview, require(cfg.Tokens, RoleClinician))
	v1.POST("/exams/:examId/rerun", s.rerunExam, require(cfg.Tokens, RoleAdmin))
	v1.POST("/exams/:examId/export", s.rerunExport, require(cfg.Tokens, RoleAdmin))
	v1.GET("/notifications", s.notifications, require(cfg.Tokens, RoleClinician))
	v1.GET("/nodes", s.listNodes, require(cfg.Tokens, RoleAdmin))
	v1.GET("/queues", s.listQueues, require(cfg.Tokens, RoleAdmin))
	v1.POST("/nodes/:nodeId/breaker/reset", s.resetBreaker, require(cfg.Tokens, RoleAdmin))
	v1.POST("/nodes/:nodeId/health", s.markNode, require(cfg.Tokens, RoleAdmin))
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
