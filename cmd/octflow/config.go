package main

import (
	"context"
	"encoding/json"
	"flag"
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
	"octflow/exam"
	"octflow/inference"
	"octflow/storage"
)

// envDefault returns the environment variable name's value, or def.
func envDefault(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

// stackConfig is how a process finds the shared services.
type stackConfig struct {
	TemporalAddr string
	Namespace    string
	S3           storage.Config
}

// bind registers the flags shared by api, worker and gpuworker.
func (c *stackConfig) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.TemporalAddr, "temporal-addr", envDefault("OCTFLOW_TEMPORAL_ADDR", "127.0.0.1:7233"), "Temporal frontend host:port (OCTFLOW_TEMPORAL_ADDR)")
	fs.StringVar(&c.Namespace, "namespace", envDefault("OCTFLOW_NAMESPACE", "default"), "Temporal namespace (OCTFLOW_NAMESPACE)")
	fs.StringVar(&c.S3.Endpoint, "s3-endpoint", envDefault("OCTFLOW_S3_ENDPOINT", "127.0.0.1:9000"), "S3 endpoint host:port (OCTFLOW_S3_ENDPOINT)")
	fs.StringVar(&c.S3.Bucket, "s3-bucket", envDefault("OCTFLOW_S3_BUCKET", "octflow"), "S3 bucket (OCTFLOW_S3_BUCKET)")
	fs.BoolVar(&c.S3.UseTLS, "s3-tls", envDefault("OCTFLOW_S3_TLS", "false") == "true", "use https for S3 (OCTFLOW_S3_TLS)")
	// Keys come only from the environment, never from flags (they would show in ps).
	c.S3.AccessKey = os.Getenv("OCTFLOW_S3_ACCESS_KEY")
	c.S3.SecretKey = os.Getenv("OCTFLOW_S3_SECRET_KEY")
}

// backendsFromEnv points image stages at served models. OCTFLOW_MODEL_DENOISE,
// OCTFLOW_MODEL_LAYERS and OCTFLOW_MODEL_LESIONS each hold a KServe v2 model
// URL (http://triton:8000/v2/models/NAME); OCTFLOW_MODEL_<STAGE>_INPUT and
// _OUTPUT name its tensors. An unset stage runs the pure-Go reference.
func backendsFromEnv() (inference.Backends, error) {
	var b inference.Backends
	for _, stage := range []string{"DENOISE", "LAYERS", "LESIONS"} {
		name := "OCTFLOW_MODEL_" + stage
		raw := os.Getenv(name)
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return b, fmt.Errorf("%s: %q is not an http(s) model URL", name, raw)
		}
		m := inference.Model{URL: raw, Input: os.Getenv(name + "_INPUT"), Output: os.Getenv(name + "_OUTPUT"),
			Client: &http.Client{Timeout: 5 * time.Minute}}
		switch stage {
		case "DENOISE":
			b.Denoise = inference.ModelDenoiser{Model: m}
		case "LAYERS":
			b.Layers = inference.ModelSegmenter{Model: m}
		case "LESIONS":
			b.Lesions = inference.ModelLesionMarker{Model: m}
		}
	}
	return b, nil
}

// policyFromEnv reads the scheduling policy overrides.
func policyFromEnv(def exam.Policy) (exam.Policy, error) {
	def.RetryBase = envDuration("OCTFLOW_RETRY_BASE", def.RetryBase)
	def.RetryCap = envDuration("OCTFLOW_RETRY_CAP", def.RetryCap)
	def.StageTimeout = envDuration("OCTFLOW_STAGE_TIMEOUT", def.StageTimeout)
	def.HeartbeatTimeout = envDuration("OCTFLOW_HEARTBEAT_TIMEOUT", def.HeartbeatTimeout)
	def.MaxAttempts = int32(envInt("OCTFLOW_MAX_ATTEMPTS", int(def.MaxAttempts)))
	def.UrgentSLA = envDuration("OCTFLOW_URGENT_SLA", def.UrgentSLA)
	def.ReviewWindow = envDuration("OCTFLOW_REVIEW_WINDOW", def.ReviewWindow)
	def.ReviewReminder = envDuration("OCTFLOW_REVIEW_REMINDER", def.ReviewReminder)
	def = def.WithDefaults()
	def.Aging = map[exam.Priority]time.Duration{
		exam.Normal: envDuration("OCTFLOW_AGING_NORMAL", def.Aging[exam.Normal]),
		exam.Low:    envDuration("OCTFLOW_AGING_LOW", def.Aging[exam.Low]),
	}
	if s := os.Getenv("OCTFLOW_BUCKET_WEIGHTS"); s != "" {
		w, err := parseWeights(s)
		if err != nil {
			return def, fmt.Errorf("OCTFLOW_BUCKET_WEIGHTS: %w", err)
		}
		def.Weights = w
	}
	return def, nil
}

// parseWeights reads "urgent/normal/low" fairness weights such as "60/35/5".
func parseWeights(s string) (map[exam.Priority]float32, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return nil, fmt.Errorf("bucket weights %q: want urgent/normal/low, e.g. 60/35/5", s)
	}
	w := map[exam.Priority]float32{}
	for i, b := range []exam.Priority{exam.Urgent, exam.Normal, exam.Low} {
		f, err := strconv.ParseFloat(strings.TrimSpace(parts[i]), 32)
		if err != nil || f <= 0 {
			return nil, fmt.Errorf("bucket weights %q: %s weight must be a positive number", s, b)
		}
		w[b] = float32(f)
	}
	return w, nil
}

func openStore(ctx context.Context, cfg storage.Config) (*storage.Store, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		s, err := storage.Open(ctx, cfg)
		if err == nil {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// loadPseudonymizer reads the HMAC key for patient pseudonyms from
// OCTFLOW_PSEUDONYM_KEY_FILE (preferred) or OCTFLOW_PSEUDONYM_KEY.
func loadPseudonymizer() (*api.Pseudonymizer, error) {
	key := os.Getenv("OCTFLOW_PSEUDONYM_KEY")
	if path := os.Getenv("OCTFLOW_PSEUDONYM_KEY_FILE"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read pseudonym key: %w", err)
		}
		key = strings.TrimSpace(string(b))
	}
	if len(key) < 16 {
		return nil, fmt.Errorf("OCTFLOW_PSEUDONYM_KEY_FILE or OCTFLOW_PSEUDONYM_KEY must hold a key of at least 16 characters")
	}
	return api.NewPseudonymizer([]byte(key)), nil
}

// newLogger builds the process logger: JSON in production, readable
// console lines in dev.
func newLogger(dev bool) *zap.Logger {
	if dev {
		cfg := zap.NewDevelopmentConfig()
		cfg.DisableStacktrace = true
		cfg.Level = zap.NewAtomicLevelAt(zapcore.InfoLevel)
		cfg.EncoderConfig.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		l, _ := cfg.Build()
		return l
	}
	l, _ := zap.NewProduction()
	return l
}

// webhooksFromEnv reads the callback allow-list, the webhook signing
// secrets and the api's public URL.
func webhooksFromEnv() (*activities.Webhooks, error) {
	guard, err := activities.NewCallbackGuard(os.Getenv("OCTFLOW_CALLBACK_ALLOW"))
	if err != nil {
		return nil, err
	}
	secrets := map[string]string{}
	if path := os.Getenv("OCTFLOW_WEBHOOK_SECRETS_FILE"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read webhook secrets: %w", err)
		}
		if err := json.Unmarshal(b, &secrets); err != nil {
			return nil, fmt.Errorf("parse %s (want {\"campus\": \"secret\", \"*\": \"default\"}): %w", path, err)
		}
	}
	if s := os.Getenv("OCTFLOW_WEBHOOK_SECRET"); s != "" {
		secrets["*"] = s
	}
	return &activities.Webhooks{Guard: guard, Secrets: secrets,
		PublicURL: envDefault("OCTFLOW_PUBLIC_URL", "http://127.0.0.1:8080")}, nil
}

// deviceRateFromEnv reads each device's submission limit.
func deviceRateFromEnv(def api.RateLimit) api.RateLimit {
	if v, err := strconv.ParseFloat(os.Getenv("OCTFLOW_DEVICE_RATE_PER_MINUTE"), 64); err == nil && v > 0 {
		def.PerMinute = v
	}
	def.Burst = envInt("OCTFLOW_DEVICE_BURST", def.Burst)
	return def
}
