package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"octflow/activities"
	"octflow/api"
	"octflow/callback"
	"octflow/exam"
	"octflow/inference"
	"octflow/storage"
)

// Stack is how a process finds the shared services.
type Stack struct {
	TemporalAddr string
	Namespace    string
	// TemporalCompression is the gRPC compression of calls to Temporal:
	// auto, gzip or none (workers.DialOptions).
	TemporalCompression string
	S3                  storage.Config
}

// BindStack binds the settings every api, worker and gpuworker shares.
func BindStack(s *Set) *Stack {
	c := &Stack{}
	s.String(&c.TemporalAddr, "temporal-addr", "OCTFLOW_TEMPORAL_ADDR", "127.0.0.1:7233", "Temporal frontend host:port")
	s.String(&c.Namespace, "namespace", "OCTFLOW_NAMESPACE", "default", "Temporal namespace")
	s.String(&c.TemporalCompression, "temporal-compression", "OCTFLOW_TEMPORAL_COMPRESSION", "auto",
		"gzip the calls to Temporal: gzip, none, or auto (none where Temporal is on this machine's loopback, gzip elsewhere)")
	s.Check(func() error {
		switch c.TemporalCompression {
		case "auto", "gzip", "none":
			return nil
		}
		return fmt.Errorf("OCTFLOW_TEMPORAL_COMPRESSION (--temporal-compression) %q: want auto, gzip or none", c.TemporalCompression)
	})
	s.String(&c.S3.Endpoint, "s3-endpoint", "OCTFLOW_S3_ENDPOINT", "127.0.0.1:9000", "S3 endpoint host:port")
	s.String(&c.S3.Bucket, "s3-bucket", "OCTFLOW_S3_BUCKET", "octflow", "S3 bucket")
	s.Bool(&c.S3.UseTLS, "s3-tls", "OCTFLOW_S3_TLS", false, "use https for S3")
	s.String(&c.S3.CAFile, "s3-ca-file", "OCTFLOW_S3_CA_FILE", "", "CA certificate(s) of the S3 endpoint (PEM; default: the system's)")
	s.String(&c.S3.Region, "s3-region", "OCTFLOW_S3_REGION", "us-east-1", "S3 region")
	// The S3 keys, from a file each (a Docker secret) or else the variable.
	s.SecretFile(&c.S3.AccessKey, "OCTFLOW_S3_ACCESS_KEY_FILE", "OCTFLOW_S3_ACCESS_KEY")
	s.SecretFile(&c.S3.SecretKey, "OCTFLOW_S3_SECRET_KEY_FILE", "OCTFLOW_S3_SECRET_KEY")
	return c
}

// policyVars names the variable of each policy setting, by the
// setting's JSON name (exam.PolicyError.Field).
var policyVars = map[string]string{
	"maxAttempts":      "OCTFLOW_MAX_ATTEMPTS",
	"retryBase":        "OCTFLOW_RETRY_BASE",
	"retryCap":         "OCTFLOW_RETRY_CAP",
	"stageTimeout":     "OCTFLOW_STAGE_TIMEOUT",
	"heartbeatTimeout": "OCTFLOW_HEARTBEAT_TIMEOUT",
	"weights":          "OCTFLOW_BUCKET_WEIGHTS",
	"aging":            "OCTFLOW_AGING_NORMAL/OCTFLOW_AGING_LOW",
	"urgentSla":        "OCTFLOW_URGENT_SLA",
	"reviewWindow":     "OCTFLOW_REVIEW_WINDOW",
	"reviewReminder":   "OCTFLOW_REVIEW_REMINDER",
	"infraRetryFor":    "OCTFLOW_INFRA_RETRY_FOR",
	"lostAttempts":     "OCTFLOW_MAX_LOST_ATTEMPTS",
	"nodeAffinityWait": "OCTFLOW_NODE_AFFINITY_WAIT",
}

// BindPolicy binds the scheduling policy new exams run under, starting
// from def. Parse validates the result.
func BindPolicy(s *Set, def exam.Policy) *exam.Policy {
	p := &exam.Policy{}
	var attempts, lost int
	var normal, low time.Duration
	s.Int(&attempts, "max-attempts", "OCTFLOW_MAX_ATTEMPTS", int(def.MaxAttempts), "attempts per stage that its own failures may spend")
	s.Int(&lost, "max-lost-attempts", "OCTFLOW_MAX_LOST_ATTEMPTS", int(def.LostAttempts), "attempts per stage that may end with their node lost, on top of --max-attempts")
	s.Duration(&p.RetryBase, "retry-base", "OCTFLOW_RETRY_BASE", def.RetryBase, "ceiling of the first retry delay (full jitter, doubling)")
	s.Duration(&p.RetryCap, "retry-cap", "OCTFLOW_RETRY_CAP", def.RetryCap, "ceiling of any retry delay")
	s.Duration(&p.StageTimeout, "stage-timeout", "OCTFLOW_STAGE_TIMEOUT", def.StageTimeout, "start-to-close limit of a stage")
	s.Duration(&p.HeartbeatTimeout, "heartbeat-timeout", "OCTFLOW_HEARTBEAT_TIMEOUT", def.HeartbeatTimeout, "a stage silent this long is retried elsewhere")
	s.Duration(&normal, "aging-normal", "OCTFLOW_AGING_NORMAL", def.Aging[exam.Normal], "a normal stage waiting this long moves to urgent (0: never)")
	s.Duration(&low, "aging-low", "OCTFLOW_AGING_LOW", def.Aging[exam.Low], "a low stage waiting this long moves to normal (0: never)")
	s.Duration(&p.UrgentSLA, "urgent-sla", "OCTFLOW_URGENT_SLA", def.UrgentSLA, "an urgent exam without a report after this is an SLA breach (0: not watched)")
	s.Duration(&p.ReviewWindow, "review-window", "OCTFLOW_REVIEW_WINDOW", def.ReviewWindow, "how long a report accepts review decisions")
	s.Duration(&p.ReviewReminder, "review-reminder", "OCTFLOW_REVIEW_REMINDER", def.ReviewReminder, "reminder interval for an urgent exam awaiting review (0: none)")
	s.Duration(&p.InfraRetryFor, "infra-retry-for", "OCTFLOW_INFRA_RETRY_FOR", def.InfraRetryFor, "how long a stage is rescheduled while the object store is unreachable")
	s.Duration(&p.NodeAffinityWait, "node-affinity-wait", "OCTFLOW_NODE_AFFINITY_WAIT", def.NodeAffinityWait, "how long a GPU stage waits for the node holding the exam's previous output before any node may take it (0: no affinity)")
	bind(s, &p.Weights, "bucket-weights", "OCTFLOW_BUCKET_WEIGHTS", def.Weights, "urgent/normal/low fairness weights, e.g. 60/35/5", ParseWeights)
	s.Check(func() error {
		p.MaxAttempts, p.LostAttempts = int32(attempts), int32(lost)
		p.Aging = map[exam.Priority]time.Duration{exam.Normal: normal, exam.Low: low}
		err := p.Validate()
		if err == nil {
			return nil
		}
		var out []error
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			var pe *exam.PolicyError
			if errors.As(e, &pe) {
				out = append(out, fmt.Errorf("%s: %s", policyVars[pe.Field], pe.Reason))
			} else {
				out = append(out, e)
			}
		}
		return errors.Join(out...)
	})
	return p
}

// ParseWeights reads "urgent/normal/low" fairness weights such as "60/35/5".
func ParseWeights(s string) (map[exam.Priority]float32, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return nil, errors.New("want urgent/normal/low weights, e.g. 60/35/5")
	}
	w := map[exam.Priority]float32{}
	for i, b := range []exam.Priority{exam.Urgent, exam.Normal, exam.Low} {
		f, err := strconv.ParseFloat(strings.TrimSpace(parts[i]), 32)
		if err != nil || f <= 0 {
			return nil, fmt.Errorf("the %s weight must be a positive number", b)
		}
		w[b] = float32(f)
	}
	return w, nil
}

// Webhooks are the settings of report-ready callbacks.
type Webhooks struct {
	allow, secretsFile, secret, publicURL string
	guard                                 *callback.Guard
	secrets                               map[string]string
}

// BindWebhooks binds the callback allow-list, the signing secrets and the
// api's public URL.
func BindWebhooks(s *Set) *Webhooks {
	w := &Webhooks{}
	s.String(&w.allow, "callback-allow", "OCTFLOW_CALLBACK_ALLOW", "", "hosts and CIDR ranges callbacks may reach besides public https")
	s.String(&w.publicURL, "public-url", "OCTFLOW_PUBLIC_URL", "http://127.0.0.1:8080", "the api's address in report links")
	s.Secret(&w.secretsFile, "OCTFLOW_WEBHOOK_SECRETS_FILE")
	s.Secret(&w.secret, "OCTFLOW_WEBHOOK_SECRET")
	s.Check(func() error {
		var err error
		if w.guard, err = callback.New(w.allow); err != nil {
			return fmt.Errorf("OCTFLOW_CALLBACK_ALLOW: %w", err)
		}
		w.secrets = map[string]string{}
		if w.secretsFile != "" {
			b, err := os.ReadFile(w.secretsFile)
			if err != nil {
				return fmt.Errorf("OCTFLOW_WEBHOOK_SECRETS_FILE: %w", err)
			}
			if err := json.Unmarshal(b, &w.secrets); err != nil {
				return fmt.Errorf("OCTFLOW_WEBHOOK_SECRETS_FILE=%q: want {\"campus\": \"secret\", \"*\": \"default\"}: %w", w.secretsFile, err)
			}
		}
		if w.secret != "" {
			w.secrets["*"] = w.secret
		}
		if u, err := url.Parse(w.publicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("OCTFLOW_PUBLIC_URL=%q: want an http(s) URL", w.publicURL)
		}
		return nil
	})
	return w
}

// Guard is the callback allow-list.
func (w *Webhooks) Guard() *callback.Guard { return w.guard }

// Deliverer is what the notify stage delivers with.
func (w *Webhooks) Deliverer() *activities.Webhooks {
	return &activities.Webhooks{Guard: w.guard, Secrets: w.secrets, PublicURL: w.publicURL}
}

// Models are the stages pointed at served models.
type Models struct {
	urls, inputs, outputs [3]string
	backends              inference.Backends
}

var modelStages = [3]string{"DENOISE", "LAYERS", "LESIONS"}

// BindModels binds OCTFLOW_MODEL_<STAGE> (a KServe v2 model URL such as
// http://triton:8000/v2/models/NAME) and its _INPUT and _OUTPUT tensor
// names for denoise, layers and lesions. An unset stage runs the pure-Go
// reference.
func BindModels(s *Set) *Models {
	m := &Models{}
	for i, stage := range modelStages {
		flagName := "model-" + strings.ToLower(stage)
		s.String(&m.urls[i], flagName, "OCTFLOW_MODEL_"+stage, "", "KServe v2 model URL for the "+strings.ToLower(stage)+" stage")
		s.String(&m.inputs[i], flagName+"-input", "OCTFLOW_MODEL_"+stage+"_INPUT", "", "its input tensor (default input)")
		s.String(&m.outputs[i], flagName+"-output", "OCTFLOW_MODEL_"+stage+"_OUTPUT", "", "its output tensor (default output)")
	}
	s.Check(func() error {
		for i, stage := range modelStages {
			raw := m.urls[i]
			if raw == "" {
				continue
			}
			u, err := url.Parse(raw)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("OCTFLOW_MODEL_%s=%q: not an http(s) model URL", stage, raw)
			}
			model := inference.Model{URL: raw, Input: m.inputs[i], Output: m.outputs[i], Client: &http.Client{Timeout: 5 * time.Minute}}
			switch stage {
			case "DENOISE":
				m.backends.Denoise = inference.ModelDenoiser{Model: model}
			case "LAYERS":
				m.backends.Layers = inference.ModelSegmenter{Model: model}
			case "LESIONS":
				m.backends.Lesions = inference.ModelLesionMarker{Model: model}
			}
		}
		return nil
	})
	return m
}

// Backends are the image stages' implementations.
func (m *Models) Backends() inference.Backends { return m.backends }

// BindDeviceRate binds each device's submission limit over def.
func BindDeviceRate(s *Set, def api.RateLimit) *api.RateLimit {
	r := &api.RateLimit{}
	s.Float(&r.PerMinute, "device-rate-per-minute", "OCTFLOW_DEVICE_RATE_PER_MINUTE", def.PerMinute, "submissions per device and minute (over it: 429)")
	s.Int(&r.Burst, "device-burst", "OCTFLOW_DEVICE_BURST", def.Burst, "submissions a device may send at once")
	s.Check(func() error {
		if r.PerMinute <= 0 || r.Burst < 1 {
			return fmt.Errorf("OCTFLOW_DEVICE_RATE_PER_MINUTE (%v) and OCTFLOW_DEVICE_BURST (%d) must be positive", r.PerMinute, r.Burst)
		}
		return nil
	})
	return r
}

// BindPseudonymKey binds the HMAC key of patient pseudonyms.
func BindPseudonymKey(s *Set) *[]byte {
	var key string
	out := new([]byte)
	s.SecretFile(&key, "OCTFLOW_PSEUDONYM_KEY_FILE", "OCTFLOW_PSEUDONYM_KEY")
	s.Check(func() error {
		if len(key) < 16 {
			return errors.New("OCTFLOW_PSEUDONYM_KEY_FILE or OCTFLOW_PSEUDONYM_KEY: want a key of at least 16 characters")
		}
		*out = []byte(key)
		return nil
	})
	return out
}

// Log is how a process logs.
type Log struct {
	level, format string
}

// BindLog binds the log level and format.
func BindLog(s *Set, defFormat string) *Log {
	l := &Log{}
	s.String(&l.level, "log-level", "OCTFLOW_LOG_LEVEL", "info", "debug, info, warn or error")
	s.String(&l.format, "log-format", "OCTFLOW_LOG_FORMAT", defFormat, "json (one object a line) or console")
	s.Check(func() error {
		if _, err := zapcore.ParseLevel(l.level); err != nil {
			return fmt.Errorf("OCTFLOW_LOG_LEVEL=%q: want debug, info, warn or error", l.level)
		}
		if l.format != "json" && l.format != "console" {
			return fmt.Errorf("OCTFLOW_LOG_FORMAT=%q: want json or console", l.format)
		}
		return nil
	})
	return l
}

// Logger builds the process logger.
func (l *Log) Logger() (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(l.level)
	if err != nil {
		return nil, fmt.Errorf("OCTFLOW_LOG_LEVEL: %w", err)
	}
	cfg := zap.NewProductionConfig()
	if l.format == "console" {
		cfg = zap.NewDevelopmentConfig()
		cfg.DisableStacktrace = true
		cfg.EncoderConfig.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
	}
	cfg.Level = zap.NewAtomicLevelAt(level)
	log, err := cfg.Build()
	if err != nil {
		return nil, fmt.Errorf("build logger: %w", err)
	}
	return log, nil
}

// HTTPLimits are an HTTP server's timeouts and header cap.
type HTTPLimits struct {
	// ReadHeader bounds the time to read a request's headers.
	ReadHeader time.Duration
	// Read bounds the time to read a whole request. Uploads are paced
	// instead (OCTFLOW_UPLOAD_IDLE, OCTFLOW_UPLOAD_MIN_RATE) and event
	// streams read nothing after their headers: both lift it.
	Read time.Duration
	// Write bounds the time from a request's headers to the end of its
	// answer. Uploads and event streams lift it (an event stream bounds
	// each write instead).
	Write time.Duration
	// Idle bounds how long a kept-alive connection waits for its next
	// request.
	Idle time.Duration
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes int
}

// DefaultHTTPLimits are the api's HTTP limits unless configured.
func DefaultHTTPLimits() HTTPLimits {
	return HTTPLimits{ReadHeader: 10 * time.Second, Read: time.Minute, Write: 2 * time.Minute, Idle: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10}
}

// Serving is how the api serves: its HTTP limits, its caps on event
// streams and on the upload spool, and its metrics listener.
type Serving struct {
	HTTP    HTTPLimits
	Streams api.StreamLimits
	// SpoolMaxBytes caps the bytes all uploads in flight may spool.
	SpoolMaxBytes int64
	// MetricsAddr serves Prometheus /metrics, off the public port ("":
	// nowhere).
	MetricsAddr string
	// StatusMaxAge is how long one reading of Temporal for the status
	// metrics serves further scrapes.
	StatusMaxAge time.Duration
}

// BindServing binds how the api serves. g is the gateway's upload
// settings, bound before: the spool must hold the largest upload.
func BindServing(s *Set, g *Gateway) *Serving {
	v := &Serving{}
	def := DefaultHTTPLimits()
	var spoolMiB int
	s.Duration(&v.HTTP.ReadHeader, "http-read-header-timeout", "OCTFLOW_HTTP_READ_HEADER_TIMEOUT", def.ReadHeader, "longest time to read a request's headers")
	s.Duration(&v.HTTP.Read, "http-read-timeout", "OCTFLOW_HTTP_READ_TIMEOUT", def.Read, "longest time to read a request, body included (uploads are paced instead; event streams read no body)")
	s.Duration(&v.HTTP.Write, "http-write-timeout", "OCTFLOW_HTTP_WRITE_TIMEOUT", def.Write, "longest time from a request's headers to the end of its answer (not uploads; event streams bound each write instead)")
	s.Duration(&v.HTTP.Idle, "http-idle-timeout", "OCTFLOW_HTTP_IDLE_TIMEOUT", def.Idle, "how long a kept-alive connection may wait for its next request")
	s.Int(&v.HTTP.MaxHeaderBytes, "http-max-header-bytes", "OCTFLOW_HTTP_MAX_HEADER_BYTES", def.MaxHeaderBytes, "largest request headers, bytes")
	s.Int(&v.Streams.Total, "sse-streams", "OCTFLOW_SSE_STREAMS", 256, "event streams (GET /v1/notifications) open at once (over it: 429)")
	s.Int(&v.Streams.PerToken, "sse-streams-per-token", "OCTFLOW_SSE_STREAMS_PER_TOKEN", 8, "event streams one token may hold open (over it: 429)")
	s.Int(&spoolMiB, "spool-max-mib", "OCTFLOW_SPOOL_MAX_MIB", api.DefaultSpoolMaxBytes>>20, "disk the uploads in flight may take in the spool together, MiB; each is charged twice its size, for its spool and its de-identified copy (over it: 503)")
	s.String(&v.MetricsAddr, "metrics-addr", "OCTFLOW_METRICS_ADDR", "127.0.0.1:9464", "serve Prometheus /metrics here, a listener of its own off the public api port (off: nowhere)")
	s.Duration(&v.StatusMaxAge, "metrics-max-age", "OCTFLOW_METRICS_MAX_AGE", api.DefaultStatusMaxAge, "how long one reading of Temporal for the exam, queue and node metrics serves further scrapes")
	s.Check(func() error {
		h := v.HTTP
		switch {
		case h.ReadHeader <= 0 || h.Read <= 0 || h.Write <= 0 || h.Idle <= 0:
			return errors.New("OCTFLOW_HTTP_READ_HEADER_TIMEOUT, OCTFLOW_HTTP_READ_TIMEOUT, OCTFLOW_HTTP_WRITE_TIMEOUT and OCTFLOW_HTTP_IDLE_TIMEOUT must be positive")
		case h.MaxHeaderBytes < 4<<10:
			return fmt.Errorf("OCTFLOW_HTTP_MAX_HEADER_BYTES (--http-max-header-bytes) %d: want at least 4096", h.MaxHeaderBytes)
		case v.Streams.Total < 1 || v.Streams.PerToken < 1:
			return errors.New("OCTFLOW_SSE_STREAMS and OCTFLOW_SSE_STREAMS_PER_TOKEN must be positive")
		case v.StatusMaxAge <= 0:
			return errors.New("OCTFLOW_METRICS_MAX_AGE (--metrics-max-age) must be positive")
		}
		v.SpoolMaxBytes = int64(spoolMiB) << 20
		if need := api.SpoolBytesFor(g.MaxScanBytes); v.SpoolMaxBytes < need {
			return fmt.Errorf("OCTFLOW_SPOOL_MAX_MIB (--spool-max-mib) %d holds no upload of OCTFLOW_MAX_SCAN_MIB: want at least %d", spoolMiB, (need+1<<20-1)>>20)
		}
		if v.MetricsAddr == "off" {
			v.MetricsAddr = ""
		}
		return nil
	})
	return v
}
