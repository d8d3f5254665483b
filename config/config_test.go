package config

import (
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"octflow/exam"
)

func rate60() DeviceRate { return DeviceRate{PerMinute: 60, Burst: 20} }

func production() exam.Policy { return exam.DefaultPolicy() }

// testPipeline declares stages as the pipeline does: two a served model
// may run, one it may not.
func testPipeline() exam.Pipeline {
	return exam.Pipeline{{Stage: exam.Denoise, Activity: "Denoise", GPU: true, Model: "DENOISE"},
		{Stage: exam.Layers, Activity: "SegmentLayers", GPU: true, Model: "LAYERS"}, {Stage: exam.Render, Activity: "RenderReport"}}
}

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestPolicyReadsOverridesFromTheEnvironmentAndFlags(t *testing.T) {
	s := New("api", env(map[string]string{
		"OCTFLOW_BUCKET_WEIGHTS": "70/25/5", "OCTFLOW_AGING_LOW": "10m", "OCTFLOW_RETRY_BASE": "1m", "OCTFLOW_RETRY_CAP": "20m",
		"OCTFLOW_CAMPUS_WEIGHTS": " north = 2, south=0.5",
	}))
	p := BindPolicy(s, production())
	if err := s.Parse([]string{"--retry-cap", "40m", "--aging-normal", "0s"}); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(p.Weights, map[exam.Priority]float32{exam.Urgent: 70, exam.Normal: 25, exam.Low: 5}) {
		t.Errorf("weights = %v", p.Weights)
	}
	if !maps.Equal(p.CampusWeights, map[string]float32{"north": 2, "south": 0.5}) {
		t.Errorf("campus weights = %v", p.CampusWeights)
	}
	if p.Aging[exam.Low] != 10*time.Minute || p.Aging[exam.Normal] != 0 {
		t.Errorf("aging = %v (0 for normal was asked for: never promoted)", p.Aging)
	}
	if p.RetryBase != time.Minute || p.RetryCap != 40*time.Minute || p.MaxAttempts != 3 {
		t.Errorf("retry = %v…%v, %d attempts (the flag wins over the variable)", p.RetryBase, p.RetryCap, p.MaxAttempts)
	}
}

func TestABadValueIsRefusedNamingItsVariable(t *testing.T) {
	cases := []struct {
		vars map[string]string
		want []string // what the error must name
	}{
		{map[string]string{"OCTFLOW_RETRY_BASE": "5min"}, []string{`OCTFLOW_RETRY_BASE="5min"`, "not a duration"}},
		{map[string]string{"OCTFLOW_MAX_ATTEMPTS": "three"}, []string{"OCTFLOW_MAX_ATTEMPTS", "not a whole number"}},
		{map[string]string{"OCTFLOW_BUCKET_WEIGHTS": "60/35"}, []string{"OCTFLOW_BUCKET_WEIGHTS"}},
		{map[string]string{"OCTFLOW_BUCKET_WEIGHTS": "60/35/0"}, []string{"OCTFLOW_BUCKET_WEIGHTS", "low weight"}},
		{map[string]string{"OCTFLOW_CAMPUS_WEIGHTS": "north:2"}, []string{"OCTFLOW_CAMPUS_WEIGHTS", "campus=weight"}},
		{map[string]string{"OCTFLOW_CAMPUS_WEIGHTS": "north=heavy"}, []string{"OCTFLOW_CAMPUS_WEIGHTS", "a number"}},
		{map[string]string{"OCTFLOW_CAMPUS_WEIGHTS": "north=1,north=2"}, []string{"OCTFLOW_CAMPUS_WEIGHTS", "twice"}},
		{map[string]string{"OCTFLOW_S3_TLS": "yes please"}, []string{"OCTFLOW_S3_TLS", "true or false"}},
		{map[string]string{"OCTFLOW_HEARTBEAT_TIMEOUT": "-5s"}, []string{"OCTFLOW_HEARTBEAT_TIMEOUT", "negative"}},
		{map[string]string{"OCTFLOW_MODEL_DENOISE": "triton:8000"}, []string{"OCTFLOW_MODEL_DENOISE", "model URL"}},
		{map[string]string{"OCTFLOW_PUBLIC_URL": "octflow.example"}, []string{"OCTFLOW_PUBLIC_URL", "http(s) URL"}},
		{map[string]string{"OCTFLOW_CODEC_KEYS_FILE": "/nonexistent/keys.json"}, []string{"OCTFLOW_CODEC_KEYS_FILE"}},
		{map[string]string{"OCTFLOW_LOG_LEVEL": "chatty"}, []string{"OCTFLOW_LOG_LEVEL"}},
		{map[string]string{"OCTFLOW_PSEUDONYM_KEY": "short"}, []string{"OCTFLOW_PSEUDONYM_KEY"}},
		{map[string]string{"OCTFLOW_DEVICE_BURST": "0"}, []string{"OCTFLOW_DEVICE_BURST"}},
		// A policy that parses but cannot work: its own rule refuses it.
		{map[string]string{"OCTFLOW_MAX_ATTEMPTS": "0"}, []string{"OCTFLOW_MAX_ATTEMPTS", "at least 1"}},
		{map[string]string{"OCTFLOW_MAX_ATTEMPTS": "4294967297"}, []string{"OCTFLOW_MAX_ATTEMPTS", "not a whole number"}},
		{map[string]string{"OCTFLOW_RETRY_BASE": "10m", "OCTFLOW_RETRY_CAP": "1m"}, []string{"OCTFLOW_RETRY_CAP", "at least the retry base"}},
		{map[string]string{"OCTFLOW_HEARTBEAT_TIMEOUT": "20m"}, []string{"OCTFLOW_HEARTBEAT_TIMEOUT", "below the stage timeout"}},
		{map[string]string{"OCTFLOW_MAX_LOST_ATTEMPTS": "-1", "OCTFLOW_REVIEW_WINDOW": "0s"},
			[]string{"OCTFLOW_MAX_LOST_ATTEMPTS", "OCTFLOW_REVIEW_WINDOW"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(slices.Sorted(func(yield func(string) bool) {
			for k := range c.vars {
				if !yield(k) {
					return
				}
			}
		}), ","), func(t *testing.T) {
			vars := map[string]string{"OCTFLOW_PSEUDONYM_KEY": "0123456789abcdef", "OCTFLOW_CODEC_KEYS": "{}"}
			for k, v := range c.vars {
				vars[k] = v
			}
			s := New("api", env(vars))
			BindStack(s)
			BindPolicy(s, production())
			BindModels(s, testPipeline())
			BindWebhooks(s)
			BindLog(s, "json")
			BindPseudonymKey(s)
			BindDeviceRate(s, rate60())
			BindCodec(s)
			err := s.Parse(nil)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestEveryFlagHasAnEnvironmentVariable(t *testing.T) {
	s := New("api", env(nil))
	BindStack(s)
	BindPolicy(s, production())
	BindModels(s, testPipeline())
	BindWebhooks(s)
	BindLog(s, "json")
	BindDeviceRate(s, rate60())
	BindCodec(s)
	s.FlagSet().VisitAll(func(f *flag.Flag) {
		if !strings.Contains(f.Usage, "(OCTFLOW_") {
			t.Errorf("flag --%s has no variable: %q", f.Name, f.Usage)
		}
	})
	if !slices.Contains(s.Vars(), "OCTFLOW_S3_SECRET_KEY") {
		t.Errorf("the secrets are not among the variables read: %v", s.Vars())
	}
}

func TestModelsPointStagesAtServedModels(t *testing.T) {
	s := New("gpuworker", env(map[string]string{"OCTFLOW_MODEL_LAYERS": "http://triton:8000/v2/models/layers",
		"OCTFLOW_MODEL_LAYERS_OUTPUT": "retina"}))
	m := BindModels(s, testPipeline())
	if err := s.Parse(nil); err != nil {
		t.Fatal(err)
	}
	want := Models{exam.Layers: Model{URL: "http://triton:8000/v2/models/layers", Output: "retina"}}
	if !maps.Equal(*m, want) {
		t.Errorf("models = %+v, want %+v", *m, want)
	}
}

func TestTheCodecKeysAreReadFromTheirFileOrElseTheirVariable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "codec-keys.json")
	if err := os.WriteFile(file, []byte(`{"active": "from-file"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		vars    map[string]string
		want    string
		wantErr string
	}{
		{"the variable", map[string]string{"OCTFLOW_CODEC_KEYS": `{"active": "inline"}`}, `{"active": "inline"}`, ""},
		{"the file wins", map[string]string{"OCTFLOW_CODEC_KEYS": `{"active": "inline"}`, "OCTFLOW_CODEC_KEYS_FILE": file},
			`{"active": "from-file"}`, ""},
		{"none is refused", nil, "", "no keys are set"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New("worker", env(c.vars))
			k := BindCodec(s)
			err := s.Parse(nil)
			switch {
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("error %v, want one saying %q", err, c.wantErr)
			case c.wantErr == "" && err != nil:
				t.Fatal(err)
			case string(k.JSON) != c.want:
				t.Errorf("keys %q, want %q", k.JSON, c.want)
			}
		})
	}
}

func TestTheS3KeysAreReadFromTheirFilesOrElseTheirVariables(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	access, secret := file("s3-access-key", "ak-from-file\n"), file("s3-secret-key", "  sk-from-file\n")
	cases := []struct {
		name       string
		vars       map[string]string
		wantAccess string
		wantSecret string
		wantErr    string
	}{
		{"variables", map[string]string{"OCTFLOW_S3_ACCESS_KEY": "ak", "OCTFLOW_S3_SECRET_KEY": "sk"}, "ak", "sk", ""},
		{"files, trimmed", map[string]string{"OCTFLOW_S3_ACCESS_KEY_FILE": access, "OCTFLOW_S3_SECRET_KEY_FILE": secret},
			"ak-from-file", "sk-from-file", ""},
		{"the file wins over the variable", map[string]string{"OCTFLOW_S3_ACCESS_KEY": "ak", "OCTFLOW_S3_ACCESS_KEY_FILE": access,
			"OCTFLOW_S3_SECRET_KEY": "sk"}, "ak-from-file", "sk", ""},
		{"a missing file is an error naming its variable", map[string]string{"OCTFLOW_S3_SECRET_KEY_FILE": filepath.Join(dir, "none")},
			"", "", "OCTFLOW_S3_SECRET_KEY_FILE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New("worker", env(c.vars))
			st := BindStack(s)
			err := s.Parse(nil)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.S3.AccessKey != c.wantAccess || st.S3.SecretKey != c.wantSecret {
				t.Errorf("keys %q/%q, want %q/%q", st.S3.AccessKey, st.S3.SecretKey, c.wantAccess, c.wantSecret)
			}
			for _, v := range []string{"OCTFLOW_S3_ACCESS_KEY_FILE", "OCTFLOW_S3_SECRET_KEY_FILE"} {
				if !slices.Contains(s.Vars(), v) {
					t.Errorf("%s is not among the variables read", v)
				}
			}
		})
	}
}
