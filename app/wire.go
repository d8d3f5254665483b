package app

// Wiring: config declares and parses every setting, into octflow's own
// vocabulary where one exists (exam.Policy, audit.Config); here the
// settings become the parts they configure. A check that is a part's own
// rule (the codec's keys, the callback allow-list's syntax, the spool's
// room for the largest upload) runs here, once, at start, through that
// part's own code, and its error names the variable, as config's do.

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"octflow/activities"
	"octflow/api"
	"octflow/api/intake"
	"octflow/audit"
	"octflow/callback"
	"octflow/codec"
	"octflow/config"
	"octflow/exam"
	"octflow/gpuworker"
	"octflow/inference"
	"octflow/storage"
)

// Codec opens the codec that seals Temporal payloads with the keys k.
func Codec(k config.CodecKeys) (*codec.Codec, error) {
	keys, err := codec.ParseKeys(k.JSON)
	var c *codec.Codec
	if err == nil {
		c, err = codec.New(keys)
	}
	if err != nil {
		return nil, fmt.Errorf("OCTFLOW_CODEC_KEYS(_FILE): %w", err)
	}
	return c, nil
}

// NodeQueue is the shared queue of a GPU node bound to campus ("":
// every campus, on queue), checked against the keys its codec holds: a
// bound node serves its campus's own queue and needs that campus's keys;
// a node holding some campuses' keys only is bound to one of them (on
// the shared queue it would take stages it cannot open).
func NodeQueue(c *codec.Codec, campus, queue string) (string, error) {
	if campus == "" {
		if !c.OpensEveryScope() {
			return "", errors.New("OCTFLOW_NODE_CAMPUS (--campus): this node holds some campuses' payload keys only (octflow node-keys): name the campus it serves")
		}
		return queue, nil
	}
	if err := exam.ValidateCampus(campus); err != nil {
		return "", fmt.Errorf("OCTFLOW_NODE_CAMPUS (--campus): %w", err)
	}
	if queue != exam.GPUQueue && queue != exam.CampusGPUQueue(campus) {
		return "", fmt.Errorf("OCTFLOW_NODE_CAMPUS (--campus) %s serves %s: leave OCTFLOW_GPU_QUEUE (--task-queue, %s) unset", campus, exam.CampusGPUQueue(campus), queue)
	}
	if !c.Opens(codec.CampusScope(campus)) || !c.Opens(codec.System) {
		return "", fmt.Errorf("OCTFLOW_CODEC_KEYS(_FILE): the keys do not open campus %s's payloads (or the fleet's): make them with octflow node-keys --campus %s", campus, campus)
	}
	return exam.CampusGPUQueue(campus), nil
}

// IdentityCodec opens the codec that seals patients' identities with the
// keys k (none: nil), refusing keys that the payload codec's keys share:
// a GPU node holds those, and must not open an identity.
func IdentityCodec(k, payload config.CodecKeys) (*codec.Codec, error) {
	if len(k.JSON) == 0 {
		return nil, nil
	}
	keys, err := codec.ParseKeys(k.JSON)
	var c *codec.Codec
	if err == nil {
		c, err = codec.New(keys)
	}
	if err != nil {
		return nil, fmt.Errorf("OCTFLOW_IDENTITY_KEYS(_FILE): %w", err)
	}
	if p, err := codec.ParseKeys(payload.JSON); err == nil {
		for _, pk := range p.Keys {
			for id, ik := range keys.Keys {
				if sameKey(pk, ik) {
					return nil, fmt.Errorf("OCTFLOW_IDENTITY_KEYS(_FILE): key %q is also a payload key (OCTFLOW_CODEC_KEYS), which GPU nodes hold: make identity keys of their own", id)
				}
			}
		}
	}
	return c, nil
}

// sameKey says whether two base64 keys are the same bytes, however each
// is written (padding, alphabet).
func sameKey(a, b string) bool {
	decode := func(s string) []byte {
		s = strings.TrimRight(strings.TrimSpace(s), "=")
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			if raw, err := enc.DecodeString(s); err == nil {
				return raw
			}
		}
		return []byte(s)
	}
	return bytes.Equal(decode(a), decode(b))
}

// CallbackGuard compiles the callback allow-list.
func CallbackGuard(w config.Webhooks) (*callback.Guard, error) {
	g, err := callback.New(w.Allow)
	if err != nil {
		return nil, fmt.Errorf("OCTFLOW_CALLBACK_ALLOW: %w", err)
	}
	return g, nil
}

// Webhooks is what the notify stage delivers report-ready events with,
// checked by guard.
func Webhooks(w config.Webhooks, guard *callback.Guard) *activities.Webhooks {
	return &activities.Webhooks{Guard: guard, Secrets: w.Secrets, PublicURL: w.PublicURL}
}

// Models are the served models of the stages pointed at one, by stage
// (config.BindModels); every other stage runs its Go reference
// implementation.
func Models(m config.Models) map[exam.Stage]inference.Model {
	out := map[exam.Stage]inference.Model{}
	for stage, s := range m {
		out[stage] = inference.Model{URL: s.URL, Input: s.Input, Output: s.Output, Client: &http.Client{Timeout: 5 * time.Minute}}
	}
	return out
}

// DeviceRate is each device's submission limit.
func DeviceRate(r config.DeviceRate) intake.RateLimit {
	return intake.RateLimit{PerMinute: r.PerMinute, Burst: r.Burst}
}

// UploadDefaults are the gateway's upload limits unless configured.
func UploadDefaults() config.Uploads {
	return config.Uploads{MaxScanBytes: 512 << 20, Validating: 4, ValidationBytes: intake.DefaultValidationBytes, PerDevice: 2,
		Idle: 30 * time.Second, MinRate: 16 << 10}
}

// GPUNodeDefaults are a GPU node's settings unless configured: named
// after its host, its GPUs found where NVML is (gpuworker.SourceAuto),
// serving the shared GPU queue.
func GPUNodeDefaults(host string) config.GPUNode {
	return config.GPUNode{ID: "gpu@" + host, Source: gpuworker.SourceAuto, GPUs: 1, Model: "simulated GPU", MemoryGiB: 24,
		Queue: exam.GPUQueue, ReportEvery: 10 * time.Second, CacheMiB: 1024, Slowdown: 1}
}

// ServingDefaults are how the gateway serves unless configured.
func ServingDefaults() config.Serving {
	return config.Serving{HTTP: config.DefaultHTTPLimits(), Streams: config.Streams{Total: 256, PerToken: 8},
		SpoolMaxBytes: intake.DefaultSpoolMaxBytes, MetricsAddr: "127.0.0.1:9464", StatusMaxAge: api.DefaultStatusMaxAge}
}

// SetGateway sets the gateway's limits and codec origins (o.Gateway,
// made if nil) and the process's metrics listener (its address and
// certificate) from g and v. The
// spool must hold the largest upload (intake.SpoolBytesFor).
func (o *Options) SetGateway(g config.Gateway, v config.Serving) error {
	u := g.Uploads
	if need := intake.SpoolBytesFor(u.MaxScanBytes); v.SpoolMaxBytes < need {
		return fmt.Errorf("OCTFLOW_SPOOL_MAX_MIB (--spool-max-mib) %d holds no upload of OCTFLOW_MAX_SCAN_MIB: want at least %d",
			v.SpoolMaxBytes>>20, (need+1<<20-1)>>20)
	}
	if o.Gateway == nil {
		o.Gateway = &GatewayOptions{}
	}
	cfg := &o.Gateway.API
	cfg.Uploads = intake.Limits{Validating: u.Validating, ValidationBytes: u.ValidationBytes, PerDevice: u.PerDevice,
		Pace: intake.UploadPace{Idle: u.Idle, MinRate: u.MinRate}}
	cfg.MaxScanBytes, cfg.CodecOrigins = u.MaxScanBytes, g.CodecOrigins
	o.Gateway.HTTP = v.HTTP
	cfg.Streams, cfg.SpoolMaxBytes = api.StreamLimits{Total: v.Streams.Total, PerToken: v.Streams.PerToken}, v.SpoolMaxBytes
	cfg.StatusMaxAge, cfg.SpoolDir = v.StatusMaxAge, v.SpoolDir
	o.MetricsAddr, o.MetricsTLS = v.MetricsAddr, v.MetricsTLS
	return nil
}

// AuditTrail opens the audit trail a: to the collector through the
// local journal when one is set, else unsampled JSON lines to its log
// file or stderr. The caller closes it.
func AuditTrail(a config.Audit, src audit.Source, log *zap.Logger) (audit.Sink, io.Closer, error) {
	if a.Collector != "" {
		src.Site = a.Site
		t, err := audit.Open(a.Config, src, log.Named("audit"))
		if err != nil {
			return nil, nil, fmt.Errorf("OCTFLOW_AUDIT_COLLECTOR: %w", err)
		}
		return t, t, nil
	}
	if a.LogFile == "" {
		return audit.NewLogSink(zapcore.Lock(os.Stderr), src), io.NopCloser(nil), nil
	}
	f, err := os.OpenFile(a.LogFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("OCTFLOW_AUDIT_LOG: %w", err)
	}
	return audit.NewLogSink(zapcore.AddSync(f), src), f, nil
}

// storageConfig is how the object store is reached from the settings s.
func storageConfig(s config.S3) storage.Config {
	return storage.Config{Endpoint: s.Endpoint, AccessKey: s.AccessKey, SecretKey: s.SecretKey, Bucket: s.Bucket,
		UseTLS: s.UseTLS, Region: s.Region, CAFile: s.CAFile}
}
