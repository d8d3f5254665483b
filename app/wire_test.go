package app

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"

	"octflow/api"
	"octflow/api/intake"
	"octflow/audit"
	"octflow/codec"
	"octflow/config"
	"octflow/exam"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

// parse parses vars with the settings bind binds, failing the test on
// an error: what is wired here has parsed.
func parse(t *testing.T, vars map[string]string, bind func(*config.Set)) {
	t.Helper()
	s := config.New("test", env(vars))
	bind(s)
	if err := s.Parse(nil); err != nil {
		t.Fatal(err)
	}
}

func TestThePartsOwnRulesRefuseABadValueNamingItsVariable(t *testing.T) {
	short, _ := json.Marshal(codec.Keys{Active: "k1", Keys: map[string]string{"k1": base64.StdEncoding.EncodeToString([]byte("short"))}})
	cases := []struct {
		name string
		vars map[string]string
		wire func(*testing.T, map[string]string) error
		want string
	}{
		{"codec keys that are not JSON", map[string]string{"OCTFLOW_CODEC_KEYS": "k1=secret"}, wireCodec, "OCTFLOW_CODEC_KEYS(_FILE)"},
		{"a codec key of the wrong size", map[string]string{"OCTFLOW_CODEC_KEYS": string(short)}, wireCodec, "want 32 bytes"},
		{"a callback range that is no range", map[string]string{"OCTFLOW_CALLBACK_ALLOW": "10.0.0.0/33"}, wireGuard, "OCTFLOW_CALLBACK_ALLOW"},
		{"a spool that holds no upload of the largest scan", map[string]string{"OCTFLOW_SPOOL_MAX_MIB": "1000"}, wireGateway,
			"OCTFLOW_SPOOL_MAX_MIB (--spool-max-mib) 1000 holds no upload of OCTFLOW_MAX_SCAN_MIB"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.wire(t, c.vars)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

func wireCodec(t *testing.T, vars map[string]string) error {
	var k *config.CodecKeys
	parse(t, vars, func(s *config.Set) { k = config.BindCodec(s) })
	_, err := Codec(*k)
	return err
}

func wireGuard(t *testing.T, vars map[string]string) error {
	var w *config.Webhooks
	parse(t, vars, func(s *config.Set) { w = config.BindWebhooks(s) })
	_, err := CallbackGuard(*w)
	return err
}

func wireGateway(t *testing.T, vars map[string]string) error {
	var g *config.Gateway
	var v *config.Serving
	parse(t, vars, func(s *config.Set) {
		g, v = config.BindGateway(s, UploadDefaults()), config.BindServing(s, ServingDefaults())
	})
	var o Options
	return o.SetGateway(*g, *v)
}

func TestTheWiredPartsCarryTheirSettings(t *testing.T) {
	keys, err := codec.NewKeys("2026-11")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(keys)
	vars := map[string]string{"OCTFLOW_CODEC_KEYS": string(raw), "OCTFLOW_CALLBACK_ALLOW": "127.0.0.0/8",
		"OCTFLOW_WEBHOOK_SECRET": "s3cret", "OCTFLOW_PUBLIC_URL": "https://octflow.example",
		"OCTFLOW_MODEL_LAYERS": "http://triton:8000/v2/models/layers", "OCTFLOW_DEVICE_BURST": "7",
		"OCTFLOW_SPOOL_MAX_MIB": "64", "OCTFLOW_MAX_SCAN_MIB": "16", "OCTFLOW_UPLOAD_MIN_RATE": "1000", "OCTFLOW_SSE_STREAMS": "9"}
	var (
		k *config.CodecKeys
		w *config.Webhooks
		m *config.Models
		r *config.DeviceRate
		g *config.Gateway
		v *config.Serving
	)
	parse(t, vars, func(s *config.Set) {
		k, w, m = config.BindCodec(s), config.BindWebhooks(s), config.BindModels(s, exam.Pipeline{{Stage: exam.Layers, Activity: "SegmentLayers", GPU: true, Model: "LAYERS"}})
		r = config.BindDeviceRate(s, config.DeviceRate{PerMinute: 60, Burst: 20})
		g, v = config.BindGateway(s, UploadDefaults()), config.BindServing(s, ServingDefaults())
	})
	sealer, err := Codec(*k)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := sealer.Encode([]*commonpb.Payload{{Data: []byte("patient")}})
	if err != nil {
		t.Fatal(err)
	}
	opened, err := sealer.Decode(sealed)
	if err != nil || strings.Contains(string(sealed[0].GetData()), "patient") || string(opened[0].GetData()) != "patient" {
		t.Errorf("sealed %q, opened %q (%v)", sealed[0].GetData(), opened[0].GetData(), err)
	}
	guard, err := CallbackGuard(*w)
	if err != nil {
		t.Fatal(err)
	}
	if hooks := Webhooks(*w, guard); hooks.Guard != guard || hooks.Secrets["*"] != "s3cret" || hooks.PublicURL != "https://octflow.example" {
		t.Errorf("webhooks %+v", hooks)
	}
	if models := Models(*m); len(models) != 1 || models[exam.Layers].Name() != "kserve:http://triton:8000/v2/models/layers" ||
		models[exam.Layers].Client == nil || models[exam.Layers].Client.Timeout == 0 {
		t.Errorf("served models %+v", models)
	}
	if got := DeviceRate(*r); got != (intake.RateLimit{PerMinute: 60, Burst: 7}) {
		t.Errorf("device rate %+v", got)
	}
	var o Options
	if err := o.SetGateway(*g, *v); err != nil {
		t.Fatal(err)
	}
	gw := o.Gateway.API
	if gw.MaxScanBytes != 16<<20 || gw.SpoolMaxBytes != 64<<20 || gw.Uploads.Pace.MinRate != 1000 || gw.Uploads.Validating != 4 ||
		gw.Uploads.ValidationBytes != intake.DefaultValidationBytes || gw.Streams.Total != 9 || gw.Streams.PerToken != 8 ||
		gw.StatusMaxAge != api.DefaultStatusMaxAge || o.MetricsAddr != "127.0.0.1:9464" || o.Gateway.HTTP != config.DefaultHTTPLimits() {
		t.Errorf("gateway options %+v, metrics on %q", gw, o.MetricsAddr)
	}
}

func TestWithoutACollectorTheAuditTrailIsJSONLinesInItsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	var g *config.Gateway
	parse(t, map[string]string{"OCTFLOW_AUDIT_LOG": path}, func(s *config.Set) { g = config.BindGateway(s, UploadDefaults()) })
	trail, closer, err := AuditTrail(g.Audit, audit.Source{ID: "api@test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := trail.Record(audit.Event{ID: audit.PatientRecord, Action: audit.Read, User: audit.User{ID: "dr-lee"}}); err != nil {
		t.Fatal(err)
	}
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), "dr-lee") || !strings.HasPrefix(string(b), "{") {
		t.Errorf("audit log %q %v", b, err)
	}
}

func TestTheStoreIsReachedAsSet(t *testing.T) {
	var st *config.Stack
	parse(t, map[string]string{"OCTFLOW_S3_ENDPOINT": "s3.example:443", "OCTFLOW_S3_TLS": "true", "OCTFLOW_S3_REGION": "eu-west-1",
		"OCTFLOW_S3_CA_FILE": "/etc/ca.pem", "OCTFLOW_S3_ACCESS_KEY": "ak", "OCTFLOW_S3_SECRET_KEY": "sk"},
		func(s *config.Set) { st = config.BindStack(s) })
	got := storageConfig(st.S3)
	if got.Endpoint != "s3.example:443" || !got.UseTLS || got.Region != "eu-west-1" || got.CAFile != "/etc/ca.pem" ||
		got.AccessKey != "ak" || got.SecretKey != "sk" || got.Bucket != "octflow" {
		t.Errorf("storage config %+v", got)
	}
}

func TestIdentityKeysAreKeysOfTheirOwn(t *testing.T) {
	payload := config.CodecKeys{JSON: []byte(`{"active": "k1", "keys": {"k1": "` + strings.Repeat("A", 43) + `="}}`)}
	for _, tc := range []struct {
		name, keys string
		err        string // "" for none
	}{
		{"none: identities are not kept", "", ""},
		{"keys of their own", `{"active": "i1", "keys": {"i1": "` + strings.Repeat("B", 43) + `="}}`, ""},
		{"a payload key under another ID", `{"active": "i1", "keys": {"i1": "` + strings.Repeat("A", 43) + `="}}`, "also a payload key"},
		{"a payload key written with a line break", `{"active": "i1", "keys": {"i1": "` + strings.Repeat("A", 20) + `\n` + strings.Repeat("A", 23) + `="}}`, "also a payload key"},
		{"a payload key kept for old identities", `{"active": "i2", "keys": {"i2": "` + strings.Repeat("B", 43) + `=", "i1": "` + strings.Repeat("A", 43) + `="}}`, "also a payload key"},
		{"not keys", `{"active": "i1"}`, "OCTFLOW_IDENTITY_KEYS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := IdentityCodec(config.CodecKeys{JSON: []byte(tc.keys)}, payload)
			switch {
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("%v, want an error naming %q: a GPU node's payload keys must not open identities", err, tc.err)
			case tc.err == "" && (c == nil) != (tc.keys == ""):
				t.Fatalf("codec %v for keys %q", c, tc.keys)
			}
		})
	}
}

// A GPU node bound to a campus serves that campus's own queue and holds
// its keys; a node holding some campuses' keys only is never on the
// shared queue, where it would take stages it cannot open.
func TestANodeIsBoundToTheCampusWhoseKeysItHolds(t *testing.T) {
	payloadKeys, err := codec.NewKeys("k")
	if err != nil {
		t.Fatal(err)
	}
	full, _ := codec.New(payloadKeys)
	northKeys, err := codec.ScopeKeys(payloadKeys, codec.CampusScope("north"))
	if err != nil {
		t.Fatal(err)
	}
	north, _ := codec.New(northKeys)
	for _, tc := range []struct {
		name          string
		c             *codec.Codec
		campus, queue string
		want          string // "": refused
	}{
		{"every campus, shared queue", full, "", exam.GPUQueue, exam.GPUQueue},
		{"every campus's keys, bound to north", full, "north", exam.GPUQueue, exam.CampusGPUQueue("north")},
		{"north's keys, bound to north", north, "north", exam.GPUQueue, exam.CampusGPUQueue("north")},
		{"north's keys, its queue named", north, "north", exam.CampusGPUQueue("north"), exam.CampusGPUQueue("north")},
		{"north's keys, unbound", north, "", exam.GPUQueue, ""},
		{"north's keys, bound to south", north, "south", exam.GPUQueue, ""},
		{"bound to north, another queue named", full, "north", "oct-gpu-elsewhere", ""},
		{"a campus that is no name", full, "North Wing", exam.GPUQueue, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NodeQueue(tc.c, tc.campus, tc.queue)
			if tc.want == "" {
				if err == nil {
					t.Errorf("served %q, want a refusal", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("NodeQueue = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
