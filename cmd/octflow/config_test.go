package main

import (
	"slices"
	"testing"
	"time"

	"octflow/exam"
)

func TestPolicyFromEnvReadsOverrides(t *testing.T) {
	t.Setenv("OCTFLOW_BUCKET_WEIGHTS", "70/25/5")
	t.Setenv("OCTFLOW_AGING_LOW", "10m")
	t.Setenv("OCTFLOW_RETRY_BASE", "1m")
	p, err := policyFromEnv(exam.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if p.Weights[exam.Urgent] != 70 || p.Weights[exam.Normal] != 25 || p.Weights[exam.Low] != 5 {
		t.Errorf("weights = %v", p.Weights)
	}
	if p.AgingAfter(exam.Low) != 10*time.Minute || p.AgingAfter(exam.Normal) != 30*time.Minute || p.AgingAfter(exam.Urgent) != 0 {
		t.Errorf("aging = %v", p.Aging)
	}
	if p.RetryBase != time.Minute || p.MaxAttempts != 3 {
		t.Errorf("retry = %v, %d attempts", p.RetryBase, p.MaxAttempts)
	}
}

func TestParseWeightsRefusesNonsense(t *testing.T) {
	for _, s := range []string{"", "60/35", "60/35/0", "a/b/c", "60/-1/5"} {
		if _, err := parseWeights(s); err == nil {
			t.Errorf("parseWeights(%q) accepted", s)
		}
	}
}

func TestBackendsFromEnvPointsStagesAtModels(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		want    []string // denoise, layers, lesions algorithm names
		wantErr bool
	}{
		{"none: all reference", nil, []string{"nlm-log/v1", "chiu-graph/v1", "fluid-drusen/v1"}, false},
		{"layers on triton", map[string]string{"OCTFLOW_MODEL_LAYERS": "http://triton:8000/v2/models/layers"},
			[]string{"nlm-log/v1", "kserve:http://triton:8000/v2/models/layers", "fluid-drusen/v1"}, false},
		{"not a URL", map[string]string{"OCTFLOW_MODEL_DENOISE": "triton:8000"}, nil, true},
		{"wrong scheme", map[string]string{"OCTFLOW_MODEL_LESIONS": "grpc://triton:8001/v2/models/x"}, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			b, err := backendsFromEnv()
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want error %v", err, c.wantErr)
			}
			if c.wantErr {
				return
			}
			b = b.WithDefaults()
			if got := []string{b.Denoise.Name(), b.Layers.Name(), b.Lesions.Name()}; !slices.Equal(got, c.want) {
				t.Errorf("stages = %v, want %v", got, c.want)
			}
		})
	}
}
