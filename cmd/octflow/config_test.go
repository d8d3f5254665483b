package main

import (
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
