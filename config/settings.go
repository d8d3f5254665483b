package config

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"octflow/exam"
)

// Stack is how a process finds the shared services.
type Stack struct {
	TemporalAddr string
	Namespace    string
	// TemporalCompression is the gRPC compression of calls to Temporal:
	// auto, gzip or none (app.DialOptions).
	TemporalCompression string
	S3                  S3
}

// S3 is how a process reaches the object store (app turns it into a
// storage.Config).
type S3 struct {
	Endpoint  string // host:port
	AccessKey string
	SecretKey string
	Bucket    string
	UseTLS    bool
	Region    string
	// CAFile holds the endpoint's CA certificates (PEM) when they are not
	// the system's.
	CAFile string
}

// BindStack binds the settings every api, worker and gpuworker shares.
func BindStack(s *Set) *Stack {
	c := &Stack{}
	bindTemporalAddr(s, &c.TemporalAddr)
	bindNamespace(s, &c.Namespace, "default")
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

// BindPolicy binds the scheduling policy new exams run under, starting
// from def (the command's exam.Policy). Each value is parsed here; whether
// they work together (a retry cap under the retry base, a heartbeat
// timeout over the stage timeout, …) is the policy's own rule
// (exam.Policy.Validate), checked at parse and naming the variable. What
// has no setting (the export's retry time, the campus's share) stays
// def's.
func BindPolicy(s *Set, def exam.Policy) *exam.Policy {
	p := def
	p.Weights, p.Aging = maps.Clone(def.Weights), maps.Clone(def.Aging)
	p.CampusWeights, p.OwnGPUs = maps.Clone(def.CampusWeights), slices.Clone(def.OwnGPUs)
	var agingNormal, agingLow time.Duration
	bind(s, &p.MaxAttempts, "max-attempts", "OCTFLOW_MAX_ATTEMPTS", def.MaxAttempts, "attempts per stage that its own failures may spend", parseInt32)
	bind(s, &p.LostAttempts, "max-lost-attempts", "OCTFLOW_MAX_LOST_ATTEMPTS", def.LostAttempts, "attempts per stage that may end with their node lost, on top of --max-attempts", parseInt32)
	s.Duration(&p.RetryBase, "retry-base", "OCTFLOW_RETRY_BASE", def.RetryBase, "ceiling of the first retry delay (full jitter, doubling)")
	s.Duration(&p.RetryCap, "retry-cap", "OCTFLOW_RETRY_CAP", def.RetryCap, "ceiling of any retry delay")
	s.Duration(&p.StageTimeout, "stage-timeout", "OCTFLOW_STAGE_TIMEOUT", def.StageTimeout, "start-to-close limit of a stage")
	s.Duration(&p.HeartbeatTimeout, "heartbeat-timeout", "OCTFLOW_HEARTBEAT_TIMEOUT", def.HeartbeatTimeout, "a stage silent this long is retried elsewhere")
	s.Duration(&agingNormal, "aging-normal", "OCTFLOW_AGING_NORMAL", def.Aging[exam.Normal], "a normal stage waiting this long moves to urgent (0: never)")
	s.Duration(&agingLow, "aging-low", "OCTFLOW_AGING_LOW", def.Aging[exam.Low], "a low stage waiting this long moves to normal (0: never)")
	s.Duration(&p.UrgentSLA, "urgent-sla", "OCTFLOW_URGENT_SLA", def.UrgentSLA, "an urgent exam without a report after this is an SLA breach (0: not watched)")
	s.Duration(&p.ReviewWindow, "review-window", "OCTFLOW_REVIEW_WINDOW", def.ReviewWindow, "how long a report accepts review decisions")
	s.Duration(&p.ReviewReminder, "review-reminder", "OCTFLOW_REVIEW_REMINDER", def.ReviewReminder, "reminder interval for an urgent exam awaiting review (0: none)")
	s.Duration(&p.InfraRetryFor, "infra-retry-for", "OCTFLOW_INFRA_RETRY_FOR", def.InfraRetryFor, "how long a stage is rescheduled while the object store is unreachable")
	s.Duration(&p.NodeAffinityWait, "node-affinity-wait", "OCTFLOW_NODE_AFFINITY_WAIT", def.NodeAffinityWait, "how long a GPU stage waits for the node holding the exam's previous output before any node may take it (0: no affinity)")
	bind(s, (*Weights)(&p.Weights), "bucket-weights", "OCTFLOW_BUCKET_WEIGHTS", Weights(p.Weights), "urgent/normal/low fairness weights, e.g. 60/35/5", ParseWeights)
	bind(s, &p.CampusWeights, "campus-weights", "OCTFLOW_CAMPUS_WEIGHTS", p.CampusWeights, "campuses' weights inside the normal and low buckets, e.g. north=2,south=0.5 (unlisted: 1; each 0.1 to 10)", ParseCampusWeights)
	bind(s, &p.OwnGPUs, "campus-own-gpus", "OCTFLOW_CAMPUS_OWN_GPUS", p.OwnGPUs, "campuses whose GPU stages run only on GPU nodes bound to them (their queue oct-gpu-campus-<campus>), comma-separated", ParseCampuses)
	s.Check(func() error {
		p.Aging = map[exam.Priority]time.Duration{exam.Normal: agingNormal, exam.Low: agingLow}
		return policyErrors(p.Validate())
	})
	return &p
}

// policyErrors names the variable of each of the policy's own errors.
func policyErrors(err error) error {
	if err == nil {
		return nil
	}
	var out []error
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var pe *exam.PolicyError
		if errors.As(e, &pe) && policyVar(pe.Field) != "" {
			e = fmt.Errorf("%s: %s", policyVar(pe.Field), pe.Reason)
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

// policyVar is the variable of the policy setting whose JSON name is
// field (exam.PolicyError.Field); "" for a field without one.
func policyVar(field string) string {
	return map[string]string{
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
		"campusWeights":    "OCTFLOW_CAMPUS_WEIGHTS",
		"ownGpus":          "OCTFLOW_CAMPUS_OWN_GPUS",
	}[field]
}

// parseInt32 reads a whole number that fits 32 bits.
func parseInt32(v string) (int32, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, errors.New("not a whole number")
	}
	return int32(n), nil
}

// Weights are the fairness weights of the buckets, as
// OCTFLOW_BUCKET_WEIGHTS writes them: in exam.Buckets' order,
// urgent/normal/low.
type Weights map[exam.Priority]float32

// String writes the weights as they are set: urgent/normal/low.
func (w Weights) String() string {
	var parts []string
	for _, b := range exam.Buckets() {
		parts = append(parts, fmt.Sprint(w[b]))
	}
	return strings.Join(parts, "/")
}

// ParseWeights reads "urgent/normal/low" fairness weights such as "60/35/5".
func ParseWeights(s string) (Weights, error) {
	parts, buckets := strings.Split(s, "/"), exam.Buckets()
	if len(parts) != len(buckets) {
		return nil, errors.New("want urgent/normal/low weights, e.g. 60/35/5")
	}
	w := Weights{}
	for i, b := range buckets {
		f, err := strconv.ParseFloat(strings.TrimSpace(parts[i]), 32)
		if err != nil || f <= 0 {
			return nil, fmt.Errorf("the %s weight must be a positive number", b)
		}
		w[b] = float32(f)
	}
	return w, nil
}

// ParseCampusWeights reads campus=weight pairs separated by commas
// ("north=2,south=0.5"); "" is none. Whether a name is a campus and a
// weight within range is the policy's own check.
func ParseCampusWeights(s string) (map[string]float32, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]float32{}
	for _, pair := range strings.Split(s, ",") {
		campus, w, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			return nil, errors.New("want campus=weight pairs separated by commas, e.g. north=2,south=0.5")
		}
		campus = strings.TrimSpace(campus)
		f, err := strconv.ParseFloat(strings.TrimSpace(w), 32)
		if err != nil {
			return nil, fmt.Errorf("campus %s: the weight must be a number", campus)
		}
		if _, dup := out[campus]; dup {
			return nil, fmt.Errorf("campus %s is listed twice", campus)
		}
		out[campus] = float32(f)
	}
	return out, nil
}

// ParseCampuses reads campuses separated by commas ("north,south"); ""
// is none. Whether a name is a campus is the policy's own check.
func ParseCampuses(s string) ([]string, error) {
	var out []string
	for c := range strings.SplitSeq(s, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		if slices.Contains(out, c) {
			return nil, fmt.Errorf("campus %s is listed twice", c)
		}
		out = append(out, c)
	}
	return out, nil
}

// Webhooks are the settings of report-ready callbacks. The allow-list is
// compiled by the callback guard itself (app.CallbackGuard), which names
// OCTFLOW_CALLBACK_ALLOW when it refuses it.
type Webhooks struct {
	// Allow lists the hosts, CIDR ranges and :ports callbacks may reach
	// besides public https (callback.New's syntax).
	Allow string
	// Secrets are the signing secrets per campus ("*": any campus).
	Secrets map[string]string
	// PublicURL is the api's address in report links.
	PublicURL string
}

// BindWebhooks binds the callback allow-list, the signing secrets and the
// api's public URL.
func BindWebhooks(s *Set) *Webhooks {
	w := &Webhooks{}
	var secretsFile, secret string
	s.String(&w.Allow, "callback-allow", "OCTFLOW_CALLBACK_ALLOW", "", "hosts and CIDR ranges callbacks may reach besides public https")
	s.String(&w.PublicURL, "public-url", "OCTFLOW_PUBLIC_URL", "http://127.0.0.1:8080", "the api's address in report links")
	s.Secret(&secretsFile, "OCTFLOW_WEBHOOK_SECRETS_FILE")
	s.Secret(&secret, "OCTFLOW_WEBHOOK_SECRET")
	s.Check(func() error {
		w.Secrets = map[string]string{}
		if secretsFile != "" {
			b, err := os.ReadFile(secretsFile)
			if err != nil {
				return fmt.Errorf("OCTFLOW_WEBHOOK_SECRETS_FILE: %w", err)
			}
			if err := json.Unmarshal(b, &w.Secrets); err != nil {
				return fmt.Errorf("OCTFLOW_WEBHOOK_SECRETS_FILE=%q: want {\"campus\": \"secret\", \"*\": \"default\"}: %w", secretsFile, err)
			}
		}
		if secret != "" {
			w.Secrets["*"] = secret
		}
		if !httpURL(w.PublicURL) {
			return fmt.Errorf("OCTFLOW_PUBLIC_URL=%q: want an http(s) URL", w.PublicURL)
		}
		return nil
	})
	return w
}

// Model is a served model a stage calls: a KServe v2 model URL such as
// http://triton:8000/v2/models/NAME and its tensor names ("": input,
// output).
type Model struct{ URL, Input, Output string }

// Models are the stages pointed at served models, by stage; a stage
// without one runs its Go reference implementation (app.Models).
type Models map[exam.Stage]Model

// BindModels binds, for every one of stages a served model may run
// (exam.StageSpec.Model), OCTFLOW_MODEL_<MODEL> and its _INPUT and
// _OUTPUT tensor names.
func BindModels(s *Set, stages exam.Pipeline) *Models {
	m := &Models{}
	type setting struct {
		spec exam.StageSpec
		m    *Model
	}
	var settings []setting
	for _, spec := range stages {
		if spec.Model == "" {
			continue
		}
		st := setting{spec, &Model{}}
		settings = append(settings, st)
		flagName := "model-" + strings.ToLower(spec.Model)
		s.String(&st.m.URL, flagName, "OCTFLOW_MODEL_"+spec.Model, "", "KServe v2 model URL for the "+string(spec.Stage)+" stage")
		s.String(&st.m.Input, flagName+"-input", "OCTFLOW_MODEL_"+spec.Model+"_INPUT", "", "its input tensor (default input)")
		s.String(&st.m.Output, flagName+"-output", "OCTFLOW_MODEL_"+spec.Model+"_OUTPUT", "", "its output tensor (default output)")
	}
	s.Check(func() error {
		*m = Models{}
		for _, st := range settings {
			if st.m.URL == "" {
				continue
			}
			if !httpURL(st.m.URL) {
				return fmt.Errorf("OCTFLOW_MODEL_%s=%q: not an http(s) model URL", st.spec.Model, st.m.URL)
			}
			(*m)[st.spec.Stage] = *st.m
		}
		return nil
	})
	return m
}

// DeviceRate is each device's submission limit (app turns it into an
// intake.RateLimit).
type DeviceRate struct {
	PerMinute float64
	Burst     int
}

// BindDeviceRate binds each device's submission limit over def.
func BindDeviceRate(s *Set, def DeviceRate) *DeviceRate {
	r := &DeviceRate{}
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

// Streams bound the api's event streams (app: api.StreamLimits): open
// at once, and per token.
type Streams struct{ Total, PerToken int }

// Serving is how the api serves: its HTTP limits, its caps on event
// streams and on the upload spool, and its metrics listener.
type Serving struct {
	HTTP    HTTPLimits
	Streams Streams
	// SpoolMaxBytes caps the bytes all uploads in flight may spool. That
	// it holds the largest upload is the api's rule (intake.SpoolBytesFor),
	// checked by app at start, naming OCTFLOW_SPOOL_MAX_MIB.
	SpoolMaxBytes int64
	// SpoolDir is the directory the uploads in flight are spooled in ("":
	// the system's temporary directory): one of the api's own, which it
	// clears of an earlier process's leftovers at start.
	SpoolDir string
	// MetricsAddr serves Prometheus /metrics, off the public port ("":
	// nowhere); MetricsTLS, when set, over HTTPS only.
	MetricsAddr string
	MetricsTLS  *tls.Config
	// StatusMaxAge is how long one reading of Temporal for the status
	// metrics serves further scrapes.
	StatusMaxAge time.Duration
}

// BindServing binds how the api serves, over def (app.ServingDefaults:
// the api's own defaults).
func BindServing(s *Set, def Serving) *Serving {
	v := &Serving{}
	var spoolMiB int
	s.Duration(&v.HTTP.ReadHeader, "http-read-header-timeout", "OCTFLOW_HTTP_READ_HEADER_TIMEOUT", def.HTTP.ReadHeader, "longest time to read a request's headers")
	s.Duration(&v.HTTP.Read, "http-read-timeout", "OCTFLOW_HTTP_READ_TIMEOUT", def.HTTP.Read, "longest time to read a request, body included (uploads are paced instead; event streams read no body)")
	s.Duration(&v.HTTP.Write, "http-write-timeout", "OCTFLOW_HTTP_WRITE_TIMEOUT", def.HTTP.Write, "longest time from a request's headers to the end of its answer (not uploads; event streams bound each write instead)")
	s.Duration(&v.HTTP.Idle, "http-idle-timeout", "OCTFLOW_HTTP_IDLE_TIMEOUT", def.HTTP.Idle, "how long a kept-alive connection may wait for its next request")
	s.Int(&v.HTTP.MaxHeaderBytes, "http-max-header-bytes", "OCTFLOW_HTTP_MAX_HEADER_BYTES", def.HTTP.MaxHeaderBytes, "largest request headers, bytes")
	s.Int(&v.Streams.Total, "sse-streams", "OCTFLOW_SSE_STREAMS", def.Streams.Total, "event streams (GET /v1/notifications) open at once (over it: 429)")
	s.Int(&v.Streams.PerToken, "sse-streams-per-token", "OCTFLOW_SSE_STREAMS_PER_TOKEN", def.Streams.PerToken, "event streams one token may hold open (over it: 429)")
	s.String(&v.SpoolDir, "spool-dir", "OCTFLOW_SPOOL_DIR", def.SpoolDir, "directory of the api's own where uploads in flight are spooled, encrypted, while they are checked; cleared of an earlier process's leftovers at start (default: the system's temporary directory, never cleared)")
	s.Int(&spoolMiB, "spool-max-mib", "OCTFLOW_SPOOL_MAX_MIB", int(def.SpoolMaxBytes>>20), "disk the uploads in flight may take in the spool together, MiB; each is charged twice its size, for its spool and its de-identified copy (over it: 503)")
	bindMetricsListener(s, &v.MetricsAddr, &v.MetricsTLS, def.MetricsAddr)
	s.Duration(&v.StatusMaxAge, "metrics-max-age", "OCTFLOW_METRICS_MAX_AGE", def.StatusMaxAge, "how long one reading of Temporal for the exam, queue and node metrics serves further scrapes")
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
		case spoolMiB < 1:
			return fmt.Errorf("OCTFLOW_SPOOL_MAX_MIB (--spool-max-mib) %d: want a positive size", spoolMiB)
		}
		v.SpoolMaxBytes = int64(spoolMiB) << 20
		return nil
	})
	return v
}
